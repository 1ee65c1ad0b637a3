"""The scoring's distribution functions answer what scipy.stats answers, to the bit: sealed
methodology versions must score the same after the switch to scipy.special."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scoring.metrics.distributions import chi2_sf, normal_ppf, normal_sf, student_t_sf
from tests.scoring.reference import stats

EDGES = [-math.inf, -1e300, -40.0, -1e-12, 0.0, 1e-12, 40.0, 1e300, math.inf, math.nan]
GRID = [*EDGES, *np.linspace(-9, 9, 181)]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(
    ("ours", "theirs", "points"),
    [
        (normal_sf, lambda x: stats.norm.sf(x), GRID),
        (normal_ppf, lambda x: stats.norm.ppf(x), [-0.1, 0.0, 1e-300, *np.linspace(0, 1, 201), 1.0, 1.5]),
        (lambda x: chi2_sf(x, 1), lambda x: stats.chi2.sf(x, 1), [*GRID, *np.linspace(0, 60, 241)]),
    ],
    ids=["normal sf", "normal ppf", "chi2 sf"],
)
def test_one_argument_functions_match_scipy_stats(ours, theirs, points):
    differ = [
        (x, ours(x), float(theirs(x))) for x in points if not _same(ours(x), float(theirs(x)))
    ]
    assert not differ, differ[:5]


@pytest.mark.parametrize("df", [1, 2, 3, 9, 29, 119, 999, 1e7])
def test_student_t_tail_matches_scipy_stats(df):
    differ = [
        (t, student_t_sf(t, df), float(stats.t.sf(t, df)))
        for t in GRID
        if not _same(student_t_sf(t, df), float(stats.t.sf(t, df)))
    ]
    assert not differ, differ[:5]


def test_a_process_that_scores_never_imports_scipy_stats():
    import subprocess
    import sys

    code = "import scoring.metrics, sys; print('scipy.stats' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert done.stdout.strip() == "False"


def test_a_process_that_loads_the_arena_but_does_not_score_never_imports_scipy():
    # The admin imports the scoring's presentation, so every worker, web process and CLI verb
    # loads scoring.metrics: scipy.special (0.12 s of a 0.6 s start) waits for a first figure.
    import subprocess
    import sys

    code = (
        "import os, sys, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'arena.settings');"
        " django.setup(); import arena.cli, scoring.metrics, scoring.present;"
        " print('scipy' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert done.stdout.strip() == "False"
