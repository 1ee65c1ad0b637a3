"""Pure scoring math for the arena: numpy in, numbers out, no Django, no database.

Every formula in SCORING.md lives here under the names promised in CONTRACT.md, so a researcher
can import this module and check it against other libraries. Defaults come from the sealed
methodology constants (core/methodology_v<N>.json, the current version), never from literals
in this file.

Conventions: ``p`` is a probability of YES (or of the outcome), ``o`` an outcome (0/1, or a
0-based class index for multiclass), ``P`` an (n, K) probability matrix. Losses are "lower is
better". Empty inputs give NaN rather than raising, because the leaderboard must render even for
a competitor with nothing resolved yet; malformed shapes raise ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from core.methodology import CONSTANTS as C
from core.methodology import seed as methodology_seed

__all__ = [
    "brier_loss",
    "brier",
    "brier_multiclass_loss",
    "brier_multiclass",
    "question_brier_loss",
    "complete_forecast",
    "log_loss",
    "log_score",
    "rps_loss",
    "rps",
    "brier_skill",
    "murphy",
    "calibration",
    "ece",
    "wilson_interval",
    "implied_confidence_brier",
    "relative_log_loss",
    "relative_log_score",
    "bootstrap_ci",
    "paired_bootstrap_diff_ci",
    "paired_bootstrap_skill_ci",
    "required_n_for_brier_edge",
    "provisional_threshold",
    "nw_bandwidth",
    "long_run_variance",
    "diebold_mariano",
    "dm_matrix",
    "market_information_test",
    "clv_prob",
    "clv_logodds",
    "devig",
    "clv_mean_ztest",
    "optimal_block_length",
    "stationary_bootstrap_indices",
    "stationary_bootstrap_sharpe",
    "tournament_question_score",
    "tournament_takes",
    "prize_shares",
    "StakedBet",
    "kelly_stake",
]

NAN = float("nan")


# ---------------------------------------------------------------------------------------------
# Input helpers
# ---------------------------------------------------------------------------------------------


def _vec(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float).reshape(-1)


def _pair(p: ArrayLike, o: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p, o = _vec(p), _vec(o)
    if p.shape != o.shape:
        raise ValueError(f"p and o differ in length: {p.size} vs {o.size}")
    return p, o


def _matrix(P: ArrayLike, o: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    P = np.asarray(P, dtype=float)
    if P.ndim == 1:
        P = P.reshape(1, -1)
    if P.ndim != 2 or P.shape[1] < 2:
        raise ValueError("P must be an (n, K) matrix with K >= 2")
    o = np.asarray(o).reshape(-1)
    if o.size != P.shape[0]:
        raise ValueError(f"P has {P.shape[0]} rows but o has {o.size} entries")
    if o.size and (np.any(o != np.floor(o)) or o.min() < 0 or o.max() >= P.shape[1]):
        raise ValueError("o must hold 0-based class indices in [0, K)")
    return P, o.astype(np.intp)


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else NAN


def _clip(p: np.ndarray, eps: float) -> np.ndarray:
    return np.clip(p, eps, 1.0 - eps)


def _logit(p: np.ndarray, clip: float) -> np.ndarray:
    p = _clip(p, clip)
    return np.log(p) - np.log1p(-p)


def _outcome_prob(p: ArrayLike, o: ArrayLike) -> np.ndarray:
    """Probability given to what happened: p where o == 1, 1 - p where o == 0; P[i, o_i] for a matrix."""
    if np.ndim(p) == 2:
        P, idx = _matrix(p, o)
        return P[np.arange(P.shape[0]), idx]
    p, o = _pair(p, o)
    return np.where(o == 1, p, 1.0 - p)


# ---------------------------------------------------------------------------------------------
# Proper scores
# ---------------------------------------------------------------------------------------------


def brier_loss(p: ArrayLike, o: ArrayLike) -> np.ndarray:
    """Per-forecast binary Brier loss (p - o)^2."""
    p, o = _pair(p, o)
    return (p - o) ** 2


def brier(p: ArrayLike, o: ArrayLike) -> float:
    """Binary Brier score: mean (p - o)^2, range 0..1 (0.25 = always 0.5)."""
    return _mean(brier_loss(p, o))


def brier_multiclass_loss(P: ArrayLike, o: ArrayLike) -> np.ndarray:
    """Per-question Brier (1950) loss summed over the K classes, range 0..2."""
    P, idx = _matrix(P, o)
    # sum_k (P_k - 1[k=o])^2 = sum_k P_k^2 - 2 P_o + 1, without building the one-hot matrix.
    return np.einsum("ij,ij->i", P, P) - 2.0 * P[np.arange(P.shape[0]), idx] + 1.0


def brier_multiclass(P: ArrayLike, o: ArrayLike) -> float:
    """Multiclass Brier score, summed convention (range 0..2); equals 2 * brier for K = 2."""
    return _mean(brier_multiclass_loss(P, o))


def question_brier_loss(P: ArrayLike, o: ArrayLike) -> np.ndarray:
    """Per-question leaderboard Brier: half the Brier (1950) sum over the K outcomes.

    For K = 2 this is exactly the binary Brier (p_yes - o_yes)^2, range 0..1, and a market with
    more outcomes counts once on the same scale (sealed brier_question_convention).
    """
    return 0.5 * brier_multiclass_loss(P, o)


def complete_forecast(stated: ArrayLike, shown: ArrayLike | None = None) -> np.ndarray:
    """Full probability vectors from the outcomes a decision stated (sealed forecast_completion).

    stated is (n, K) with NaN for the outcomes not stated; shown (same shape, optional) holds the
    prices shown at the decision, NaN where unknown. Per row: stated values are kept; the
    outcomes not stated share r = max(0, 1 - sum(stated)) in proportion to their shown prices
    (evenly when none is known); then the row is divided by its sum, which changes it only when
    the stated values add up to more than 1 (or, every outcome stated, to less than 1). A row
    that is all zeros becomes uniform. Examples, K = 3: stated (0.5, -, -) with shown prices
    (0.5, 0.3, 0.1) gives (0.5, 0.375, 0.125); stated (0.6, 0.6, -) gives (0.5, 0.5, 0).

    Applied to the shown prices of the stated outcomes (stated = shown where stated), it gives
    the market's reference vector, so a forecaster that states the shown price matches it
    exactly.
    """
    P = np.array(stated, dtype=float, ndmin=2)
    if P.ndim != 2 or P.shape[1] < 2:
        raise ValueError("stated must be an (n, K) matrix with K >= 2")
    missing = np.isnan(P)
    if shown is None:
        weights = np.zeros_like(P)
    else:
        weights = np.nan_to_num(np.array(shown, dtype=float, ndmin=2), nan=0.0)
        if weights.shape != P.shape:
            raise ValueError("shown must have the shape of stated")
        weights = np.clip(weights, 0.0, None)
    weights = np.where(missing, weights, 0.0)
    total_w = weights.sum(axis=1, keepdims=True)
    n_missing = missing.sum(axis=1, keepdims=True)
    even = np.where(missing, 1.0, 0.0) / np.maximum(n_missing, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total_w > 0, weights / np.where(total_w > 0, total_w, 1.0), even)
    rest = np.clip(1.0 - np.nansum(P, axis=1, keepdims=True), 0.0, None)
    P = np.where(missing, rest * share, np.clip(P, 0.0, 1.0))
    total = P.sum(axis=1, keepdims=True)
    uniform = np.full_like(P, 1.0 / P.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, P / np.where(total > 0, total, 1.0), uniform)


def log_loss(p: ArrayLike, o: ArrayLike, eps: float | None = None) -> np.ndarray:
    """Per-forecast -ln p(outcome), natural log, probability clipped to [eps, 1 - eps].

    Accepts a binary p vector or an (n, K) matrix with class indices.
    """
    return -_log_outcome_prob(p, o, eps)


def _log_outcome_prob(p: ArrayLike, o: ArrayLike, eps: float | None) -> np.ndarray:
    eps = C.log_eps if eps is None else eps
    q = _outcome_prob(p, o)  # a fresh array, so the clip and log can work in place
    np.clip(q, eps, 1.0 - eps, out=q)
    return np.log(q, out=q)


def log_score(p: ArrayLike, o: ArrayLike, eps: float | None = None) -> float:
    """Mean log loss (lower is better); eps defaults to the sealed log_eps."""
    logs = _log_outcome_prob(p, o, eps)
    return -float(logs.mean()) if logs.size else NAN


def rps_loss(P: ArrayLike, o: ArrayLike) -> np.ndarray:
    """Per-question ranked probability score for ordered classes, normalised by K - 1."""
    P, idx = _matrix(P, o)
    k = P.shape[1]
    cum_forecast = np.cumsum(P, axis=1)[:, :-1]
    cum_observed = (np.arange(k - 1)[None, :] >= idx[:, None]).astype(float)
    return ((cum_forecast - cum_observed) ** 2).sum(axis=1) / (k - 1)


def rps(P: ArrayLike, o: ArrayLike) -> float:
    """Mean ranked probability score (Epstein 1969), 0-based class index, range 0..1."""
    return _mean(rps_loss(P, o))


def brier_skill(p: ArrayLike, o: ArrayLike, ref: ArrayLike) -> float:
    """1 - brier(p, o) / brier(ref, o) over the same forecasts; ref may be a scalar (e.g. 0.5)."""
    p, o = _pair(p, o)
    ref = np.broadcast_to(np.asarray(ref, dtype=float), p.shape)
    ref_score = brier(ref, o)
    if not ref_score > 0:
        return NAN
    return 1.0 - brier(p, o) / ref_score


# ---------------------------------------------------------------------------------------------
# Calibration and the Murphy decomposition
# ---------------------------------------------------------------------------------------------


def _bins(p: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
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


def _bin_sums(p: np.ndarray, o: np.ndarray, bins: int):
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
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion (NaN where n == 0)."""
    level = C.ci_level if level is None else level
    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    z = stats.norm.ppf(0.5 + level / 2.0)
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


