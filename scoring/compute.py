"""Computing: per-competitor scores of one scope's loaded data, as numpy over the whole scope.

Owns the per-forecast items (build_items), the paired market bootstrap, forecast scores (Brier,
log, skill vs the market, calibration, RPS, required n), money per competitor, the edge
statistics of issue 6 (Diebold-Mariano tables, information tests, closing prices and CLV) and
the "YES" view the paper portfolios and the tournament build on. Each helper's docstring gives
its rule; the formulas themselves are in scoring/metrics.py.

Rules a reader should know about (also stored in run.details["notes"], see scoring/present.py):
- Replicates of one competitor are pooled (their forecasts together; money summed; the return
  interval bootstraps over the individual entries' returns).
- Every Forecast row is one binary item "does this outcome happen?" (one-vs-rest for
  multi-outcome markets), o = 1 when the market resolved to that outcome. Void markets and
  unresolved ones are not scored. RPS is reported only for ordered multi-outcome markets, and
  only where one decision stated every outcome.
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


def forecast_scores(items: Items, sel: np.ndarray, n_comp: int) -> dict[str, Any]:
    """Per competitor: counts, Brier, log, skill vs market, BSS, CIs (arrays of n_comp)."""
    comp = items.comp[sel]
    scored = items.scored[sel]
    n_forecasts = np.bincount(comp, minlength=n_comp)
    c, p, o, m = comp[scored], items.p[sel][scored], items.o[sel][scored], items.m[sel][scored]
    market = items.market[sel][scored]
    n_resolved = np.bincount(c, minlength=n_comp)
    brier_l = metrics.brier_loss(p, o) if p.size else np.zeros(0)
    log_l = metrics.log_loss(p, o) if p.size else np.zeros(0)
    has_m = np.isfinite(m)
    m_brier = np.where(has_m, (np.where(has_m, m, 0.0) - o) ** 2, np.nan)
    skill_l = m_brier - brier_l
    with np.errstate(invalid="ignore", divide="ignore"):
        brier = np.bincount(c, weights=brier_l, minlength=n_comp) / n_resolved
        log = np.bincount(c, weights=log_l, minlength=n_comp) / n_resolved
        n_m = np.bincount(c, weights=has_m.astype(float), minlength=n_comp)
        skill = np.bincount(c, weights=np.where(has_m, skill_l, 0.0), minlength=n_comp) / n_m
        bm = np.bincount(c, weights=np.where(has_m, brier_l, 0.0), minlength=n_comp) / n_m
        mm = np.bincount(c, weights=np.where(has_m, m_brier, 0.0), minlength=n_comp) / n_m
        bss_market = 1.0 - bm / mm
    ones = np.ones(c.size)
    (b_lo, b_hi), (s_lo, s_hi) = cluster_bootstrap_ratio_ci(
        c, market, [(brier_l, ones), (skill_l, has_m.astype(float))], n_comp
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
        "bss_half": 1.0 - brier / 0.25,
        "bss_market": bss_market,
        # For the per-competitor extras (calibration, Murphy, required n) below.
        "_c": c,
        "_p": p,
        "_o": o,
        "_skill_l": skill_l,
        "_brier_l": brier_l,
    }


def calibration_extras(s: dict, ci: int) -> dict[str, Any]:
    mask = s["_c"] == ci
    p, o = s["_p"][mask], s["_o"][mask]
    if p.size == 0:
        return {"calibration": [], "murphy": None, "ece": None}
    return {
        "calibration": metrics.calibration(p, o),
        "murphy": metrics.murphy(p, o),
        "ece": metrics.ece(p, o),
        "base_rate": float(o.mean()),
    }


def required_n(s: dict, ci: int) -> float:
    """Resolved forecasts needed to detect a 0.02 Brier edge, from this competitor's data.

    The variance is that of the per-forecast Brier difference vs the market price it saw (the
    paired comparison the headline makes); without prices, that of its Brier losses.
    """
    mask = s["_c"] == ci
    diffs = s["_skill_l"][mask]
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size >= 2 and diffs.var() > 0:
        return metrics.required_n_for_brier_edge(diffs)
    return metrics.required_n_for_brier_edge(s["_brier_l"][mask])


def rps_by_comp(items: Items, sel: np.ndarray, data: ScopeData) -> dict[int, dict]:
    """RPS per competitor over ordered multi-outcome markets where a decision stated every outcome."""
    groups: dict[tuple[int, int, int], dict[str, float]] = defaultdict(dict)
    idx = np.flatnonzero(sel & items.scored & ~items.binary)
    for i in idx:
        info = data.markets[int(items.market[i])]
        if info.ordered:
            key = (int(items.comp[i]), int(items.decision[i]), int(items.market[i]))
            groups[key][items.outcome[i]] = float(items.p[i])
    per_comp: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    for (ci, _d, market_id), probs in groups.items():
        info = data.markets[market_id]
        if set(probs) != set(info.outcomes) or info.resolved_outcome not in info.outcomes:
            continue
        row = np.array([probs[k] for k in info.outcomes])
        if row.sum() <= 0:
            continue
        per_comp[ci][0].append(row / row.sum())  # normalise: stated sets rarely sum to exactly 1
        per_comp[ci][1].append(info.outcomes.index(info.resolved_outcome))
    return {
        ci: {"rps": metrics.rps(np.vstack(P), np.asarray(o)), "n": len(o)}
        for ci, (P, o) in per_comp.items()
    }


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


def closing_price(data: ScopeData, market_id: int, outcome: str) -> float:
    """Closing price of one outcome (sealed rule: last price point strictly before the close),
    de-vigged multiplicatively when the market's closing quotes sum above 1. NaN if unknown."""
    key = (market_id, outcome)
    if key not in data.closes:
        data.closes[key] = _closing_price(data, market_id, outcome)
    return data.closes[key]


