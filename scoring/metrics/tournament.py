"""The tournament's scoring rule (Metaculus 2022 style, the market as the community): the
time-averaged relative log score of one question with the forecaster's coverage, the take per
competitor and its prize share.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from scoring.metrics._arrays import FloatArray, _pair, _vec
from scoring.metrics.proper import relative_log_loss


def _step_values(times: FloatArray, values: FloatArray, at: FloatArray) -> FloatArray:
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
    resolution is not covered, as in Metaculus tournaments (dividing by the actual life instead
    gives 0.667 where Metaculus says 0.50 for a forecast a quarter into a question that resolves
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


def tournament_takes(scores: ArrayLike, coverages: ArrayLike) -> FloatArray:
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


def prize_shares(takes: ArrayLike) -> FloatArray:
    """Share of the prize pool: take / sum of takes (all zero when nobody has a take)."""
    t = _vec(takes)
    total = t.sum()
    return t / total if total > 0 else np.zeros_like(t)
