"""Closing-line value: how the price moved from a trade to the market's close (probability and
log-odds forms, de-vigged quotes), a naive mean test, and the edge label from a stationary
bootstrap of the CLV Sharpe ratio with an automatic block length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from core.methodology import seed as methodology_seed
from scoring.metrics._arrays import NAN, FloatArray, IntArray, _logit, _pair, _vec
from scoring.metrics.bootstrap import _CHUNK_CELLS, _percentile_interval
from scoring.metrics.distributions import normal_sf

# The label of a series too short or without variance to test (frozen edge_labels, v4): never
# NO_EDGE, which would claim a test found nothing.
NOT_TESTED = "NOT_TESTED"


def clv_prob(entry_price: ArrayLike, close_price: ArrayLike) -> FloatArray:
    """CLV in probability points, close - entry, both prices of the token that was bought.

    For a NO trade pass the NO token's entry price and (1 - YES close) as the close.
    """
    q, c = _pair(entry_price, close_price)
    return c - q


def clv_logodds(entry_price: ArrayLike, close_price: ArrayLike) -> FloatArray:
    """CLV in log-odds, logit(close) - logit(entry), prices clipped at clv_logodds_clip."""
    q, c = _pair(entry_price, close_price)
    clip = C.clv_logodds_clip
    return _logit(c, clip) - _logit(q, clip)


def devig(quotes: ArrayLike, method: str | None = None) -> FloatArray:
    """Turn quotes of mutually exclusive outcomes (last axis) into probabilities summing to 1.

    multiplicative: q / sum(q). power: q^k with k solved so the powers sum to 1 (bisection on
    log k), which shaves longshots more than favourites; rows where it has no solution (a quote
    of 1 or more) fall back to multiplicative.
    """
    method = C.devig_method if method is None else method
    q = np.asarray(quotes, dtype=float)
    total = q.sum(axis=-1, keepdims=True)
    multiplicative = q / total
    if method == "multiplicative":
        return multiplicative
    if method != "power":
        raise ValueError(f"unknown devig method {method!r}")
    solvable = np.all((q >= 0) & (q < 1), axis=-1, keepdims=True) & (q > 0).any(
        axis=-1, keepdims=True
    )
    base = np.where(solvable, q, 0.5)
    lo = np.full(total.shape, -12.0)  # log k: sum(q^k) falls as k grows, so bisect on log k
    hi = np.full(total.shape, 12.0)
    for _ in range(80):
        mid = (lo + hi) / 2.0
        too_big = (base ** np.exp(mid)).sum(axis=-1, keepdims=True) > 1.0
        lo = np.where(too_big, mid, lo)
        hi = np.where(too_big, hi, mid)
    powered = base ** np.exp((lo + hi) / 2.0)
    powered = powered / powered.sum(axis=-1, keepdims=True)  # remove the last bisection residue
    return np.where(solvable, powered, multiplicative)


def clv_mean_ztest(clv: ArrayLike) -> tuple[float, float]:
    """Naive one-sided z test of mean CLV > 0 (ignores autocorrelation): (z, p).

    No test (NaN, 1.0) without real variance: sd at most sb_min_sd, like the edge label.
    """
    x = _vec(clv)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return NAN, 1.0
    sd = float(x.std(ddof=1))
    if not sd > C.sb_min_sd:
        return NAN, 1.0
    z = float(x.mean() / (sd / math.sqrt(x.size)))
    return z, normal_sf(z)


# ---------------------------------------------------------------------------------------------
# Stationary bootstrap of the CLV Sharpe ratio
# ---------------------------------------------------------------------------------------------


def _flat_top(t: FloatArray) -> FloatArray:
    """Politis-Romano trapezoid: 1 on |t| <= 1/2, falling linearly to 0 at |t| = 1."""
    a = np.abs(t)
    return np.where(a <= 0.5, 1.0, np.where(a <= 1.0, 2.0 * (1.0 - a), 0.0))


def optimal_block_length(x: ArrayLike) -> float:
    """Mean block length for the stationary bootstrap (Politis & White 2004, Patton et al. 2009).

    Autocovariances use the full-sample 1/n normaliser. m is the first lag starting a run of
    K_N = max(5, ceil(sqrt(log10 n))) autocorrelations inside +-2 sqrt(log10 n / n) (else the last
    significant lag), M = min(2m, ceil(sqrt n) + K_N); then with the flat-top window lambda,
    G = sum_{|k|<=M} lambda(k/M) |k| gamma_k and g = sum_{|k|<=M} lambda(k/M) gamma_k, the
    corrected D_SB = 2 g^2 gives b = (2 G^2 / D_SB)^(1/3) n^(1/3), clipped to
    [sb_min_block_length, ceil(min(3 sqrt n, n / 3))].

    Correlations are gamma_k / gamma_0 as in the paper. arch.bootstrap.optimal_block_length
    normalises its lag correlations slightly differently and falls back to M = m_max when no
    insignificant run exists, so on borderline series the two can pick a different M.
    """
    values = _vec(x)
    values = values[np.isfinite(values)]
    n = values.size
    floor = float(C.sb_min_block_length)
    if n < 8:
        return floor
    xc = values - values.mean()
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = min(math.ceil(math.sqrt(n)) + k_n, n - 1)
    b_max = math.ceil(min(3.0 * math.sqrt(n), n / 3.0))
    gamma = np.array([xc[k:] @ xc[: n - k] for k in range(m_max + 1)]) / n
    if not gamma[0] > 0:
        return floor
    rho = np.abs(gamma[1:] / gamma[0])  # rho[j - 1] is lag j
    inside = rho < 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = None
    for lag in range(1, m_max - k_n + 2):
        if inside[lag - 1 : lag - 1 + k_n].all():
            m_hat = lag
            break
    if m_hat is None:
        significant = np.flatnonzero(~inside)
        m_hat = int(significant[-1]) + 1 if significant.size else 1
    big_m = min(2 * m_hat, m_max)
    lags = np.arange(1, big_m + 1)
    weights = _flat_top(lags / big_m)
    big_g = 2.0 * np.sum(weights * lags * gamma[1 : big_m + 1])
    g = gamma[0] + 2.0 * np.sum(weights * gamma[1 : big_m + 1])
    if g == 0.0:
        return floor
    d_sb = 2.0 * g * g
    b = (2.0 * big_g * big_g / d_sb) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    return float(min(max(b, floor), b_max))


def stationary_bootstrap_indices(
    n: int, n_boot: int, block_length: float, rng: np.random.Generator
) -> IntArray:
    """(n_boot, n) indices of Politis-Romano stationary-bootstrap resamples (wrapping around).

    Each position starts a new block with probability 1 / block_length (always at position 0),
    at a uniform random index; otherwise it continues the previous block with the next index.
    """
    starts = rng.integers(0, n, size=(n_boot, n))
    if block_length <= 1.0:
        return starts  # every position starts a new block: the plain i.i.d. bootstrap
    # float32 uniforms are enough to compare with 1/b and are drawn faster.
    new_block = rng.random((n_boot, n), dtype=np.float32) < np.float32(1.0 / block_length)
    new_block[:, 0] = True
    pos = np.arange(n)
    # For every position, where its block began: the last new-block position at or before it.
    block_begin = np.maximum.accumulate(np.where(new_block, pos, 0), axis=1)
    idx = np.take_along_axis(starts, block_begin, axis=1)
    idx += pos - block_begin
    idx[idx >= n] -= n  # wrap around (idx < 2n here)
    return idx


def _sharpe_rows(centred: FloatArray, shift: float) -> FloatArray:
    """Sharpe ratio of each row of (x - shift) resamples, x = centred + shift.

    Rows are drawn from a series centred on its mean, so the one-pass variance
    (sum of squares - n mean^2) does not suffer cancellation.
    """
    n = centred.shape[1]
    row_mean = centred.sum(axis=1) / n
    sum_sq = np.einsum("ij,ij->i", centred, centred)
    var = np.maximum(sum_sq - n * row_mean * row_mean, 0.0) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, (row_mean + shift) / np.sqrt(var), np.nan)


def stationary_bootstrap_sharpe(
    x: ArrayLike,
    B: int | None = None,
    seed: int | None = None,
    levels: Sequence[float] | None = None,
    block_length: float | None = None,
) -> dict[str, Any]:
    """Edge label from a stationary bootstrap of the Sharpe ratio mean / sd of a CLV series.

    The series keeps its time order (e.g. trades by entry time). Block length is automatic
    (optimal_block_length) unless given. Bias correction (frozen sb_bias_correction), precisely:
    b = mean(S*) - S over the finite replicates S*; every replicate is corrected to S* - b, so
    the reported `sharpe_bc` is S - b and each percentile interval is [q_lo(S*) - b,
    q_hi(S*) - b]. (Shifting by -2b would double the Monte Carlo noise of b in the bounds,
    enough to flip a label from one seed to the next.)

    p: the one-sided bootstrap p-value of no positive edge, the share of corrected replicates at
    or below 0; p_se its Monte Carlo standard error. Label (edge_label): GENUINE_EDGE if p is at
    most the first frozen edge level, WEAK_EDGE at most the second (the same events as the 95%
    and 90% corrected lower bounds above 0 for the v2 levels), else NO_EDGE; NOT_TESTED with a
    flag for fewer than sb_min_n values ("too_few") and for a series without real variance
    ("zero_variance"): sample sd at most sb_min_sd, an absolute
    tolerance in the series' own unit. A series of equal prices' differences is exact zeros
    plus float noise of about 1e-16; compared with its mean (itself noise) that looked like
    variance, and zeros plus six 1-ulp values came out GENUINE_EDGE.
    """
    n_boot = C.sb_resamples if B is None else B
    levels = tuple(C.sb_levels if levels is None else levels)
    seed = methodology_seed() if seed is None else seed
    series = _vec(x)
    series = series[np.isfinite(series)]
    n = int(series.size)
    sd = float(series.std(ddof=1)) if n >= 2 else NAN
    sharpe = float(series.mean() / sd) if sd > C.sb_min_sd else NAN
    result: dict[str, Any] = {
        "n": n,
        "mean": float(series.mean()) if n else NAN,
        "sharpe": sharpe,
        "sharpe_bc": NAN,
        "bias": NAN,
        "block_length": NAN,
        "ci": {level: (NAN, NAN) for level in levels},
        "p": NAN,
        "p_se": NAN,
        "label": NOT_TESTED,
        "flag": None,
    }
    if n < max(C.sb_min_n, 3):
        return result | {"label": NOT_TESTED, "flag": "too_few"}
    if not sd > C.sb_min_sd:
        return result | {"label": NOT_TESTED, "flag": "zero_variance"}
    b_len = optimal_block_length(series) if block_length is None else float(block_length)
    rng = np.random.default_rng(seed)
    mean = float(series.mean())
    centred = series - mean
    reps = np.empty(n_boot)
    rows = max(1, _CHUNK_CELLS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        idx = stationary_bootstrap_indices(n, stop - start, b_len, rng)
        reps[start:stop] = _sharpe_rows(centred[idx], mean)
    finite = reps[np.isfinite(reps)]
    bias = float(finite.mean() - sharpe) if finite.size else 0.0
    ci = {}
    for level in levels:
        lo, hi = _percentile_interval(reps, level)
        ci[level] = (lo - bias, hi - bias)
    # One-sided p of "no positive edge": the share of corrected replicates at or below 0 (with
    # the +1 that keeps it above 0), the same event as a percentile lower bound above 0.
    p = float((np.count_nonzero(finite - bias <= 0.0) + 1) / (finite.size + 1))
    return result | {
        "sharpe_bc": sharpe - bias,
        "bias": bias,
        "block_length": b_len,
        "ci": ci,
        "p": p,
        "p_se": math.sqrt(p * (1.0 - p) / max(finite.size, 1)),
        "label": edge_label(p),
    }


def edge_label(p: float) -> str:
    """GENUINE_EDGE at p <= the first frozen edge level, WEAK_EDGE at p <= the second, else
    NO_EDGE (p one-sided; on a leaderboard, the Holm-adjusted p of the group). A series that
    was never tested has no p and is NOT_TESTED (stationary_bootstrap_sharpe)."""
    genuine, weak, none = C.edge_labels[:3]
    strict, loose = C.edge_label_alphas
    if p <= strict:
        return genuine
    if p <= loose:
        return weak
    return none