# ---------------------------------------------------------------------------------------------
# Market-relative
# ---------------------------------------------------------------------------------------------


def relative_log_loss(
    p: ArrayLike, m: ArrayLike, o: ArrayLike, eps: float | None = None
) -> np.ndarray:
    """Per-forecast ln(p_outcome / m_outcome), both clipped to [eps, 1 - eps]; > 0 beats m."""
    eps = C.log_eps if eps is None else eps
    return np.log(_clip(_outcome_prob(p, o), eps)) - np.log(_clip(_outcome_prob(m, o), eps))


def relative_log_score(p: ArrayLike, m: ArrayLike, o: ArrayLike, eps: float | None = None) -> float:
    """Mean Metaculus-style relative log score of p against m (the market); higher is better."""
    return _mean(relative_log_loss(p, m, o, eps))


# ---------------------------------------------------------------------------------------------
# Bootstrap intervals (percentile, resampling markets)
# ---------------------------------------------------------------------------------------------

_CHUNK_CELLS = 4_000_000  # bound memory: resample index blocks of at most this many cells


def _group_codes(groups: ArrayLike | None, n: int) -> tuple[np.ndarray, int]:
    if groups is None:
        return np.arange(n), n
    groups = np.asarray(groups).reshape(-1)
    if groups.size != n:
        raise ValueError(f"groups has {groups.size} entries for {n} values")
    _, codes = np.unique(groups, return_inverse=True)
    return codes.reshape(-1), int(codes.max()) + 1 if n else 0


