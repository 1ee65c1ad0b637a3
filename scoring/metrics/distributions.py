"""The distribution functions the scoring reads, from `scipy.special`.

scipy.stats computes its normal, Student t and chi-squared tails and quantiles with these very
functions (plus argument checks), so the numbers are the same to the bit; a test holds them
equal over a grid with the edge cases. Importing scipy.stats costs about 1.2 s of every
process's start-up (each gunicorn and Celery worker, each CLI verb, the demo), for four calls.
scipy.special itself is imported on the first call, not with the module: the admin imports the
scoring's presentation, so every process that loads Django would otherwise pay its 0.12 s
(15 % of a CLI verb's start) whether it scores or not.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType


@cache
def special() -> ModuleType:
    """scipy.special, imported once, when a figure first needs it."""
    from scipy import special as module

    return module


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return float(special().ndtr(-z))


def normal_ppf(q: float) -> float:
    """The standard normal quantile of q (NaN outside [0, 1])."""
    return float(special().ndtri(q))


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    return float(special().stdtr(df, -t))


def chi2_sf(x: float, df: float) -> float:
    """P(X > x) for a chi-squared X with df degrees of freedom; 1 below its support, as
    scipy.stats answers (a likelihood ratio of -1e-12 from rounding is a ratio of 0)."""
    if x < 0:
        return 1.0
    return float(special().chdtrc(df, x))
