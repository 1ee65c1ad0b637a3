"""Proper scores of probability forecasts: Brier (binary, multiclass, per question), log, RPS,
Brier skill, the completion of partly stated forecasts, and the market-relative log score.

Losses are "lower is better"; the relative log score is "higher is better" (it beats the market
when positive).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from scoring.metrics._arrays import (
    NAN,
    FloatArray,
    _clip,
    _matrix,
    _mean,
    _outcome_prob,
    _pair,
)


def brier_loss(p: ArrayLike, o: ArrayLike) -> FloatArray:
    """Per-forecast binary Brier loss (p - o)^2."""
    p, o = _pair(p, o)
    return (p - o) ** 2


def brier(p: ArrayLike, o: ArrayLike) -> float:
    """Binary Brier score: mean (p - o)^2, range 0..1 (0.25 = always 0.5)."""
    return _mean(brier_loss(p, o))


def brier_multiclass_loss(P: ArrayLike, o: ArrayLike) -> FloatArray:
    """Per-question Brier (1950) loss summed over the K classes, range 0..2."""
    P, idx = _matrix(P, o)
    # sum_k (P_k - 1[k=o])^2 = sum_k P_k^2 - 2 P_o + 1, without building the one-hot matrix.
    return np.einsum("ij,ij->i", P, P) - 2.0 * P[np.arange(P.shape[0]), idx] + 1.0


def brier_multiclass(P: ArrayLike, o: ArrayLike) -> float:
    """Multiclass Brier score, summed convention (range 0..2); equals 2 * brier for K = 2."""
    return _mean(brier_multiclass_loss(P, o))


def question_brier_loss(P: ArrayLike, o: ArrayLike) -> FloatArray:
    """Per-question leaderboard Brier: half the Brier (1950) sum over the K outcomes.

    For K = 2 this is exactly the binary Brier (p_yes - o_yes)^2, range 0..1, and a market with
    more outcomes counts once on the same scale (frozen brier_question_convention).
    """
    return 0.5 * brier_multiclass_loss(P, o)


def complete_forecast(stated: ArrayLike, shown: ArrayLike | None = None) -> FloatArray:
    """Full probability vectors from the outcomes a decision stated (frozen forecast_completion).

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


def log_loss(p: ArrayLike, o: ArrayLike, eps: float | None = None) -> FloatArray:
    """Per-forecast -ln p(outcome), natural log, probability clipped to [eps, 1 - eps].

    Accepts a binary p vector or an (n, K) matrix with class indices.
    """
    return -_log_outcome_prob(p, o, eps)


def _log_outcome_prob(p: ArrayLike, o: ArrayLike, eps: float | None) -> FloatArray:
    eps = C.log_eps if eps is None else eps
    q = _outcome_prob(p, o)  # a fresh array, so the clip and log can work in place
    np.clip(q, eps, 1.0 - eps, out=q)
    return np.log(q, out=q)


def log_score(p: ArrayLike, o: ArrayLike, eps: float | None = None) -> float:
    """Mean log loss (lower is better); eps defaults to the frozen log_eps."""
    logs = _log_outcome_prob(p, o, eps)
    return -float(logs.mean()) if logs.size else NAN


def rps_loss(P: ArrayLike, o: ArrayLike) -> FloatArray:
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
# Market-relative
# ---------------------------------------------------------------------------------------------


def relative_log_loss(
    p: ArrayLike, m: ArrayLike, o: ArrayLike, eps: float | None = None
) -> FloatArray:
    """Per-forecast ln(p_outcome / m_outcome), both clipped to [eps, 1 - eps]; > 0 beats m."""
    eps = C.log_eps if eps is None else eps
    return np.log(_clip(_outcome_prob(p, o), eps)) - np.log(_clip(_outcome_prob(m, o), eps))


def relative_log_score(p: ArrayLike, m: ArrayLike, o: ArrayLike, eps: float | None = None) -> float:
    """Mean Metaculus-style relative log score of p against m (the market); higher is better."""
    return _mean(relative_log_loss(p, m, o, eps))
