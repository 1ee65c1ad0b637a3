"""The tournament: each forecaster's stated probabilities against the price it was shown,
question by question (a question is (cohort, market)), turned into a take and a prize share.

Owns the vectorised form of metrics.tournament_question_score (tournament_pair_scores), the
per-(entry, question) pairs of a run and a group's tournament table. Pure computation over
loaded data: it never touches the ORM and never writes.

Reference (frozen tournament_reference, v2): the price shown at each of the competitor's
decisions, carried forward exactly like its forecast. Competitors update only at decisions
(weekly); against the live price path a weekly forecast would lose to every tick the market moves
toward the outcome, every take would come out near 1e-12 and market copiers would take most of
the prize.
Coverage (frozen tournament_take) is over the scheduled life.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.methodology import CONSTANTS as C
from scoring import metrics
from scoring.load import ScopeData
from scoring.questions import FloatArray, IntArray, Questions
from scoring.stored import TournamentTable, TournamentTake


def tournament_pair_scores(
    pair: IntArray,
    t: FloatArray,
    rel: FloatArray,
    pair_question: IntArray,
    q_start: FloatArray,
    q_close: FloatArray,
    q_end: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """metrics.tournament_question_score for many (forecaster, question) pairs at once, with the
    reference carried forward like the forecast.

    Forecast rows: pair code, time and the relative log score of that forecast against the price
    shown with it, rel = ln(p_outcome / m_outcome) (0 where no price was shown). Per pair its
    question; per question the life start, the scheduled close and the actual end (min of
    resolution and close). Each forecast holds from its time (not before the start) until the
    pair's next forecast or the end; score = sum(rel x width) / (close - start), coverage =
    (end - first forecast) / (close - start), both 0 for a broken life or a first forecast at or
    after the end. Written out in numpy because 100,000 pairs one call at a time take tens of
    seconds.
    """
    n_pairs = pair_question.size
    if n_pairs == 0:
        return np.zeros(0), np.zeros(0)
    order = np.lexsort((np.arange(t.size), t, pair))
    pair, rel = pair[order], rel[order]
    qs = pair_question[pair]
    tt = np.maximum(t[order], q_start[qs])
    new_pair = np.r_[True, pair[1:] != pair[:-1]]
    last = np.r_[pair[1:] != pair[:-1], True]
    nxt = np.where(last, np.inf, np.r_[tt[1:], np.inf])
    end = q_end[qs]
    width = np.maximum(np.minimum(nxt, end) - np.minimum(tt, end), 0.0)
    a = np.bincount(pair, weights=rel * width, minlength=n_pairs)
    first = np.full(n_pairs, np.inf)
    first[pair[new_pair]] = tt[new_pair]
    ps, pc, pe = q_start[pair_question], q_close[pair_question], q_end[pair_question]
    valid = (pc > ps) & (pe > ps) & (first < pe)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(valid, a / (pc - ps), 0.0)
        coverage = np.where(valid, (pe - first) / (pc - ps), 0.0)
    return score, coverage


@dataclass
class TournamentPairs:
    """Per (entry, question) tournament score and coverage, computed once per run."""

    entry: IntArray
    cohort: IntArray
    question: IntArray  # question code (cohort, market)
    score: FloatArray
    coverage: FloatArray


def tournament_pairs(q: Questions, data: ScopeData) -> TournamentPairs:
    """Questions are (cohort, market) of resolved, non-void markets; a pair is (entry, question).
    Each of the entry's forecasts of the market contributes ln(p_o / m_o): p_o and m_o are the
    probabilities its completed vector and the shown prices' completed vector give the outcome
    that happened, clipped at log_eps. Life: max(market open, cohort start) to the scheduled
    close (else the resolution); the end is the resolution if earlier."""
    idx = np.flatnonzero(q.scored)
    if idx.size == 0:
        none, empty = np.zeros(0, dtype=np.int64), np.zeros(0)
        return TournamentPairs(none, none, none, empty, empty)
    qkeys = np.stack([q.cohort[idx], q.market[idx]], axis=1)
    q_uniq, q_code = np.unique(qkeys, axis=0, return_inverse=True)
    q_code = q_code.reshape(-1)
    n_q = q_uniq.shape[0]
    q_start, q_close, q_end = np.zeros(n_q), np.zeros(n_q), np.zeros(n_q)
    for k, (cohort_id, market_id) in enumerate(q_uniq.tolist()):
        info = data.markets[market_id]
        start = data.cohorts[cohort_id]["week_start"].timestamp()
        start = max(start, info.open_t) if math.isfinite(info.open_t) else start
        resolve = info.resolved_t if math.isfinite(info.resolved_t) else info.closed_t
        close = info.close_t if math.isfinite(info.close_t) and info.close_t > start else resolve
        q_start[k], q_close[k] = start, close if math.isfinite(close) else start
        q_end[k] = min(resolve, close) if math.isfinite(resolve) else q_close[k]
    eps = C.log_eps
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.log(np.clip(q.p_o[idx], eps, 1 - eps)) - np.log(np.clip(q.m_o[idx], eps, 1 - eps))
    rel = np.where(np.isfinite(rel), rel, 0.0)
    pkeys = np.stack([q.entry[idx], q_code], axis=1)
    p_uniq, pair = np.unique(pkeys, axis=0, return_inverse=True)
    score, coverage = tournament_pair_scores(
        pair.reshape(-1), q.t[idx], rel, p_uniq[:, 1], q_start, q_close, q_end
    )
    return TournamentPairs(
        entry=p_uniq[:, 0], cohort=q_uniq[p_uniq[:, 1], 0], question=p_uniq[:, 1],
        score=score, coverage=coverage,
    )  # fmt: skip


def tournament_table(
    tp: TournamentPairs, cohort_ids: set[int], data: ScopeData, present: list[int]
) -> TournamentTable:
    """Tournament table of a group: per competitor the mean over its replicates of each
    question's score and coverage, then take = mean coverage x e^(sum of scores), prize share."""
    sel = np.isin(tp.cohort, list(cohort_ids))
    if not sel.any() or not present:
        return TournamentTable(0, [])
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
        TournamentTake(
            competitor=data.competitors[ci][1],
            questions=int((n[k] > 0).sum()),
            score=float(np.nansum(scores[k])),
            coverage=float(np.nan_to_num(covers[k]).mean()),
            take=float(takes[k]),
            prize_share=float(shares[k]),
        )
        for k, ci in enumerate(present)
    ]
    return TournamentTable(int(n_q), rows)