def _closing_price(data: ScopeData, market_id: int, outcome: str) -> float:
    info = data.markets.get(market_id)
    if info is None or math.isnan(info.closed_t) or outcome not in info.outcomes:
        return math.nan
    closes = []
    for name in info.outcomes:
        t, p = data.prices.get((market_id, name), (np.zeros(0), np.zeros(0)))
        k = np.searchsorted(t, info.closed_t, side="left") - 1
        closes.append(p[k] if k >= 0 else math.nan)
    closes = np.asarray(closes)
    if len(info.outcomes) == 2:
        # Binary: a missing side is the complement of the quoted one.
        for a, b in ((0, 1), (1, 0)):
            if math.isnan(closes[a]) and not math.isnan(closes[b]):
                closes[a] = 1.0 - closes[b]
    j = info.outcomes.index(outcome)
    if np.all(np.isfinite(closes)) and closes.sum() > 1.0:
        return float(metrics.devig(closes)[j])
    return float(closes[j])


def dm_tables(items: Items, sel: np.ndarray, data: ScopeData, present: list[int]) -> dict:
    """Pairwise Diebold-Mariano on common forecasts, Brier and log loss, Bonferroni levels.

    A "common forecast" is (cohort, week, market, outcome); a competitor's replicates are
    averaged on it. Forecasts are ordered by time so the HAC variance sees the real sequence.
    """
    s = sel & items.scored
    if not s.any() or len(present) < 2:
        return {"brier": [], "log": [], "n_keys": 0}
    keys = np.stack(
        [items.cohort[s], items.week[s], items.market[s], category_codes(items.outcome[s])], axis=1
    )
    uniq, key = np.unique(keys, axis=0, return_inverse=True)
    key = key.reshape(-1)
    n_keys = uniq.shape[0]
    first_t = np.full(n_keys, np.inf)
    np.minimum.at(first_t, key, items.t[s])
    order = np.lexsort((np.arange(n_keys), first_t))
    comp = items.comp[s]
    p, o = items.p[s], items.o[s]
    slugs = {ci: data.competitors[ci][1] for ci in present}
    tables = {}
    for name, loss in (("brier", metrics.brier_loss(p, o)), ("log", metrics.log_loss(p, o))):
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
    """Every forecast seen as a statement about the market's first outcome ("YES").

    For binary markets: p_yes, the shown price m_yes, o_yes and the closing YES price. For
    multi-outcome forecasts the "YES" side is the stated outcome itself (used by the tournament).
    """

    p: np.ndarray
    m: np.ndarray
    o: np.ndarray
    close: np.ndarray


def yes_view(items: Items, data: ScopeData) -> YesView:
    n = items.p.size
    market_ids, inverse = np.unique(items.market, return_inverse=True)
    first = np.empty(market_ids.size, dtype=object)
    o_first = np.full(market_ids.size, np.nan)
    close_first = np.full(market_ids.size, np.nan)
    for k, market_id in enumerate(market_ids.tolist()):
        info = data.markets.get(market_id)
        if info is None or not info.outcomes or info.kind != Market.Kind.BINARY:
            continue
        first[k] = info.outcomes[0]
        if info.status == Market.Status.RESOLVED:
            o_first[k] = 1.0 if info.resolved_outcome == info.outcomes[0] else 0.0
        close_first[k] = closing_price(data, market_id, info.outcomes[0])
    if n == 0:
        empty = np.zeros(0)
        return YesView(empty, empty, empty, empty)
    inverse = inverse.reshape(-1)
    flip = items.binary & (items.outcome != first[inverse])
    return YesView(
        p=np.where(flip, 1.0 - items.p, items.p),
        m=np.where(flip, 1.0 - items.m, items.m),
        o=np.where(items.binary, o_first[inverse], items.o),
        close=np.where(items.binary, close_first[inverse], np.nan),
    )


def information_tests(items: Items, sel: np.ndarray, yes: YesView) -> dict:
    """Market-information test per competitor on its binary forecasts (closing and opening)."""
    idx = np.flatnonzero(sel & items.scored & items.binary)
    comp = items.comp[idx]
    out = {}
    for ci in np.unique(comp):
        k = idx[comp == ci]
        out[int(ci)] = {
            "closing": metrics.market_information_test(yes.o[k], yes.close[k], yes.p[k]),
            "opening": metrics.market_information_test(yes.o[k], yes.m[k], yes.p[k]),
        }
    return out


def trade_clv(data: ScopeData, entry_comp: dict) -> list[tuple]:
    """(entry_id, comp, cohort, t, clv_prob, clv_logodds, trade_pk, close) for every BUY with a
    known close."""
    out = []
    closes: dict[tuple[int, str], float] = {}
    for entry_id, _d, side, _amount, price, at, market_id, outcome, trade_pk in data.trades:
        if side != Trade.Side.BUY or entry_id not in entry_comp:
            continue
        info = data.markets.get(market_id)
        if info is None or info.status == Market.Status.VOID:
            continue
        key = (market_id, outcome)
        if key not in closes:
            closes[key] = closing_price(data, market_id, outcome)
        c = closes[key]
        if math.isnan(c):
            continue
        q = float(price)
        cohort, ci = entry_comp[entry_id]
        out.append(
            (entry_id, ci, cohort, at.timestamp(), float(metrics.clv_prob([q], [c])[0]),
             float(metrics.clv_logodds([q], [c])[0]), trade_pk, c)
        )  # fmt: skip
    return out


def clv_summary(rows: list[tuple]) -> dict[str, Any]:
    if not rows:
        return {"n": 0, "label": C.edge_labels[-1], "flag": "no_trades_with_close"}
    rows = sorted(rows, key=lambda r: r[3])
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
