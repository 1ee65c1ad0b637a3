"""Percentile bootstrap intervals that resample markets (groups), paired across statistics and
competitors by a shared seed, and the sample size a competitor needs before it stops being
provisional.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from core.methodology import seed as methodology_seed
from scoring.metrics._arrays import NAN, FloatArray, IntArray, _pair, _vec
from scoring.metrics.distributions import normal_ppf

_CHUNK_CELLS = 4_000_000  # bound memory: resample index blocks of at most this many cells


def _group_codes(groups: ArrayLike | None, n: int) -> tuple[IntArray, int]:
    if groups is None:
        return np.arange(n), n
    groups = np.asarray(groups).reshape(-1)
    if groups.size != n:
        raise ValueError(f"groups has {groups.size} entries for {n} values")
    _, codes = np.unique(groups, return_inverse=True)
    return codes.reshape(-1), int(codes.max()) + 1 if n else 0


def _resampled_group_means(
    columns: Sequence[FloatArray], groups: ArrayLike | None, n_boot: int, seed: int
) -> FloatArray:
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


def _percentile_interval(reps: FloatArray, level: float) -> tuple[float, float]:
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return NAN, NAN
    lo, hi = np.percentile(reps, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return float(lo), float(hi)


def _generic_replicates(
    x: FloatArray, stat: Callable, groups: ArrayLike | None, n_boot: int, seed: int
) -> FloatArray:
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
        var = float(np.asarray(loss_diffs_or_var))
    else:
        values = _vec(loss_diffs_or_var)
        values = values[np.isfinite(values)]
        if values.size < 2:
            return math.inf
        var = float(values.var(ddof=1))
    if not (math.isfinite(var) and var >= 0):
        return math.inf
    z = normal_ppf(1.0 - alpha / 2.0) + normal_ppf(power)
    return float(max(2, math.ceil(z * z * var / (delta * delta))))


def provisional_threshold() -> int:
    """Resolved questions a competitor needs before it is no longer provisional.

    One number for everybody, from frozen constants only (enough to detect a
    provisional_brier_delta Brier edge at provisional_power): required_n_for_brier_edge with the
    variance provisional_reference_sd^2. A variance estimated from each competitor's own
    differences to the market would let a competitor that stays near the market leave the badge
    after two resolutions while a clearly worse one kept it for thousands.
    """
    return int(required_n_for_brier_edge(C.provisional_reference_sd**2))