def _resampled_group_means(
    columns: Sequence[np.ndarray], groups: ArrayLike | None, n_boot: int, seed: int
) -> np.ndarray:
    """(n_boot, len(columns)) means of each column over resampled groups.

    A resample draws G groups with replacement; its mean is (sum of the drawn groups' sums) /
    (sum of their sizes), i.e. the plain mean over every forecast of the drawn markets. The same
    seed and groups give the same draws for every column and every competitor (paired).
    """
    n = columns[0].size
    codes, n_groups = _group_codes(groups, n)
    sums = np.stack([np.bincount(codes, weights=col, minlength=n_groups) for col in columns])
    sizes = np.bincount(codes, minlength=n_groups).astype(float)
    one_each = bool(np.all(sizes == 1))  # one forecast per group: every resample has n of them
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, len(columns)))
    rows = max(1, _CHUNK_CELLS // max(n_groups, 1))
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        draw = rng.integers(0, n_groups, size=(stop - start, n_groups))
        total_size = float(n_groups) if one_each else sizes[draw].sum(axis=1)
        for j in range(len(columns)):
            out[start:stop, j] = sums[j][draw].sum(axis=1) / total_size
    return out


def _percentile_interval(reps: np.ndarray, level: float) -> tuple[float, float]:
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return NAN, NAN
    lo, hi = np.percentile(reps, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return float(lo), float(hi)


def _generic_replicates(
    x: np.ndarray, stat: Callable, groups: ArrayLike | None, n_boot: int, seed: int
) -> np.ndarray:
    """Replicates of an arbitrary statistic; groups are expanded to their member forecasts."""
    rng = np.random.default_rng(seed)
    codes, n_groups = _group_codes(groups, x.size)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    reps = np.empty(n_boot)
    for b in range(n_boot):
        drawn = rng.integers(0, n_groups, size=n_groups)
        lengths = sizes[drawn]
        # Positions of every member of every drawn group inside `order`, built without a loop.
        offsets = np.repeat(starts[drawn] - np.cumsum(lengths) + lengths, lengths)
        reps[b] = stat(x[order[offsets + np.arange(lengths.sum())]])
    return reps


def bootstrap_ci(
    x: ArrayLike,
    stat: Callable = np.mean,
    n: int | None = None,
    level: float | None = None,
    seed: int | None = None,
    groups: ArrayLike | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of stat(x), resampling groups (markets) when given.

    Defaults: n = bootstrap_resamples, level = ci_level, seed = the methodology seed. The mean
    takes a fast path; any other statistic is computed per resample.
    """
    n_boot = C.bootstrap_resamples if n is None else n
    level = C.ci_level if level is None else level
    seed = methodology_seed() if seed is None else seed
    x = _vec(x)
    if x.size == 0:
        return NAN, NAN
    if stat is np.mean:
        reps = _resampled_group_means([x], groups, n_boot, seed)[:, 0]
    else:
        reps = _generic_replicates(x, stat, groups, n_boot, seed)
    return _percentile_interval(reps, level)


def paired_bootstrap_diff_ci(
    a: ArrayLike,
    b: ArrayLike,
    groups: ArrayLike | None = None,
    n: int | None = None,
    level: float | None = None,
    seed: int | None = None,
) -> tuple[float, float]:
    """Percentile interval of mean(a) - mean(b) over the same forecasts, resampled together.

    a and b are aligned per-forecast values (e.g. two competitors' Brier losses on common
    forecasts); groups (e.g. market ids) makes every forecast of one market move together.
    """
    a, b = _pair(a, b)
    return bootstrap_ci(a - b, np.mean, n, level, seed, groups)


def paired_bootstrap_skill_ci(
    loss: ArrayLike,
    ref_loss: ArrayLike,
    groups: ArrayLike | None = None,
    n: int | None = None,
    level: float | None = None,
    seed: int | None = None,
) -> tuple[float, float]:
    """Percentile interval of the skill score 1 - mean(loss) / mean(ref_loss), paired resampling."""
    loss, ref_loss = _pair(loss, ref_loss)
    if loss.size == 0:
        return NAN, NAN
    n_boot = C.bootstrap_resamples if n is None else n
    level = C.ci_level if level is None else level
    seed = methodology_seed() if seed is None else seed
    means = _resampled_group_means([loss, ref_loss], groups, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = 1.0 - means[:, 0] / means[:, 1]
    return _percentile_interval(reps, level)


def required_n_for_brier_edge(
    loss_diffs_or_var: ArrayLike | float,
    delta: float | None = None,
    power: float | None = None,
    alpha: float | None = None,
) -> float:
    """Resolved forecasts needed to detect a mean Brier difference of delta (two-sided z test).

    n = ((z_{1-alpha/2} + z_power) * sd / delta)^2 with sd from the observed per-forecast loss
    differences (or the losses themselves when there is no paired data), or a variance passed
    as a scalar. Returns a whole number (at least 2), or inf while the variance is unknown
    (fewer than two values), so "n_resolved < required" stays provisional until it can be judged.
    """
    delta = C.provisional_brier_delta if delta is None else delta
    power = C.provisional_power if power is None else power
    alpha = C.provisional_alpha if alpha is None else alpha
    if np.ndim(loss_diffs_or_var) == 0:
        var = float(loss_diffs_or_var)
    else:
        values = _vec(loss_diffs_or_var)
        values = values[np.isfinite(values)]
        if values.size < 2:
            return math.inf
        var = float(values.var(ddof=1))
    if not (math.isfinite(var) and var >= 0):
        return math.inf
    z = stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)
    return float(max(2, math.ceil(z * z * var / (delta * delta))))


def provisional_threshold() -> int:
    """Resolved questions a competitor needs before it is no longer provisional.

    One number for everybody, from sealed constants only (SCORING.md: enough to detect a 0.02
    Brier edge, about 350 at 80% power): required_n_for_brier_edge with the variance
    provisional_reference_sd^2. Estimating the variance from each competitor's own differences
    to the market, as v1 did, let a competitor that stays near the market leave the badge after
    two resolutions while a clearly worse one kept it for thousands.
    """
    return int(required_n_for_brier_edge(C.provisional_reference_sd**2))


# ---------------------------------------------------------------------------------------------
# Diebold-Mariano
# ---------------------------------------------------------------------------------------------


def nw_bandwidth(n: int, h: int = 1, rule: str | None = None) -> int:
    """Newey-West lag count: floor(4 (n/100)^(2/9)) (Newey & West 1994) or h - 1."""
    rule = C.dm_bandwidth_rule if rule is None else rule
    if rule == "h-1":
        return max(h - 1, 0)
    if rule == "nw_floor_4(n/100)^(2/9)":
        return int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 0 else 0
    raise ValueError(f"unknown bandwidth rule {rule!r}")


def long_run_variance(d: ArrayLike, lags: int) -> float:
    """Bartlett-weighted (Newey-West) long-run variance of d: g0 + 2 sum (1 - k/(L+1)) g_k."""
    d = _vec(d)
    n = d.size
    dc = d - d.mean()
    lrv = float(dc @ dc) / n
    for k in range(1, min(lags, n - 1) + 1):
        lrv += 2.0 * (1.0 - k / (lags + 1.0)) * float(dc[k:] @ dc[:-k]) / n
    return lrv


def diebold_mariano(
    loss_a: ArrayLike, loss_b: ArrayLike, h: int = 1, lags: int | None = None
) -> tuple[float, float]:
    """Diebold-Mariano test of equal expected loss, d = loss_a - loss_b.

    Newey-West/Bartlett long-run variance with the sealed bandwidth (or `lags`), the
    Harvey-Leybourne-Newbold factor sqrt((n + 1 - 2h + h(h-1)/n) / n), Student t with n - 1
    degrees of freedom, two-sided p. A negative statistic means a has the lower loss.
    Pairs where either loss is not finite are dropped. With fewer than dm_min_n pairs or a
    long-run variance that is not positive, returns (0.0 if the mean difference is 0 else NaN, 1.0).
    """
    d = _vec(loss_a) - _vec(loss_b)
    d = d[np.isfinite(d)]
    n = d.size
    if n < max(3, C.dm_min_n):
        return (0.0 if n and not d.any() else NAN), 1.0
    mean = float(d.mean())
    n_lags = nw_bandwidth(n, h) if lags is None else int(lags)
    lrv = long_run_variance(d, n_lags)
    # Rounding can leave a tiny positive variance for a constant d; treat it as zero.
    if not lrv > 1e-14 * max(float(np.mean(d * d)), 1e-300):
        return (0.0 if mean == 0.0 else NAN), 1.0
    hln = math.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    stat = hln * mean / math.sqrt(lrv / n)
    return float(stat), float(2.0 * stats.t.sf(abs(stat), n - 1))


def dm_matrix(
    loss_by_competitor: Mapping[str, ArrayLike],
    h: int = 1,
    alpha: float | None = None,
) -> list[dict[str, Any]]:
    """Every pair (a, b) of competitors, tested on the forecasts both have (finite losses).

    Arrays are aligned on a common forecast list (NaN where a competitor has none). Each pair
    is judged at the Bonferroni level family alpha / number of pairs: verdict is "a_better",
    "b_better" or "no_difference".
    """
    alpha = C.dm_family_alpha if alpha is None else alpha
    names = list(loss_by_competitor)
    losses = {name: _vec(loss_by_competitor[name]) for name in names}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    level = alpha / len(pairs) if pairs else alpha
    rows = []
    for a, b in pairs:
        la, lb = losses[a], losses[b]
        if la.shape != lb.shape:
            raise ValueError(f"losses of {a} and {b} are not aligned")
        both = np.isfinite(la) & np.isfinite(lb)
        stat, p = diebold_mariano(la[both], lb[both], h=h)
        verdict = ("a_better" if stat < 0 else "b_better") if p < level else "no_difference"
        mean_diff = float(np.mean(la[both] - lb[both])) if both.any() else NAN
        rows.append(
            {
                "a": a,
                "b": b,
                "n": int(both.sum()),
                "mean_diff": mean_diff,
                "stat": stat,
                "p": p,
                "level": level,
                "verdict": verdict,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# Market-information test (logistic regression, Newton/IRLS)
# ---------------------------------------------------------------------------------------------


def _log_likelihood(X: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    eta = X @ beta
    return float(np.sum(y * eta - np.logaddexp(0.0, eta)))


def _fit_logit(X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Maximum-likelihood logistic regression by Newton's method with step halving.

    Returns beta, log-likelihood, the Fisher information and flags; never raises.
    """
    beta = np.zeros(X.shape[1])
    llf = _log_likelihood(X, y, beta)
    converged = False
    for _ in range(C.info_test_max_iter):
        mu = special.expit(X @ beta)
        info = X.T @ (X * (mu * (1.0 - mu))[:, None])
        try:
            step = np.linalg.solve(info, X.T @ (y - mu))
        except np.linalg.LinAlgError:
            return {"beta": beta, "llf": llf, "info": info, "ok": False, "flag": "singular"}
        # Halve the step until the likelihood does not fall; Newton on logistic rarely needs it,
        # but near-separated data can overshoot.
        for _ in range(30):
            candidate = beta + step
            cand_llf = _log_likelihood(X, y, candidate)
            if cand_llf >= llf - 1e-12:
                break
            step /= 2.0
        beta, llf = candidate, cand_llf
        if np.max(np.abs(X @ beta)) > C.info_test_max_abs_eta:
            return {"beta": beta, "llf": llf, "info": info, "ok": False, "flag": "separation"}
        if np.max(np.abs(step)) < C.info_test_tol:
            converged = True
            break
    mu = special.expit(X @ beta)
    info = X.T @ (X * (mu * (1.0 - mu))[:, None])
    flag = None if converged else "no_convergence"
    return {"beta": beta, "llf": llf, "info": info, "ok": converged, "flag": flag}


def _hc3_covariance(X: np.ndarray, y: np.ndarray, beta: np.ndarray, info: np.ndarray) -> np.ndarray:
    """HC3 sandwich: I^-1 (sum s_i s_i' / (1 - h_i)^2) I^-1, with GLM leverages h_i."""
    mu = special.expit(X @ beta)
    w = mu * (1.0 - mu)
    bread = np.linalg.inv(info)
    leverage = w * np.einsum("ij,jk,ik->i", X, bread, X)
    scale = (y - mu) / (1.0 - leverage)
    meat = (X * (scale * scale)[:, None]).T @ X
    return bread @ meat @ bread


def market_information_test(
    outcomes: ArrayLike, market_p: ArrayLike, model_p: ArrayLike
) -> dict[str, Any]:
    """Does the model's probability carry information the market price lacks? (Nyberg style)

    Fits logit P(o = 1) = b0 + b1 logit(market) + b2 logit(model), both logits clipped at
    info_test_logit_clip; likelihood-ratio test of b2 = 0 against the market-only fit (chi-square,
    1 df) and an HC3 robust Wald test of b2 = 0. Degenerate data (too few rows, one outcome,
    model collinear with market, separation, no convergence) gives ok=False with a flag,
    NaN statistics and p = 1.0; it never raises.
    """
    y, m = _pair(outcomes, market_p)
    y, f = _pair(y, model_p)
    keep = np.isfinite(y) & np.isfinite(m) & np.isfinite(f)
    y, m, f = y[keep], m[keep], f[keep]
    n = int(y.size)
    result: dict[str, Any] = {
        "n": n,
        "ok": False,
        "flag": None,
        "coefs": {"const": NAN, "market": NAN, "model": NAN},
        "lr_stat": NAN,
        "lr_p": 1.0,
        "wald_hc3_stat": NAN,
        "wald_p": 1.0,
    }
    clip = C.info_test_logit_clip
    X = np.column_stack([np.ones(n), _logit(m, clip), _logit(f, clip)])
    if n < C.info_test_min_n:
        return result | {"flag": "too_few"}
    if y.min() == y.max():
        return result | {"flag": "one_outcome"}
    if np.linalg.matrix_rank(X) < 3:
        return result | {"flag": "collinear"}
    full = _fit_logit(X, y)
    restricted = _fit_logit(X[:, :2], y)
    result["coefs"] = dict(zip(("const", "market", "model"), map(float, full["beta"])))
    if not (full["ok"] and restricted["ok"]):
        return result | {"flag": full["flag"] or restricted["flag"]}
    lr = max(0.0, 2.0 * (full["llf"] - restricted["llf"]))
    try:
        cov = _hc3_covariance(X, y, full["beta"], full["info"])
        wald = float(full["beta"][2] ** 2 / cov[2, 2])
    except (np.linalg.LinAlgError, ZeroDivisionError, FloatingPointError):
        wald = NAN
    return result | {
        "ok": True,
        "lr_stat": lr,
        "lr_p": float(stats.chi2.sf(lr, 1)),
        "wald_hc3_stat": wald,
        "wald_p": float(stats.chi2.sf(wald, 1)) if math.isfinite(wald) else 1.0,
        "llf": full["llf"],
        "llf_restricted": restricted["llf"],
    }


# ---------------------------------------------------------------------------------------------
# Closing line value
# ---------------------------------------------------------------------------------------------


def clv_prob(entry_price: ArrayLike, close_price: ArrayLike) -> np.ndarray:
    """CLV in probability points, close - entry, both prices of the token that was bought.

    For a NO trade pass the NO token's entry price and (1 - YES close) as the close.
    """
    q, c = _pair(entry_price, close_price)
    return c - q


def clv_logodds(entry_price: ArrayLike, close_price: ArrayLike) -> np.ndarray:
    """CLV in log-odds, logit(close) - logit(entry), prices clipped at clv_logodds_clip."""
    q, c = _pair(entry_price, close_price)
    clip = C.clv_logodds_clip
    return _logit(c, clip) - _logit(q, clip)


def devig(quotes: ArrayLike, method: str | None = None) -> np.ndarray:
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
    return z, float(stats.norm.sf(z))


# ---------------------------------------------------------------------------------------------
# Stationary bootstrap of the CLV Sharpe ratio
# ---------------------------------------------------------------------------------------------


def _flat_top(t: np.ndarray) -> np.ndarray:
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
    x = _vec(x)
    x = x[np.isfinite(x)]
    n = x.size
    floor = float(C.sb_min_block_length)
    if n < 8:
        return floor
    xc = x - x.mean()
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
) -> np.ndarray:
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


def _sharpe_rows(centred: np.ndarray, shift: float) -> np.ndarray:
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
    (optimal_block_length) unless given. Bias correction (sealed sb_bias_correction), precisely:
    b = mean(S*) - S over the finite replicates S*; every replicate is corrected to S* - b, so
    the reported `sharpe_bc` is S - b and each percentile interval is [q_lo(S*) - b,
    q_hi(S*) - b]. (Shifting by -2b, as v1 did, doubled the Monte Carlo noise of b in the
    bounds, enough to flip a label from one seed to the next.)

    Label: GENUINE_EDGE if the corrected 95% lower bound is above 0, WEAK_EDGE if only the 90%
    one is, else NO_EDGE; NO_EDGE with a flag for fewer than sb_min_n values ("too_few") and for
    a series without real variance ("zero_variance"): sample sd at most sb_min_sd, an absolute
    tolerance in the series' own unit. A series of equal prices' differences is exact zeros
    plus float noise of about 1e-16; compared with its mean (itself noise) that looked like
    variance, and zeros plus six 1-ulp values came out GENUINE_EDGE.
    """
    n_boot = C.sb_resamples if B is None else B
    levels = tuple(C.sb_levels if levels is None else levels)
    seed = methodology_seed() if seed is None else seed
    x = _vec(x)
    x = x[np.isfinite(x)]
    n = int(x.size)
    sd = float(x.std(ddof=1)) if n >= 2 else NAN
    sharpe = float(x.mean() / sd) if sd > C.sb_min_sd else NAN
    result: dict[str, Any] = {
        "n": n,
        "mean": float(x.mean()) if n else NAN,
        "sharpe": sharpe,
        "sharpe_bc": NAN,
        "bias": NAN,
        "block_length": NAN,
        "ci": {level: (NAN, NAN) for level in levels},
        "label": "NO_EDGE",
        "flag": None,
    }
    if n < max(C.sb_min_n, 3):
        return result | {"flag": "too_few"}
    if not sd > C.sb_min_sd:
        return result | {"flag": "zero_variance"}
    b_len = optimal_block_length(x) if block_length is None else float(block_length)
    rng = np.random.default_rng(seed)
    mean = float(x.mean())
    centred = x - mean
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
    return result | {
        "sharpe_bc": sharpe - bias,
        "bias": bias,
        "block_length": b_len,
        "ci": ci,
        "label": _edge_label(ci),
    }


def _edge_label(ci: Mapping[float, tuple[float, float]]) -> str:
    genuine, weak, none = C.edge_labels
    lower = {round(level, 6): bounds[0] for level, bounds in ci.items()}
    if lower.get(0.95, NAN) > 0:
        return genuine
    if lower.get(0.9, NAN) > 0:
        return weak
    return none


# ---------------------------------------------------------------------------------------------
# Tournament (Metaculus 2022 style, the market as the community)
# ---------------------------------------------------------------------------------------------


def _step_values(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Value of a carried-forward step function at each time; before the first point, the first."""
    pos = np.searchsorted(times, at, side="right") - 1
    return values[np.clip(pos, 0, None)]


def tournament_question_score(
    forecast_times: ArrayLike,
    forecast_p: ArrayLike,
    market_times: ArrayLike,
    market_p: ArrayLike,
    outcome: int,
    open_time: float,
    close_time: float,
    resolve_time: float | None = None,
    eps: float | None = None,
) -> dict[str, float]:
    """Time-averaged relative log score of one question, and the competitor's coverage.

    Times are numbers (e.g. epoch seconds). p and market prices are P(YES) (for a multi-outcome
    question pass the probability of the outcome that happened with outcome=1). Both are carried
    forward between change points. The integrand ln(p_outcome / m_outcome) is zero before the
    competitor's first forecast and after an early resolution, and is averaged over the scheduled
    life [open_time, close_time]. Coverage is the share of the scheduled life with an active
    forecast, (min(resolve, close) - first forecast) / (close - open): time after an early
    resolution is not covered, as in Metaculus tournaments (v1 divided by the actual life, which
    gave 0.667 where Metaculus says 0.50 for a forecast a quarter into a question that resolves
    three quarters into its scheduled life).
    """
    eps = C.log_eps if eps is None else eps
    start, scheduled_end = float(open_time), float(close_time)
    end = scheduled_end if resolve_time is None else min(float(resolve_time), scheduled_end)
    ft, fp = _pair(forecast_times, forecast_p)
    mt, mp = _pair(market_times, market_p)
    if scheduled_end <= start or end <= start or ft.size == 0 or mt.size == 0:
        return {"score": 0.0, "coverage": 0.0}
    order = np.argsort(ft, kind="stable")
    ft, fp = np.maximum(ft[order], start), fp[order]
    morder = np.argsort(mt, kind="stable")
    mt, mp = mt[morder], mp[morder]
    first = ft[0]
    if first >= end:
        return {"score": 0.0, "coverage": 0.0}
    inner = np.concatenate([ft, mt])
    cuts = np.unique(np.concatenate([[first, end], inner[(inner > first) & (inner < end)]]))
    left, width = cuts[:-1], np.diff(cuts)
    p_now = _step_values(ft, fp, left)
    m_now = _step_values(mt, mp, left)
    o = np.full(left.size, float(outcome))
    integrand = relative_log_loss(p_now, m_now, o, eps)
    return {
        "score": float(np.sum(integrand * width) / (scheduled_end - start)),
        "coverage": float((end - first) / (scheduled_end - start)),
    }


def tournament_takes(scores: ArrayLike, coverages: ArrayLike) -> np.ndarray:
    """Take per competitor: mean coverage * exp(sum of question scores).

    scores and coverages are (n_competitors, n_questions); NaN (no forecast) counts as score 0
    and coverage 0.
    """
    s = np.atleast_2d(np.asarray(scores, dtype=float))
    c = np.atleast_2d(np.asarray(coverages, dtype=float))
    if s.shape != c.shape:
        raise ValueError("scores and coverages must have the same shape")
    s, c = np.nan_to_num(s, nan=0.0), np.nan_to_num(c, nan=0.0)
    return c.mean(axis=1) * np.exp(s.sum(axis=1))


def prize_shares(takes: ArrayLike) -> np.ndarray:
    """Share of the prize pool: take / sum of takes (all zero when nobody has a take)."""
    t = _vec(takes)
    total = t.sum()
    return t / total if total > 0 else np.zeros_like(t)


# ---------------------------------------------------------------------------------------------
# Standard trading layer ("champion's clothes")
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StakedBet:
    """What the standard trading layer does with one candidate.

    side is "YES" (buy the outcome) or "NO" (buy its complement, binary only) or None when no
    side has a positive edge. p and price are for the side bought; kelly is the full-Kelly
    fraction of cash; reason is "bet", "no_edge", "below_edge", "below_min_bet" or "bad_price".
    """

    index: int
    side: str | None
    p: float
    price: float
    edge: float
    kelly: float
    stake: Decimal
    reason: str


_CENT = Decimal("0.01")


def _to_cents(value: float) -> Decimal:
    # Round to 8 places first so float noise (999.9999999999998) does not cost a cent.
    if not value > 0:
        return Decimal("0.00")
    return Decimal(str(round(float(value), 8))).quantize(_CENT, rounding=ROUND_DOWN)


def kelly_stake(
    p: ArrayLike,
    price: ArrayLike,
    cash: Decimal | float,
    fraction: float | None = None,
    cap: float | None = None,
    *,
    multi: ArrayLike = False,
    min_bet: Decimal | str | float | None = None,
    no_price: ArrayLike | None = None,
) -> list[StakedBet]:
    """Stakes of the standard trading layer for a list of candidates, one StakedBet each.

    A candidate is a stated probability p of an outcome and its YES price. Binary candidates may
    buy either side (NO at no_price, default 1 - price); multi-outcome candidates (multi=True)
    only buy the outcome. A side is bet when its edge (p - price) reaches edge_threshold_binary
    or edge_threshold_multi. Stake = fraction * full Kelly (p - q) / (1 - q) * cash; the
    decision's stakes together may not exceed cap * cash (max_bet_fraction of the cash held
    before the decision, so no single bet can either): when they would, all are scaled down in
    proportion. Stakes are then rounded down to cents and any below min_bet is dropped.
    """
    fraction = C.kelly_fraction if fraction is None else fraction
    cap = C.max_bet_fraction if cap is None else cap
    min_bet = Decimal(str(C.min_bet if min_bet is None else min_bet))
    p_yes, q_yes = _pair(p, price)
    n = p_yes.size
    multi = np.broadcast_to(np.asarray(multi, dtype=bool), (n,))
    q_no = 1.0 - q_yes if no_price is None else np.broadcast_to(_vec(no_price), (n,))
    cash_f = float(cash)

    edge_yes, edge_no = p_yes - q_yes, (1.0 - p_yes) - q_no
    buy_no = ~multi & (edge_no > edge_yes)
    side_p = np.where(buy_no, 1.0 - p_yes, p_yes)
    side_q = np.where(buy_no, q_no, q_yes)
    edge = side_p - side_q
    threshold = np.where(multi, C.edge_threshold_multi, C.edge_threshold_binary)
    valid = np.isfinite(side_p) & np.isfinite(side_q) & (side_q > 0) & (side_q < 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kelly = np.where(valid & (edge > 0), edge / (1.0 - side_q), 0.0)
    # Small tolerance so an edge of exactly the threshold (e.g. 0.53 - 0.50) is not lost to rounding.
    eligible = valid & (edge >= threshold - 1e-12)
    raw = np.where(eligible, fraction * kelly * cash_f, 0.0)
    budget = cap * cash_f
    total = raw.sum()
    if cash_f > 0 and total > budget:
        raw = raw * (budget / total)

    bets = []
    for i in range(n):
        stake = _to_cents(raw[i]) if cash_f > 0 else Decimal("0.00")
        if not valid[i]:
            reason = "bad_price"
        elif edge[i] <= 0:
            reason = "no_edge"
        elif not eligible[i]:
            reason = "below_edge"
        elif stake < min_bet:
            reason = "below_min_bet"
        else:
            reason = "bet"
        bets.append(
            StakedBet(
                index=i,
                side=None if reason in ("no_edge", "bad_price") else ("NO" if buy_no[i] else "YES"),
                p=float(side_p[i]),
                price=float(side_q[i]),
                edge=float(edge[i]),
                kelly=float(kelly[i]),
                stake=stake if reason == "bet" else Decimal("0.00"),
                reason=reason,
            )
        )
    return bets
