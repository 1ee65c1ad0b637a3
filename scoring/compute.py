"""Computing: per-competitor scores of one scope's loaded data, as numpy over the whole scope.

Owns the per-forecast rows (build_items), the questions built from them (build_questions), the
paired market bootstrap, forecast scores (Brier, log, skill vs the market, the three Brier skill
scores, calibration, RPS), money and bets per competitor, the edge statistics of issue 6
(Diebold-Mariano tables, information tests, closing lines and CLV) and the "YES" view the paper
portfolios build on. Each helper's docstring gives its rule; the formulas themselves are in
scoring/metrics.py, the constants in the sealed methodology (v2, issue 18).

Rules a reader should know about (also stored in run.details["notes"], see scoring/present.py):
- Replicates of one competitor are pooled (their forecasts together; money summed; the return
  interval bootstraps over the individual entries' returns).
- The scored unit is the question: what one decision said about one market. The outcomes it
  stated become a full probability vector (metrics.complete_forecast: the rest shared like the
  shown prices), scored once with the question Brier (half the Brier 1950 sum over the K
  outcomes: the binary Brier for two outcomes) and the log score of the outcome that happened.
  The market's reference vector is completed the same way from the shown prices, so copying
  the price scores exactly 0 skill. Void and unresolved markets are not scored. The spec's
  summed multiclass Brier and the RPS (ordered outcomes) are published for markets with more
  than two outcomes.
- Performance: bincount, one counts matrix for the paired bootstrap; Python loops run over
  markets, decisions and competitors, never over forecasts.

It never touches the ORM: input is a ScopeData from scoring/load.py, output plain arrays and
dicts. Model classes are imported only for their choice constants (Market.Status, Trade.Side).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from cohorts.models import Trade
from core.methodology import CONSTANTS as C
from core.methodology import seed as methodology_seed
from markets.models import Market
from scoring import metrics
from scoring.load import ScopeData

# ---------------------------------------------------------------------------------------------
# Per-forecast derived arrays
# ---------------------------------------------------------------------------------------------


@dataclass
class Items:
    """Forecast arrays plus what scoring needs: competitor/cohort index, o, validity masks."""

    comp: np.ndarray
    cohort: np.ndarray
    entry: np.ndarray
    decision: np.ndarray
    week: np.ndarray
    market: np.ndarray
    outcome: np.ndarray
    p: np.ndarray
    m: np.ndarray
    t: np.ndarray
    o: np.ndarray  # 0/1, NaN when not resolved
    scored: np.ndarray  # resolved and not void
    binary: np.ndarray


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


# ---------------------------------------------------------------------------------------------
# Paired market bootstrap for every competitor at once
# ---------------------------------------------------------------------------------------------

_CHUNK_CELLS = 4_000_000


def cluster_bootstrap_ratio_ci(
    row: np.ndarray,
    cluster: np.ndarray,
    values: list[tuple[np.ndarray, np.ndarray]],
    n_rows: int,
    n_boot: int | None = None,
    level: float | None = None,
    seed: int | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Percentile CIs of sum(v*w)/sum(w) per row, resampling clusters (markets) with replacement.

    One resample draws every cluster index once for all rows (competitors) and all statistics,
    so intervals are paired: the same markets for everybody. Implemented as counts matrix W
    (resamples x clusters) times per-cluster sums, which keeps 2,000 resamples over thousands
    of markets and a dozen competitors well under a second. Returns (lo, hi) arrays per value.
    metrics.bootstrap_ci does the same for one array at a time; this is its matrix form.
    """
    n_boot = C.bootstrap_resamples if n_boot is None else n_boot
    level = C.ci_level if level is None else level
    seed = methodology_seed() if seed is None else seed
    nan = np.full(n_rows, math.nan)
    if row.size == 0:
        return [(nan, nan) for _ in values]
    clusters, code = np.unique(cluster, return_inverse=True)
    n_cl = clusters.size
    flat = row * n_cl + code
    mats = []
    for v, w in values:
        ok = np.isfinite(v) & (w > 0)
        vv = np.where(ok, v, 0.0) * np.where(ok, w, 0.0)
        ww = np.where(ok, w, 0.0)
        mats.append(np.bincount(flat, weights=vv, minlength=n_rows * n_cl).reshape(n_rows, n_cl))
        mats.append(np.bincount(flat, weights=ww, minlength=n_rows * n_cl).reshape(n_rows, n_cl))
    A = np.vstack(mats).T  # clusters x (2 * len(values) * n_rows)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, A.shape[1]))
    step = max(1, _CHUNK_CELLS // n_cl)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n_cl, size=(b, n_cl)) + (np.arange(b) * n_cl)[:, None]
        W = np.bincount(draws.ravel(), minlength=b * n_cl).reshape(b, n_cl).astype(float)
        out[start : start + b] = W @ A
    result = []
    q = [50.0 * (1.0 - level), 50.0 * (1.0 + level)]
    for k in range(len(values)):
        num = out[:, (2 * k) * n_rows : (2 * k + 1) * n_rows]
        den = out[:, (2 * k + 1) * n_rows : (2 * k + 2) * n_rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(den > 0, num / den, np.nan)
        lo, hi = nan.copy(), nan.copy()
        for r in range(n_rows):
            col = ratio[:, r]
            col = col[np.isfinite(col)]
            if col.size:
                lo[r], hi[r] = np.percentile(col, q)
        result.append((lo, hi))
    return result


# ---------------------------------------------------------------------------------------------
# Forecast scores and money per competitor
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Questions: one decision's forecast of one market
# ---------------------------------------------------------------------------------------------


@dataclass
class Questions:
    """One row per question: a decision's forecast of one market, as complete vectors, scored.

    Per question: who and when (comp, cohort, entry, decision, week, market, t), the number of
    outcomes k, whether it is scored (resolved to a listed outcome by as_of, not void) and has a
    market reference (every stated outcome had a shown price). Binary questions keep P(first
    outcome) as p_yes / m_yes / o_yes for calibration, the information test and Murphy. Losses
    are NaN where they do not apply.
    """

    comp: np.ndarray
    cohort: np.ndarray
    entry: np.ndarray
    decision: np.ndarray
    week: np.ndarray
    market: np.ndarray
    t: np.ndarray
    k: np.ndarray
    scored: np.ndarray
    has_m: np.ndarray
    p_yes: np.ndarray
    m_yes: np.ndarray
    o_yes: np.ndarray
    p_o: np.ndarray  # probability of the outcome that happened (completed vector)
    m_o: np.ndarray
    brier: np.ndarray  # question Brier (half-summed), 0..1
    m_brier: np.ndarray
    log: np.ndarray
    m_log: np.ndarray
    uniform_brier: np.ndarray  # question Brier of the uniform forecast, (1 - 1/k) / 2
    brier_multi: np.ndarray  # summed Brier (1950), k > 2 only
    rps: np.ndarray  # ranked probability score, ordered k > 2 only

    @property
    def binary(self) -> np.ndarray:
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
        ref_ok = said.any(axis=1) & ~(said & np.isnan(shown)).any(axis=1)
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


# ---------------------------------------------------------------------------------------------
# Forecast scores and money per competitor
# ---------------------------------------------------------------------------------------------


def forecast_scores(q: Questions, sel: np.ndarray, n_comp: int) -> dict[str, Any]:
    """Per competitor (arrays of n_comp): question counts, Brier, log, skill vs the market, the
    three Brier skill scores (vs the market, vs the uniform forecast, vs the base rate), the
    multiclass Brier of markets with more than two outcomes, and bootstrap CIs.

    Skill vs the market is mean(m_brier - brier) over the questions with a market reference;
    BSS vs the market is 1 - sum(brier) / sum(m_brier) over the same questions. BSS vs the base
    rate (sealed bss_base_rate_reference) uses the binary questions only: reference Brier
    b (1 - b) with b the competitor's observed YES frequency there.
    """
    comp = q.comp[sel]
    n_forecasts = np.bincount(comp, minlength=n_comp)
    s = sel & q.scored
    c = q.comp[s]
    n_resolved = np.bincount(c, minlength=n_comp)
    brier_l, log_l, m_brier = q.brier[s], q.log[s], q.m_brier[s]
    has_m = q.has_m[s]
    skill_l = np.where(has_m, m_brier - brier_l, np.nan)
    binary = q.binary[s]

    def total(weights):
        return np.bincount(c, weights=weights, minlength=n_comp)

    with np.errstate(invalid="ignore", divide="ignore"):
        brier = total(brier_l) / n_resolved
        log = total(log_l) / n_resolved
        n_m = total(has_m.astype(float))
        skill = total(np.where(has_m, skill_l, 0.0)) / n_m
        bm = total(np.where(has_m, brier_l, 0.0))
        mm = total(np.where(has_m, m_brier, 0.0))
        bss_market = 1.0 - bm / mm
        bss_uniform = 1.0 - total(brier_l) / total(q.uniform_brier[s])
        n_bin = total(binary.astype(float))
        base = total(np.where(binary, q.o_yes[s], 0.0)) / n_bin
        brier_bin = total(np.where(binary, brier_l, 0.0)) / n_bin
        ref = base * (1.0 - base)
        bss_base = np.where(ref > 0, 1.0 - brier_bin / ref, np.nan)
        multi = np.isfinite(q.brier_multi[s])
        n_multi = total(multi.astype(float))
        brier_multi = total(np.where(multi, q.brier_multi[s], 0.0)) / n_multi
    ones = np.ones(c.size)
    (b_lo, b_hi), (s_lo, s_hi) = cluster_bootstrap_ratio_ci(
        c, q.market[s], [(brier_l, ones), (skill_l, has_m.astype(float))], n_comp
    )
    return {
        "n_forecasts": n_forecasts,
        "n_resolved": n_resolved,
        "n_with_price": n_m,
        "brier": brier,
        "brier_ci": (b_lo, b_hi),
        "log": log,
        "skill": np.where(n_m > 0, skill, np.nan),
        "skill_ci": (s_lo, s_hi),
        "bss_half": bss_uniform,
        "bss_market": bss_market,
        "bss_base": bss_base,
        "base_rate": base,
        "n_binary": n_bin,
        "brier_multi": brier_multi,
        "n_multi": n_multi,
        # For the per-competitor extras (calibration, Murphy) below: binary questions only.
        "_c": c[binary],
        "_p": q.p_yes[s][binary],
        "_o": q.o_yes[s][binary],
    }


def calibration_extras(s: dict, ci: int) -> dict[str, Any]:
    """Calibration table, Murphy decomposition and ECE over the competitor's binary questions
    (P of the first outcome); multi-outcome markets have no single YES to bin."""
    mask = s["_c"] == ci
    p, o = s["_p"][mask], s["_o"][mask]
    if p.size == 0:
        return {"calibration": [], "murphy": None, "ece": None}
    return {
        "calibration": metrics.calibration(p, o),
        "murphy": metrics.murphy(p, o),
        "ece": metrics.ece(p, o),
    }


def bets_won_lost(data: ScopeData, cohort_ids: set[int], entry_comp: dict) -> dict[int, list]:
    """Per competitor [won, lost] over its BUY trades on markets resolved by as_of (void left
    out): one bet counts once, whatever position it averaged into (sealed win_rate_unit)."""
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for entry_id, _d, side, _amount, _price, _at, market_id, outcome, _pk in data.trades:
        cohort, ci = entry_comp.get(entry_id, (None, None))
        if side != Trade.Side.BUY or cohort not in cohort_ids:
            continue
        info = data.markets.get(market_id)
        if info is None or info.status != Market.Status.RESOLVED:
            continue
        out[ci][0 if outcome == info.resolved_outcome else 1] += 1
    return dict(out)


def rps_by_comp(q: Questions, sel: np.ndarray) -> dict[int, dict]:
    """Mean RPS per competitor over its resolved questions on ordered multi-outcome markets
    (from the completed probability vector)."""
    idx = np.flatnonzero(sel & np.isfinite(q.rps))
    out = {}
    for ci in np.unique(q.comp[idx]).tolist():
        values = q.rps[idx[q.comp[idx] == ci]]
        out[int(ci)] = {"rps": float(values.mean()), "n": int(values.size)}
    return out


def money_by_comp(data: ScopeData, entry_sel: np.ndarray, n_comp: int) -> dict[str, Any]:
    e = data.entries
    ids, comps, initial = e["id"][entry_sel], e["comp"][entry_sel], e["initial"][entry_sel]
    out = {
        "initial": np.zeros(n_comp),
        "pnl": [Decimal(0)] * n_comp,
        "realized": [Decimal(0)] * n_comp,
        "unrealized": [Decimal(0)] * n_comp,
        "returns": [[] for _ in range(n_comp)],
        "won": np.zeros(n_comp),
        "lost": np.zeros(n_comp),
        "tokens": np.zeros(n_comp, dtype=np.int64),
        "cost": [Decimal(0)] * n_comp,
        "entries": np.zeros(n_comp, dtype=np.int64),
        "sources": [set() for _ in range(n_comp)],
    }
    for entry_id, ci, init in zip(ids.tolist(), comps.tolist(), initial.tolist()):
        money = data.money[entry_id]
        pnl = money["total"] - Decimal(str(init))
        out["initial"][ci] += init
        out["pnl"][ci] += pnl
        out["realized"][ci] += money["realized"]
        out["unrealized"][ci] += money["unrealized"]
        out["returns"][ci].append(100.0 * float(pnl) / init if init else math.nan)
        won, lost = data.settlements.get(entry_id, (0, 0))
        out["won"][ci] += won
        out["lost"][ci] += lost
        tokens, cost = data.usage.get(entry_id, (0, Decimal(0)))
        out["tokens"][ci] += tokens
        out["cost"][ci] += cost
        out["entries"][ci] += 1
        out["sources"][ci].add(money["source"])
    return out


def implied_confidence(data: ScopeData, cohort_ids: set[int], entry_comp: dict) -> dict:
    """Forecaster Arena v1 implied-confidence Brier per competitor, from BUY trades on resolved
    markets. The bought outcome is the "YES" side, so binary and multi-outcome read the same."""
    acc: dict[int, tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
    for entry_id, decision_id, side, amount, _price, _at, market_id, outcome, _pk in data.trades:
        cohort, ci = entry_comp.get(entry_id, (None, None))
        if side != Trade.Side.BUY or cohort not in cohort_ids:
            continue
        info = data.markets.get(market_id)
        decision = data.decisions.get(decision_id)
        if info is None or info.status != Market.Status.RESOLVED or decision is None:
            continue
        if decision[3] is None:
            continue
        a, cash, o = acc[ci]
        a.append(float(amount))
        cash.append(decision[3])
        o.append(1.0 if outcome == info.resolved_outcome else 0.0)
    return {
        ci: (metrics.implied_confidence_brier(a, cash, np.ones(len(a), dtype=bool), o), len(a))
        for ci, (a, cash, o) in acc.items()
    }


# ---------------------------------------------------------------------------------------------
# Edge statistics (issue 6)
# ---------------------------------------------------------------------------------------------


def closing_price(data: ScopeData, market_id: int, outcome: str) -> tuple[float, float]:
    """(closing line, time of the price it comes from) of one outcome, NaN when there is none.

    Sealed clv_closing_rule: the anchor is the earliest of the market's scheduled end, its
    recorded close and its resolution (each as known at as_of; a market still trading at as_of
    has no closing line); the closing line is the last price point at or before anchor minus
    clv_close_horizon_hours, so the outcome is not yet public in it. A binary market's missing
    side is the complement of the other; quotes of all outcomes summing above 1 are de-vigged
    multiplicatively. The time returned is that of the oldest price point used: a trade or
    forecast at or after it has no closing line (n/a, never 0).
    """
    key = (market_id, outcome)
    if key not in data.closes:
        data.closes[key] = _closing_price(data, market_id, outcome)
    return data.closes[key]


def _closing_price(data: ScopeData, market_id: int, outcome: str) -> tuple[float, float]:
    none = (math.nan, math.nan)
    info = data.markets.get(market_id)
    if info is None or math.isnan(info.closed_t) or outcome not in info.outcomes:
        return none
    known_resolution = info.resolved_t if info.resolved_t <= data.as_of_t else math.nan
    anchor = np.nanmin([info.close_t, info.closed_t, known_resolution])
    at = anchor - 3600.0 * C.clv_close_horizon_hours
    closes, stamps = [], []
    for name in info.outcomes:
        t, p = data.prices.get((market_id, name), (np.zeros(0), np.zeros(0)))
        k = np.searchsorted(t, at, side="right") - 1
        closes.append(p[k] if k >= 0 else math.nan)
        stamps.append(t[k] if k >= 0 else math.nan)
    closes, stamps = np.asarray(closes, dtype=float), np.asarray(stamps, dtype=float)
    if len(info.outcomes) == 2:
        # Binary: a missing side is the complement of the quoted one.
        for a, b in ((0, 1), (1, 0)):
            if math.isnan(closes[a]) and not math.isnan(closes[b]):
                closes[a], stamps[a] = 1.0 - closes[b], stamps[b]
    j = info.outcomes.index(outcome)
    if np.all(np.isfinite(closes)) and closes.sum() > 1.0:
        return float(metrics.devig(closes)[j]), float(stamps.min())
    return float(closes[j]), float(stamps[j])


def dm_tables(q: Questions, sel: np.ndarray, data: ScopeData, present: list[int]) -> dict:
    """Pairwise Diebold-Mariano on common questions, Brier and log loss, Bonferroni levels.

    A common question is (cohort, week, market): two competitors pair whatever outcome labels
    they stated (v1 keyed on the label too, which dropped the pair of a "Yes" and a "No"
    statement of one market). Replicates are averaged on it; questions are ordered by time so
    the HAC variance sees the real sequence.
    """
    s = sel & q.scored
    if not s.any() or len(present) < 2:
        return {"brier": [], "log": [], "n_keys": 0}
    keys = np.stack([q.cohort[s], q.week[s], q.market[s]], axis=1)
    uniq, key = np.unique(keys, axis=0, return_inverse=True)
    key = key.reshape(-1)
    n_keys = uniq.shape[0]
    first_t = np.full(n_keys, np.inf)
    np.minimum.at(first_t, key, q.t[s])
    order = np.lexsort((np.arange(n_keys), first_t))
    comp = q.comp[s]
    slugs = {ci: data.competitors[ci][1] for ci in present}
    tables = {}
    for name, loss in (("brier", q.brier[s]), ("log", q.log[s])):
        per = {}
        for ci in present:
            mask = comp == ci
            total = np.bincount(key[mask], weights=loss[mask], minlength=n_keys)
            count = np.bincount(key[mask], minlength=n_keys)
            with np.errstate(invalid="ignore", divide="ignore"):
                per[slugs[ci]] = np.where(count > 0, total / np.maximum(count, 1), np.nan)[order]
        tables[name] = metrics.dm_matrix(per)
    tables["n_keys"] = n_keys
    return tables


def category_codes(values: np.ndarray) -> np.ndarray:
    _, codes = np.unique(values.astype(str), return_inverse=True)
    return codes.reshape(-1)


@dataclass
class YesView:
    """Every forecast row seen as a statement about the market's first outcome ("YES").

    For binary markets: p_yes and the shown price m_yes. For multi-outcome rows the "YES" side
    is the stated outcome itself. Used by the champion's-clothes candidates.
    """

    p: np.ndarray
    m: np.ndarray


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


def information_tests(q: Questions, sel: np.ndarray, data: ScopeData) -> dict:
    """Market-information test per competitor on its binary questions, against the closing line
    (questions whose closing line is later than the decision; see closing_price) and against the
    price shown at the decision ("opening")."""
    idx = np.flatnonzero(sel & q.scored & q.binary)
    close = np.full(q.t.size, np.nan)
    for i in idx.tolist():
        info = data.markets[int(q.market[i])]
        value, stamp = closing_price(data, int(q.market[i]), info.outcomes[0])
        if stamp > q.t[i]:
            close[i] = value
    comp = q.comp[idx]
    out = {}
    for ci in np.unique(comp):
        k = idx[comp == ci]
        out[int(ci)] = {
            "closing": metrics.market_information_test(q.o_yes[k], close[k], q.p_yes[k]),
            "opening": metrics.market_information_test(q.o_yes[k], q.m_yes[k], q.p_yes[k]),
        }
    return out


def trade_clv(data: ScopeData, entry_comp: dict) -> list[tuple]:
    """(entry_id, comp, cohort, t, clv_prob, clv_logodds, trade_pk, close) for every BUY with a
    closing line later than the trade (see closing_price); the others have none."""
    out = []
    for entry_id, _d, side, _amount, price, at, market_id, outcome, trade_pk in data.trades:
        if side != Trade.Side.BUY or entry_id not in entry_comp:
            continue
        info = data.markets.get(market_id)
        if info is None or info.status == Market.Status.VOID:
            continue
        c, stamp = closing_price(data, market_id, outcome)
        t = at.timestamp()
        if not stamp > t:
            continue
        q = float(price)
        cohort, ci = entry_comp[entry_id]
        out.append(
            (entry_id, ci, cohort, t, float(metrics.clv_prob([q], [c])[0]),
             float(metrics.clv_logodds([q], [c])[0]), trade_pk, c)
        )  # fmt: skip
    return out


def clv_summary(rows: list[tuple]) -> dict[str, Any]:
    """CLV statistics of one competitor's trades in time order. Without a single closing line
    the label is None (shown as n/a): no closing line says nothing, which is not "no edge"."""
    if not rows:
        return {"n": 0, "label": None, "flag": "no_closing_line"}
    rows = sorted(rows, key=lambda r: (r[3], r[6]))
    prob = np.asarray([r[4] for r in rows])
    lo = np.asarray([r[5] for r in rows])
    z, zp = metrics.clv_mean_ztest(prob)
    sb = metrics.stationary_bootstrap_sharpe(prob)
    return {
        "n": len(rows),
        "mean_prob": float(prob.mean()),
        "mean_logodds": float(lo.mean()),
        "z": z,
        "z_p": zp,
        "sharpe": sb["sharpe"],
        "sharpe_bc": sb["sharpe_bc"],
        "block_length": sb["block_length"],
        "ci90": sb["ci"].get(0.9),
        "ci95": sb["ci"].get(0.95),
        "label": sb["label"],
        "flag": sb["flag"],
    }
