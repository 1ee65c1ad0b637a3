"""Which questions a competitor was asked, and the view that scores everyone on the same ones.

Coverage (frozen question_coverage): the scope asks every decision the week's forecast sample;
of those (decision, market) questions whose market resolved by the score time, how many the
competitor gave a scored forecast. A competitor that skips or fails is ranked on its own
questions (ranking_view), so its coverage stands beside its score.

The common-question view (frozen common_set_imputation): a group's questions are the
(cohort, week, market) of its weeks' forecast samples that resolved; every competitor of the
group is scored on all of them, its forecast imputed by the price the week's universe showed
where it has none (0 skill by construction). The market reference is that shown price for
everyone.

Pure computation over a loaded ScopeData and its Questions; the bootstrap is compute.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from markets.models import Market
from scoring import metrics
from scoring.load import ScopeData
from scoring.questions import FloatArray, IntArray, Questions


def _outcome_index(data: ScopeData, market_id: int) -> int:
    """Index of the market's resolved outcome, -1 when it has not resolved to a listed one."""
    info = data.markets.get(market_id)
    if info is None or info.status != Market.Status.RESOLVED:
        return -1
    try:
        return info.outcomes.index(info.resolved_outcome)
    except ValueError:
        return -1


@dataclass
class Coverage:
    """Per competitor index: questions asked that resolved, and how many of them it scored."""

    asked: IntArray
    scored: IntArray


def coverage(data: ScopeData, q: Questions, cohort_ids: set[int], n_comp: int) -> Coverage:
    entry_row = {e: i for i, e in enumerate(data.entries["id"].tolist())}
    mine = np.flatnonzero(q.scored & np.isin(q.cohort, list(cohort_ids)))
    scored_pairs = set(zip(q.decision[mine].tolist(), q.market[mine].tolist(), strict=True))
    asked = np.zeros(n_comp, dtype=np.int64)
    scored = np.zeros(n_comp, dtype=np.int64)
    resolved: dict[int, bool] = {}
    for decision_id, row in data.decisions.items():
        i = entry_row.get(row.entry)
        if i is None:
            continue
        cohort = int(data.entries["cohort"][i])
        if cohort not in cohort_ids:
            continue
        sample = data.samples.get((cohort, row.week))
        if not sample:
            continue
        ci = int(data.entries["comp"][i])
        for market_id in sample:
            if market_id not in resolved:
                resolved[market_id] = _outcome_index(data, market_id) >= 0
            if resolved[market_id]:
                asked[ci] += 1
                scored[ci] += (decision_id, market_id) in scored_pairs
    return Coverage(asked=asked, scored=scored)


@dataclass
class CommonSet:
    """The group's common questions scored for every competitor present (one row per pair)."""

    n_questions: int
    comp: IntArray  # competitor index of each (competitor, question) pair
    market: IntArray
    brier: FloatArray  # the competitor's loss, imputed where it had no forecast
    m_brier: FloatArray  # the shown price's loss
    own: FloatArray  # 1.0 where the competitor had its own forecast


def _shown_vector(data: ScopeData, market_id: int, prices: dict[str, float]) -> FloatArray | None:
    """The universe's shown prices of the market's outcomes as a forecast (forecast_completion
    of every shown price), None when it showed none."""
    info = data.markets[market_id]
    stated = np.asarray([prices.get(name, np.nan) for name in info.outcomes], dtype=float)
    if np.isnan(stated).all() or stated.size < 2:
        return None
    return metrics.complete_forecast(stated[None, :], stated[None, :])[0]


def common_set(
    data: ScopeData, q: Questions, cohort_ids: set[int], present: list[int]
) -> CommonSet:
    """Questions in (cohort, week, sample order); pairs in (question, competitor index) order."""
    keys: list[tuple[int, int, int]] = []
    ref: list[float] = []
    for (cohort, week), sample in sorted(data.samples.items()):
        if cohort not in cohort_ids:
            continue
        for market_id, prices in sample.items():
            o = _outcome_index(data, market_id)
            vector = _shown_vector(data, market_id, prices) if o >= 0 else None
            if vector is None:
                continue
            keys.append((cohort, week, market_id))
            ref.append(float(metrics.question_brier_loss(vector[None, :], [o])[0]))
    index = {k: j for j, k in enumerate(keys)}
    n_q, n_p = len(keys), len(present)
    col = {ci: j for j, ci in enumerate(present)}
    total = np.zeros((n_q, n_p))
    count = np.zeros((n_q, n_p))
    s = np.flatnonzero(q.scored & np.isin(q.cohort, list(cohort_ids)))
    for i in s.tolist():
        j = index.get((int(q.cohort[i]), int(q.week[i]), int(q.market[i])))
        c = col.get(int(q.comp[i]))
        if j is None or c is None:
            continue
        total[j, c] += q.brier[i]
        count[j, c] += 1
    m_brier = np.repeat(np.asarray(ref, dtype=float), n_p)
    with np.errstate(invalid="ignore", divide="ignore"):
        own_loss = (total / np.maximum(count, 1)).reshape(-1)
    own = (count > 0).reshape(-1)
    return CommonSet(
        n_questions=n_q,
        comp=np.tile(np.asarray(present, dtype=np.int64), n_q),
        market=np.repeat(np.asarray([k[2] for k in keys], dtype=np.int64), n_p),
        brier=np.where(own, own_loss, m_brier),
        m_brier=m_brier,
        own=own.astype(float),
    )
