"""The scored unit: per-forecast rows (Items) and the questions built from them (Questions),
plus the "YES" view of every forecast row that champion's clothes bets on.

A question is what one decision said about one market. The outcomes it stated become a full
probability vector (metrics.complete_forecast: the rest shared like the shown prices), scored once
with the question Brier (half the Brier 1950 sum over the K outcomes: the binary Brier for two
outcomes) and the log score of the outcome that happened. The market's reference vector is
completed the same way from the shown prices, so copying the price scores exactly 0 skill. Void
and unresolved markets are not scored; the summed multiclass Brier and the RPS (ordered outcomes)
are kept for markets with more than two outcomes.

Pure computation over a loaded ScopeData: model classes are imported only for their choice
constants (Market.Status, Market.Kind).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from markets.models import Market
from scoring import metrics
from scoring.load import ScopeData

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@dataclass
class Items:
    """Forecast arrays plus what scoring needs: competitor/cohort index, o, validity masks."""

    comp: IntArray
    cohort: IntArray
    entry: IntArray
    decision: IntArray
    week: IntArray
    market: IntArray
    outcome: NDArray[np.object_]
    p: FloatArray
    m: FloatArray
    t: FloatArray
    o: FloatArray  # 0/1, NaN when not resolved
    scored: BoolArray  # resolved and not void
    binary: BoolArray


def build_items(data: ScopeData) -> Items:
    f = data.forecasts
    e = data.entries
    pos = np.searchsorted(e["id"], f["entry"]) if e["id"].size else np.zeros(0, dtype=np.int64)
    n = f["p"].size
    o = np.full(n, math.nan)
    scored = np.zeros(n, dtype=bool)
    binary = np.zeros(n, dtype=bool)
    for i, (market_id, outcome) in enumerate(zip(f["market"], f["outcome"])):
        info = data.markets.get(int(market_id))
        if info is None:
            continue
        binary[i] = info.kind == Market.Kind.BINARY
        if info.status == Market.Status.RESOLVED:
            scored[i] = True
            o[i] = 1.0 if outcome == info.resolved_outcome else 0.0
    return Items(
        comp=e["comp"][pos] if n else np.zeros(0, dtype=np.int64),
        cohort=e["cohort"][pos] if n else np.zeros(0, dtype=np.int64),
        entry=f["entry"],
        decision=f["decision"],
        week=f["week"],
        market=f["market"],
        outcome=f["outcome"],
        p=f["p"],
        m=f["m"],
        t=f["t"],
        o=o,
        scored=scored,
        binary=binary,
    )


@dataclass
class Questions:
    """One row per question: a decision's forecast of one market, as complete vectors, scored.

    Per question: who and when (comp, cohort, entry, decision, week, market, t), the number of
    outcomes k, whether it is scored (resolved to a listed outcome by as_of, not void) and has a
    market reference (every stated outcome had a shown price). Binary questions keep P(first
    outcome) as p_yes / m_yes / o_yes for calibration, the information test and Murphy. Losses
    are NaN where they do not apply.
    """

    comp: IntArray
    cohort: IntArray
    entry: IntArray
    decision: IntArray
    week: IntArray
    market: IntArray
    t: FloatArray
    k: IntArray
    scored: BoolArray
    has_m: BoolArray
    p_yes: FloatArray
    m_yes: FloatArray
    o_yes: FloatArray
    p_o: FloatArray  # probability of the outcome that happened (completed vector)
    m_o: FloatArray
    brier: FloatArray  # question Brier (half-summed), 0..1
    m_brier: FloatArray
    log: FloatArray
    m_log: FloatArray
    uniform_brier: FloatArray  # question Brier of the uniform forecast, (1 - 1/k) / 2
    brier_multi: FloatArray  # summed Brier (1950), k > 2 only
    rps: FloatArray  # ranked probability score, ordered k > 2 only

    @property
    def binary(self) -> BoolArray:
        return self.k == 2


def build_questions(items: Items, data: ScopeData) -> Questions:
    """Group the forecast rows by (decision, market) and score each group as one question.

    Stated outcomes are placed by their index in the market's outcome list (rows naming an
    outcome the market does not list are ignored); the prices shown for the outcomes not stated
    come from the frozen universe (multi-outcome markets) and matter only for completion.
    """
    n = items.p.size
    if n == 0:
        z, zf = np.zeros(0, dtype=np.int64), np.zeros(0)
        zb = np.zeros(0, dtype=bool)
        return Questions(z, z, z, z, z, z, zf, z, zb, zb, *([zf] * 12))
    index_of = {
        m: {name: i for i, name in enumerate(info.outcomes)} for m, info in data.markets.items()
    }
    col = np.asarray(
        [index_of.get(m, {}).get(o, -1) for m, o in zip(items.market.tolist(), items.outcome.tolist())],
        dtype=np.int64,
    )  # fmt: skip
    keys = np.stack([items.decision, items.market], axis=1)
    _, first, code = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    code = code.reshape(-1)
    nq = first.size
    market = items.market[first]
    k = np.asarray(
        [len(data.markets[m].outcomes) if m in data.markets else 0 for m in market.tolist()],
        dtype=np.int64,
    )
    o_idx = np.full(nq, -1, dtype=np.int64)
    for q, m in enumerate(market.tolist()):
        info = data.markets.get(m)
        if info is not None and info.status == Market.Status.RESOLVED:
            o_idx[q] = index_of[m].get(info.resolved_outcome, -1)
    nan = np.full(nq, np.nan)
    out = {
        name: nan.copy()
        for name in ("p_yes", "m_yes", "o_yes", "p_o", "m_o", "brier", "m_brier", "log",
                     "m_log", "brier_multi", "rps")
    }  # fmt: skip
    has_m = np.zeros(nq, dtype=bool)
    # A question counts only if one of its rows names an outcome the market lists.
    o_idx[np.bincount(code, weights=(col >= 0), minlength=nq) == 0] = -1
    with np.errstate(invalid="ignore", divide="ignore"):
        out["uniform_brier"] = np.where(k >= 2, 0.5 * (1.0 - 1.0 / np.maximum(k, 1)), np.nan)
    cohort = items.cohort[first]
    week = items.week[first]
    for kk in sorted(set(k.tolist()) - {0, 1}):
        qs = np.flatnonzero(k == kk)
        pos = np.full(nq, -1, dtype=np.int64)
        pos[qs] = np.arange(qs.size)
        rows = np.flatnonzero((pos[code] >= 0) & (col >= 0) & (col < kk))
        stated = np.full((qs.size, kk), np.nan)
        shown = np.full((qs.size, kk), np.nan)
        stated[pos[code[rows]], col[rows]] = items.p[rows]
        shown[pos[code[rows]], col[rows]] = items.m[rows]
        weights = shown.copy()
        if kk > 2 and data.shown:  # the unstated outcomes' prices, from the frozen universe
            for j, q in enumerate(qs.tolist()):
                prices = data.shown.get((int(cohort[q]), int(week[q])), {}).get(int(market[q]))
                if prices:
                    names = data.markets[int(market[q])].outcomes
                    full = np.asarray([prices.get(name, np.nan) for name in names], dtype=float)
                    weights[j] = np.where(np.isnan(weights[j]), full, weights[j])
        said = ~np.isnan(stated)
        P = metrics.complete_forecast(stated, weights)
        ref_ok = np.asarray(said.any(axis=1) & ~(said & np.isnan(shown)).any(axis=1), dtype=bool)
        M = metrics.complete_forecast(np.where(said, shown, np.nan), weights)
        has_m[qs] = ref_ok
        if kk == 2:
            out["p_yes"][qs], out["m_yes"][qs] = P[:, 0], np.where(ref_ok, M[:, 0], np.nan)
        oi = o_idx[qs]
        done = oi >= 0
        if not done.any():
            continue
        sq, Ps, Ms, os_ = qs[done], P[done], M[done], oi[done]
        ok = ref_ok[done]
        out["brier"][sq] = metrics.question_brier_loss(Ps, os_)
        out["log"][sq] = metrics.log_loss(Ps, os_)
        out["p_o"][sq] = Ps[np.arange(sq.size), os_]
        out["m_brier"][sq] = np.where(ok, metrics.question_brier_loss(Ms, os_), np.nan)
        out["m_log"][sq] = np.where(ok, metrics.log_loss(Ms, os_), np.nan)
        out["m_o"][sq] = np.where(ok, Ms[np.arange(sq.size), os_], np.nan)
        if kk == 2:
            out["o_yes"][sq] = (os_ == 0).astype(float)
        else:
            out["brier_multi"][sq] = metrics.brier_multiclass_loss(Ps, os_)
            ordered = np.asarray([data.markets[int(m)].ordered for m in market[sq].tolist()])
            if ordered.any():
                out["rps"][sq[ordered]] = metrics.rps_loss(Ps[ordered], os_[ordered])
    return Questions(
        comp=items.comp[first], cohort=cohort, entry=items.entry[first],
        decision=items.decision[first], week=week, market=market, t=items.t[first], k=k,
        scored=o_idx >= 0, has_m=has_m, **out,
    )  # fmt: skip


def category_codes(values: NDArray[np.object_]) -> IntArray:
    """Integer codes of string-like values, so they can be keys of np.unique over rows."""
    _, codes = np.unique(values.astype(str), return_inverse=True)
    return codes.reshape(-1)


@dataclass
class YesView:
    """Every forecast row seen as a statement about the market's first outcome ("YES").

    For binary markets: p_yes and the shown price m_yes. For multi-outcome rows the "YES" side
    is the stated outcome itself. Used by the champion's-clothes candidates.
    """

    p: FloatArray
    m: FloatArray


def yes_view(items: Items, data: ScopeData) -> YesView:
    n = items.p.size
    if n == 0:
        return YesView(np.zeros(0), np.zeros(0))
    market_ids, inverse = np.unique(items.market, return_inverse=True)
    first = np.empty(market_ids.size, dtype=object)
    for k, market_id in enumerate(market_ids.tolist()):
        info = data.markets.get(market_id)
        if info is not None and info.outcomes and info.kind == Market.Kind.BINARY:
            first[k] = info.outcomes[0]
    flip = items.binary & (items.outcome != first[inverse.reshape(-1)])
    return YesView(
        p=np.where(flip, 1.0 - items.p, items.p), m=np.where(flip, 1.0 - items.m, items.m)
    )
