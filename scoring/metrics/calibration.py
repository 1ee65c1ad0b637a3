"""Calibration of binary forecasts: the reliability table with Wilson intervals, the expected
calibration error, the Murphy decomposition of the Brier score (with within-bin terms), and the
implied-confidence diagnostic read from bet sizes.

Bins are equal-width, 1/calibration_bins wide (a frozen constant), the last one closed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from scoring.metrics._arrays import NAN, FloatArray, IntArray, _pair, _vec
from scoring.metrics.distributions import normal_ppf
from scoring.metrics.proper import brier


def _bins(p: FloatArray, bins: int) -> tuple[IntArray, FloatArray]:
    """Equal-width bin of each p: [k/bins, (k+1)/bins), the last bin closed so p = 1 belongs to it.

    floor(bins * p) is right except within rounding of an edge, where the exact comparison with
    the edges decides (values such as 0.5 are common, so this path is not rare, just small).
    """
    edges = np.arange(bins + 1) / bins
    scaled = p * bins
    idx = np.clip(np.floor(scaled), 0, bins - 1).astype(np.intp)
    frac = scaled - idx
    near = np.flatnonzero((frac < 1e-9) | (frac > 1.0 - 1e-9))
    if near.size:
        idx[near] = np.searchsorted(edges[1:-1], p[near], side="right")
    return idx, edges


def _bin_sums(
    p: FloatArray, o: FloatArray, bins: int
) -> tuple[IntArray, FloatArray, IntArray, FloatArray, FloatArray]:
    idx, edges = _bins(p, bins)
    count = np.bincount(idx, minlength=bins)
    sum_p = np.bincount(idx, weights=p, minlength=bins)
    sum_o = np.bincount(idx, weights=o, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = sum_p / count
        freq = sum_o / count
    return idx, edges, count, mean_p, freq


def murphy(p: ArrayLike, o: ArrayLike, bins: int | None = None) -> dict[str, float]:
    """Brier decomposition with within-bin terms (Stephenson, Coelho & Jolliffe 2008).

    brier = rel - res + unc + wbv - wbc exactly (up to float rounding), with bins of width
    1/bins and each bin represented by its mean forecast, not its midpoint.
    """
    bins = C.calibration_bins if bins is None else bins
    p, o = _pair(p, o)
    n = p.size
    if n == 0:
        return dict.fromkeys(("rel", "res", "unc", "wbv", "wbc", "brier"), NAN) | {"n": 0}
    idx, _, count, mean_p, freq = _bin_sums(p, o, bins)
    used = count > 0
    n_k, p_k, o_k = count[used], mean_p[used], freq[used]
    base_rate = o.mean()
    # Deviations from the bin means, so a bin whose forecasts are all equal has exactly zero
    # within-bin variance (sums-of-squares shortcuts lose that to cancellation).
    dev_p = p - mean_p[idx]
    dev_o = o - freq[idx]
    return {
        "rel": float(np.sum(n_k * (p_k - o_k) ** 2) / n),
        "res": float(np.sum(n_k * (o_k - base_rate) ** 2) / n),
        "unc": float(base_rate * (1.0 - base_rate)),
        "wbv": float(np.dot(dev_p, dev_p) / n),
        "wbc": float(2.0 * np.dot(dev_o, dev_p) / n),
        "brier": float(np.mean((p - o) ** 2)),
        "n": int(n),
    }


def wilson_interval(
    successes: ArrayLike, n: ArrayLike, level: float | None = None
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval for a binomial proportion (NaN where n == 0)."""
    level = C.ci_level if level is None else level
    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    z = normal_ppf(0.5 + level / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = k / n
        denom = 1.0 + z * z / n
        centre = (f + z * z / (2.0 * n)) / denom
        half = z / denom * np.sqrt(f * (1.0 - f) / n + z * z / (4.0 * n * n))
    return centre - half, centre + half


def calibration(
    p: ArrayLike, o: ArrayLike, bins: int | None = None, level: float | None = None
) -> list[dict[str, Any]]:
    """Reliability table: every bin with lo, hi, n, mean_p, freq and a Wilson interval on freq.

    Empty bins are kept (n = 0, statistics None) so a reliability diagram has a fixed x axis.
    """
    bins = C.calibration_bins if bins is None else bins
    p, o = _pair(p, o)
    _, edges, count, mean_p, freq = _bin_sums(p, o, bins)
    w_lo, w_hi = wilson_interval(freq * count, count, level)
    rows = []
    for k in range(bins):
        filled = count[k] > 0
        rows.append(
            {
                "lo": float(edges[k]),
                "hi": float(edges[k + 1]),
                "n": int(count[k]),
                "mean_p": float(mean_p[k]) if filled else None,
                "freq": float(freq[k]) if filled else None,
                "freq_lo": float(w_lo[k]) if filled else None,
                "freq_hi": float(w_hi[k]) if filled else None,
            }
        )
    return rows


def ece(p: ArrayLike, o: ArrayLike, bins: int | None = None) -> float:
    """Expected calibration error: sum over bins of n_k / N * |freq_k - mean_p_k|."""
    bins = C.calibration_bins if bins is None else bins
    p, o = _pair(p, o)
    if p.size == 0:
        return NAN
    _, _, count, mean_p, freq = _bin_sums(p, o, bins)
    used = count > 0
    return float(np.sum(count[used] * np.abs(freq[used] - mean_p[used])) / p.size)


def implied_confidence_brier(
    amount: ArrayLike, cash: ArrayLike, side_yes: ArrayLike, o: ArrayLike
) -> float:
    """Forecaster Arena v1 diagnostic (not a proper score).

    c = min(amount / (max_bet_fraction * cash_before), 1); the implied forecast of YES is c for
    a YES bet and 1 - c for a NO bet; the Brier score of that against the outcome.
    """
    amount, cash, o = _vec(amount), _vec(cash), _vec(o)
    side_yes = np.asarray(side_yes, dtype=bool).reshape(-1)
    cap = C.max_bet_fraction * cash
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(cap > 0, np.minimum(amount / cap, 1.0), 1.0)
    return brier(np.where(side_yes, c, 1.0 - c), o)
