"""The libraries the scoring tests compare the scoring with, imported when a test first uses
one rather than by every xdist worker as it collects the suite: scipy.stats, statsmodels,
scikit-learn and arch (which brings pandas) cost a worker 1.3 of its 4.2 CPU-s of collecting,
eight times a CI run. `stats.norm.sf(x)` reads as with `from scipy import stats`."""

from __future__ import annotations

import importlib
from typing import Any


class _Module:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # pytest's collection looks for markers and fixtures this way
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


stats = _Module("scipy.stats")
sklearn_metrics = _Module("sklearn.metrics")
sklearn_calibration = _Module("sklearn.calibration")
properscoring = _Module("properscoring")
arch_bootstrap = _Module("arch.bootstrap")
statsmodels_api = _Module("statsmodels.api")
stattools = _Module("statsmodels.tsa.stattools")
multitest = _Module("statsmodels.stats.multitest")
proportion = _Module("statsmodels.stats.proportion")
