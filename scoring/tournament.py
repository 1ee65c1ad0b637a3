"""The tournament: each forecaster's stated probabilities against the market's price path,
question by question (a question is (cohort, market)), turned into a take and a prize share.

Owns the vectorised form of metrics.tournament_question_score (tournament_pair_scores), the
per-(entry, question) pairs of a run and a group's tournament table. Pure computation over
loaded data: it never touches the ORM (Market is imported only for its kind constant) and never
writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.methodology import CONSTANTS as C
from markets.models import Market
from scoring import metrics
from scoring.compute import Items, YesView
from scoring.load import ScopeData


def tournament_pair_scores(
    pair: np.ndarray,
    t: np.ndarray,
    p: np.ndarray,
    pair_question: np.ndarray,
    q_start: np.ndarray,
    q_close: np.ndarray,
    q_end: np.ndarray,
    q_outcome: np.ndarray,
    mq: np.ndarray,
    mt: np.ndarray,
    mp: np.ndarray,
    eps: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """metrics.tournament_question_score for many (forecaster, question) pairs at once.

    Forecast rows: pair code, time, P(YES of the question). Per pair its question; per question
    the life start, scheduled close, actual end (min of resolution and close) and outcome; the
    market series as rows (question, time, P(YES)). Returns (score, coverage) per pair with the
    same rules: forecast and price carried forward, price before its first point = the first,
    integrand zero before the first forecast and after the end, averaged over [start, close].
    A question without any market point scores 0 with coverage 0, like the metrics function.
    Written out in numpy because 100,000 pairs one call at a time take tens of seconds.
    """
    eps = C.log_eps if eps is None else eps
    n_pairs = pair_question.size
    if n_pairs == 0:
        return np.zeros(0), np.zeros(0)
    order = np.lexsort((np.arange(t.size), t, pair))
    pair, p = pair[order], p[order]
    qs = pair_question[pair]
    tt = np.maximum(t[order], q_start[qs])
    new_pair = np.r_[True, pair[1:] != pair[:-1]]
    last = np.r_[pair[1:] != pair[:-1], True]
    nxt = np.where(last, np.inf, np.r_[tt[1:], np.inf])
    end = q_end[qs]
    width = np.maximum(np.minimum(nxt, end) - np.minimum(tt, end), 0.0)
    p_o = np.clip(np.where(q_outcome[qs] == 1, p, 1.0 - p), eps, 1.0 - eps)
    a = np.bincount(pair, weights=np.log(p_o) * width, minlength=n_pairs)
    first = np.full(n_pairs, np.inf)
    first[pair[new_pair]] = tt[new_pair]

    g = _step_integral(mq, mt, mp, q_outcome, q_start.size, eps)
    ps, pc, pe = q_start[pair_question], q_close[pair_question], q_end[pair_question]
    valid = (pc > ps) & (pe > ps) & (first < pe) & g["has"][pair_question]
    safe_first = np.where(valid, first, 0.0)
    safe_end = np.where(valid, pe, 0.0)
    m_int = g["at"](pair_question, safe_end) - g["at"](pair_question, safe_first)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(valid, (a - m_int) / (pc - ps), 0.0)
        coverage = np.where(valid, (pe - first) / (pe - ps), 0.0)
    return score, coverage


def _step_integral(mq, mt, mp, q_outcome, n_q: int, eps: float) -> dict:
    """Integral from each question's first point of ln(market prob. of the outcome), carried
    forward; before the first point the first value. Returns {"has": bool per question,
    "at": f(question codes, times) -> integral values}."""
    order = np.lexsort((np.arange(mt.size), mt, mq))
    mq, mt, mp = mq[order], mt[order], mp[order]
    has = np.bincount(mq, minlength=n_q) > 0
    b = np.log(np.clip(np.where(q_outcome[mq] == 1, mp, 1.0 - mp), eps, 1.0 - eps))
    same_next = np.r_[mq[1:] == mq[:-1], False]
    dt = np.where(same_next, np.r_[mt[1:], 0.0] - mt, 0.0)
    cum = np.r_[0.0, np.cumsum(b * dt)[:-1]]  # integral from the global start to each point
    group_first = np.zeros(n_q, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, mq[1:] != mq[:-1]]) if mq.size else np.zeros(0, int)
    group_first[mq[starts]] = starts
    g_at_points = cum - cum[group_first[mq]] if mq.size else cum
    t0 = min(mt.min(), 0.0) if mt.size else 0.0

    def at(q: np.ndarray, x: np.ndarray) -> np.ndarray:
        if mq.size == 0:
            return np.zeros(q.size)
        span = max(float(np.max(mt) - t0), float(np.max(x) - t0 if x.size else 0.0)) + 1.0
        keys = mq * span + (mt - t0)
        j = np.searchsorted(keys, q * span + (x - t0), side="right") - 1
        jc = np.clip(j, 0, mq.size - 1)
        inside = (j >= 0) & (mq[jc] == q)
        k0 = group_first[q]
        before = b[k0] * (x - mt[k0])
        return np.where(inside, g_at_points[jc] + b[jc] * (x - mt[jc]), before)

    return {"has": has, "at": at}


@dataclass
class TournamentPairs:
    """Per (entry, question) tournament score and coverage, computed once per run."""

    entry: np.ndarray
    cohort: np.ndarray
    question: np.ndarray  # question code (cohort, market)
    score: np.ndarray
    coverage: np.ndarray


def tournament_pairs(items: Items, yes: YesView, data: ScopeData) -> TournamentPairs:
    """Questions are (cohort, market) of resolved, non-void markets. Binary: P(first outcome);
    multi-outcome: the probability stated for the outcome that happened. The market series is
    that outcome's price history (binary: the complement of the other side when needed),
    falling back to the prices shown at decision time. Life: max(market open, cohort start)
    to the scheduled close (else the resolution); the end is the resolution if earlier."""
    use = items.scored & (items.binary | (items.o == 1.0))
    idx = np.flatnonzero(use)
    empty = np.zeros(0)
    if idx.size == 0:
        return TournamentPairs(empty, empty, empty, empty, empty)
    qkeys = np.stack([items.cohort[idx], items.market[idx]], axis=1)
    q_uniq, q_code = np.unique(qkeys, axis=0, return_inverse=True)
    q_code = q_code.reshape(-1)
    n_q = q_uniq.shape[0]
    q_start, q_close, q_end = np.zeros(n_q), np.zeros(n_q), np.zeros(n_q)
    q_outcome = np.ones(n_q, dtype=np.int64)
    series_q, series_t, series_p = [], [], []
    has_series = np.zeros(n_q, dtype=bool)
    for k, (cohort_id, market_id) in enumerate(q_uniq.tolist()):
        info = data.markets[market_id]
        binary = info.kind == Market.Kind.BINARY
        target = info.outcomes[0] if binary else info.resolved_outcome
        q_outcome[k] = int(info.resolved_outcome == target)
        start = data.cohorts[cohort_id]["week_start"].timestamp()
        start = max(start, info.open_t) if math.isfinite(info.open_t) else start
        resolve = info.resolved_t if math.isfinite(info.resolved_t) else info.closed_t
        close = info.close_t if math.isfinite(info.close_t) and info.close_t > start else resolve
        q_start[k], q_close[k] = start, close if math.isfinite(close) else start
        q_end[k] = min(resolve, close) if math.isfinite(resolve) else q_close[k]
        mt, mp = data.prices.get((market_id, target), (empty, empty))
        if mt.size == 0 and binary and len(info.outcomes) == 2:
            other_t, other_p = data.prices.get((market_id, info.outcomes[1]), (empty, empty))
            mt, mp = other_t, 1.0 - other_p
        if mt.size:
            has_series[k] = True
            series_q.append(np.full(mt.size, k))
            series_t.append(mt)
            series_p.append(mp)
    p_target = np.where(items.binary[idx], yes.p[idx], items.p[idx])
    m_target = np.where(items.binary[idx], yes.m[idx], items.m[idx])
    fallback = ~has_series[q_code] & np.isfinite(m_target)
    series_q.append(q_code[fallback])
    series_t.append(items.t[idx][fallback])
    series_p.append(m_target[fallback])
    pkeys = np.stack([items.entry[idx], q_code], axis=1)
    p_uniq, pair = np.unique(pkeys, axis=0, return_inverse=True)
    score, coverage = tournament_pair_scores(
        pair.reshape(-1), items.t[idx], p_target, p_uniq[:, 1], q_start, q_close, q_end,
        q_outcome, np.concatenate(series_q).astype(np.int64), np.concatenate(series_t),
        np.concatenate(series_p),
    )  # fmt: skip
    return TournamentPairs(
        entry=p_uniq[:, 0], cohort=q_uniq[p_uniq[:, 1], 0], question=p_uniq[:, 1],
        score=score, coverage=coverage,
    )  # fmt: skip


def tournament_table(tp: TournamentPairs, cohort_ids: set[int], data: ScopeData, present) -> dict:
    """Tournament table of a group: per competitor the mean over its replicates of each
    question's score and coverage, then take = mean coverage x e^(sum of scores), prize share."""
    sel = np.isin(tp.cohort, list(cohort_ids))
    if not sel.any() or not present:
        return {"questions": 0, "rows": []}
    e_pos = np.searchsorted(data.entries["id"], tp.entry[sel])
    comp = data.entries["comp"][e_pos]
    col = np.full(len(data.competitors), -1)
    col[present] = np.arange(len(present))
    q_ids, q = np.unique(tp.question[sel], return_inverse=True)
    n_q, n_c = q_ids.size, len(present)
    flat = col[comp] * n_q + q.reshape(-1)
    n = np.bincount(flat, minlength=n_c * n_q).reshape(n_c, n_q)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.bincount(flat, tp.score[sel], n_c * n_q).reshape(n_c, n_q) / n
        covers = np.bincount(flat, tp.coverage[sel], n_c * n_q).reshape(n_c, n_q) / n
    takes = metrics.tournament_takes(scores, covers)
    shares = metrics.prize_shares(takes)
    rows = [
        {
            "competitor": data.competitors[ci][1],
            "questions": int((n[k] > 0).sum()),
            "score": float(np.nansum(scores[k])),
            "coverage": float(np.nan_to_num(covers[k]).mean()),
            "take": float(takes[k]),
            "prize_share": float(shares[k]),
        }
        for k, ci in enumerate(present)
    ]
    return {"questions": int(n_q), "rows": rows}
