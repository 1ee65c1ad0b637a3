"""Leaderboard materialisation: read one scope's data in a few queries, score it, store a ScoreRun.

`compute_scores(scope)` is the only entry point. It reads every forecast, trade, position,
settlement, snapshot and price point of the scope's cohorts with a fixed number of queries
(values_list straight into numpy), computes each competitor's row per cohort and across all
cohorts of the scope (cohort=None), and writes them with the run-wide edge statistics.

Choices a reader should know about (also stored in run.details["notes"]):
- Scopes (live / replay / demo) are never mixed: a run reads only cohorts of its own kind.
- Replicates of one competitor are pooled into one row (their forecasts together; money summed;
  the return interval bootstraps over the individual entries' returns).
- Every Forecast row is one binary item "does this outcome happen?" (one-vs-rest for
  multi-outcome markets), o = 1 when the market resolved to that outcome. Void markets and
  unresolved ones are not scored. RPS is reported only for ordered multi-outcome markets, and
  only where one decision stated every outcome.
- Headline and rank: Brier skill vs the market price shown at decision time (brier(market) -
  brier(model), higher is better) whenever the group has resolved forecasts with prices, else
  return %. Skill vs the market is the one number that says whether a forecaster knows more
  than the price it saw; the raw Brier mostly measures how easy the questions were.
- Edge statistics (issue 6): Diebold-Mariano on common forecasts (cohort, week, market,
  outcome); information tests on binary forecasts; CLV on BUY trades of closed markets;
  champion's clothes funds the largest Kelly stakes first within the real 25% budget; the
  tournament's questions are (cohort, market). Each helper's docstring gives its rule.
- Performance: per-competitor work is numpy over the whole scope (bincount, one counts matrix
  for the paired bootstrap, a vectorised tournament); Python loops run over markets, decisions
  and competitors, never over forecasts one query at a time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import FloatField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Cast
from django.utils import timezone

from agents.models import Competitor, Decision, Forecast, LLMCall
from cohorts.models import Cohort, Entry, LedgerEntry, Position, Settlement, Snapshot, Trade
from core.methodology import CONSTANTS as C
from core.methodology import METHODOLOGY_HASH, METHODOLOGY_VERSION
from core.methodology import seed as methodology_seed
from core.versions import scores_changed
from markets.models import Market, PricePoint
from markets.pricing import outcome_price
from scoring import metrics
from scoring.models import LeaderboardRow, ScoreRun, TradeCLV

ENGINE_VERSION = "1.0"
ALL = "all"  # group key of the rows across every cohort of the scope
CENT = Decimal("0.01")
HEADLINE_RULE = (
    "Rank by Brier skill vs the market price at decision time (brier(market) - brier(model), "
    "higher is better) when the group has resolved forecasts with prices; otherwise by return %. "
    "Competitors without the headline number rank last, ordered by return %."
)
NOTES = [
    "Replicates of a competitor are pooled into one row; return_ci bootstraps over its entries.",
    "Multi-outcome markets: each stated outcome is a one-vs-rest binary item for Brier and log.",
    "Forecasts on void or unresolved markets are counted in n_forecasts but never scored.",
    "Brier CIs: percentile bootstrap resampling markets, the same draws for every competitor.",
    "Diebold-Mariano: common forecasts are (cohort, week, market, outcome), replicates averaged.",
    "CLV: BUY trades on closed, non-void markets; close = last price point strictly before it.",
    "Champion's clothes: kelly_stake sides and fractions; the largest stakes are funded first "
    "within 25% of the paper cash per decision, bets under min_bet skipped.",
    "Tournament: questions are (cohort, market), the market price history as the community.",
    "Money: the latest snapshot at or before as_of, else ledger cash plus positions at last prices.",
]


# ---------------------------------------------------------------------------------------------
# Loading (a fixed number of queries, whatever the number of forecasts)
# ---------------------------------------------------------------------------------------------


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value is not None else math.nan


@dataclass
class MarketInfo:
    kind: str
    outcomes: list[str]
    ordered: bool
    status: str  # "resolved" only when resolved by as_of with a known outcome
    resolved_outcome: str
    open_t: float
    close_t: float  # scheduled end
    closed_t: float  # when trading closed (close for CLV), NaN while open
    resolved_t: float
    last_prices: dict


@dataclass
class ScopeData:
    scope: str
    as_of: datetime
    cohorts: dict[int, dict]
    competitors: list[tuple[int, str, str]]  # (id, slug, display name), index = competitor index
    entries: dict[str, np.ndarray]
    forecasts: dict[str, np.ndarray]
    markets: dict[int, MarketInfo]
    decisions: dict[int, tuple]  # id -> (entry_id, week, decided_t, cash_before float or None)
    trades: list[tuple]
    money: dict[int, dict]  # entry id -> cash, total, realized, unrealized, source
    settlements: dict[int, list[int]]  # entry id -> [won, lost]
    usage: dict[int, tuple[int, Decimal]]  # entry id -> (tokens, cost)
    prices: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    closes: dict[tuple[int, str], float] = field(default_factory=dict)  # closing_price cache


def _load_markets(market_q: Q, as_of: datetime) -> dict[int, MarketInfo]:
    rows = Market.objects.filter(market_q).values_list(
        "pk", "kind", "outcomes", "ordered_outcomes", "status", "resolved_outcome",
        "open_time", "close_time", "closed_time", "resolved_at", "last_prices",
    )  # fmt: skip
    out = {}
    for pk, kind, outcomes, ordered, status, resolved, open_, close, closed, res_at, last in rows:
        # A resolution recorded after as_of is not known yet at as_of (replays, rescoring).
        known = res_at is None or res_at <= as_of
        if status == Market.Status.RESOLVED and not (known and resolved):
            status = Market.Status.CLOSED
        if status == Market.Status.VOID and not known:
            status = Market.Status.CLOSED
        out[pk] = MarketInfo(
            kind, list(outcomes or []), bool(ordered), status, resolved or "",
            _ts(open_), _ts(close), _closed_at(status, close, closed, res_at, as_of),
            _ts(res_at), last or {},
        )  # fmt: skip
    return out


def _closed_at(status: str, close, closed, resolved_at, as_of: datetime) -> float:
    """When trading stopped (epoch seconds), NaN if it was still trading at as_of. Without a
    recorded closed_time, a closed market is taken to have stopped at its scheduled end, else
    at its resolution."""
    if closed is not None:
        return _ts(closed) if closed <= as_of else math.nan
    if status == Market.Status.OPEN:
        return math.nan
    for candidate in (close, resolved_at):
        if candidate is not None and candidate <= as_of:
            return _ts(candidate)
    return math.nan


def _load_forecasts(decision_q: Q, as_of: datetime, decisions: dict) -> dict[str, np.ndarray]:
    """The scope's forecasts as arrays. Time and week come from the decision (a forecast is
    stated at its decision's time), which spares parsing 100,000 timestamps."""
    rows = list(
        Forecast.objects.filter(
            decision__in=Decision.objects.filter(decision_q).values("pk"), created_at__lte=as_of
        )
        .order_by("decision_id", "pk")
        .values_list(
            "entry_id", "decision_id", "market_id", "outcome", "probability", "market_price"
        )
    )
    cols = [[] for _ in range(6)] if not rows else list(zip(*rows))
    decision = np.asarray(cols[1], dtype=np.int64)
    d_ids = np.asarray(sorted(decisions), dtype=np.int64)
    d_t = np.asarray([decisions[d][2] for d in d_ids.tolist()], dtype=float)
    d_week = np.asarray([decisions[d][1] for d in d_ids.tolist()], dtype=np.int64)
    pos = np.searchsorted(d_ids, decision) if d_ids.size else np.zeros(0, dtype=np.int64)
    return {
        "entry": np.asarray(cols[0], dtype=np.int64),
        "decision": decision,
        "week": d_week[pos] if decision.size else np.zeros(0, dtype=np.int64),
        "market": np.asarray(cols[2], dtype=np.int64),
        "outcome": np.asarray(cols[3], dtype=object),
        "p": np.asarray(cols[4], dtype=float),
        "m": np.asarray([math.nan if v is None else v for v in cols[5]], dtype=float),
        "t": d_t[pos] if decision.size else np.zeros(0),
    }


def _load_money(entry_qs, entries: list[tuple], as_of: datetime, markets) -> dict[int, dict]:
    """Per entry: the latest snapshot at or before as_of, else cash + open positions at last prices.

    Without a snapshot, cash is the ledger sum up to as_of (the ledger is the truth; Entry.cash
    is only its current total) and open positions are marked like the snapshot job marks them.
    """
    # One index lookup per entry (unique (entry, ts)), not one per snapshot row.
    latest = Snapshot.objects.filter(entry=OuterRef("pk"), ts__lte=as_of).order_by("-ts")
    latest_ids = entry_qs.annotate(snap=Subquery(latest.values("pk")[:1]))
    snaps = Snapshot.objects.filter(pk__in=latest_ids.values("snap")).values_list(
        "entry_id", "cash", "total", "realized_pnl", "unrealized_pnl"
    )
    money = {
        e: {"cash": c, "total": t, "realized": r, "unrealized": u, "source": "snapshot"}
        for e, c, t, r, u in snaps
    }
    missing = [e[0] for e in entries if e[0] not in money]
    if not missing:
        return money
    cash = dict(
        LedgerEntry.objects.filter(entry_id__in=missing, created_at__lte=as_of)
        .values("entry_id")
        .annotate(total=Sum("amount"))
        .values_list("entry_id", "total")
    )
    positions = Position.objects.filter(entry_id__in=missing, opened_at__lte=as_of).values_list(
        "entry_id", "market_id", "outcome", "shares", "cost_basis", "realized_pnl", "status",
        "closed_at",
    )  # fmt: skip
    value: dict[int, Decimal] = defaultdict(Decimal)
    cost: dict[int, Decimal] = defaultdict(Decimal)
    realized: dict[int, Decimal] = defaultdict(Decimal)
    for entry_id, market_id, outcome, shares, basis, rpnl, status, closed_at in positions:
        # A position closed after as_of was still open then (settlement keeps shares and cost
        # basis; its realized P/L then is approximated as none).
        open_then = status == Position.Status.OPEN or (closed_at is not None and closed_at > as_of)
        if not open_then:
            realized[entry_id] += rpnl
            continue
        price = _mark_price(markets.get(market_id), outcome)
        value[entry_id] += basis if price is None else shares * price
        cost[entry_id] += basis
    for entry_id, _cohort, _comp, _initial, entry_cash in entries:
        if entry_id in money:
            continue
        c = cash.get(entry_id, entry_cash)
        pv = value[entry_id].quantize(CENT, rounding=ROUND_HALF_EVEN)
        money[entry_id] = {
            "cash": c,
            "total": c + pv,
            "realized": realized[entry_id].quantize(CENT),
            "unrealized": pv - cost[entry_id],
            "source": "computed",
        }
    return money


def _mark_price(info: MarketInfo | None, outcome: str) -> Decimal | None:
    # Same marking as cohorts.snapshots: resolved pays 1/0, void is held at cost, else last price.
    if info is None or info.status == Market.Status.VOID:
        return None
    if info.status == Market.Status.RESOLVED and info.resolved_outcome in info.outcomes:
        return Decimal(1) if outcome == info.resolved_outcome else Decimal(0)
    return outcome_price(info.last_prices, info.outcomes, outcome)


def _load_prices(market_q: Q, as_of: datetime):
    """Price history per (market, outcome) up to as_of, as float arrays (for CLV closes and the
    tournament's carried-forward market)."""
    rows = (
        PricePoint.objects.filter(market__in=Market.objects.filter(market_q).values("pk"))
        .filter(ts__lte=as_of)
        .annotate(p=Cast("price", FloatField()))
        .order_by("market_id", "outcome", "ts")
        .values_list("market_id", "outcome", "ts", "p")
    )
    series: dict[tuple[int, str], tuple[list, list]] = {}
    for market_id, outcome, ts, price in rows:
        t, p = series.setdefault((market_id, outcome), ([], []))
        t.append(ts.timestamp())
        p.append(price)
    return {k: (np.asarray(t), np.asarray(p)) for k, (t, p) in series.items()}


def load_scope(scope: str, as_of: datetime) -> ScopeData:
    """Everything compute_scores needs for one scope, in a fixed number of queries.

    Time filters use the clock fields the services set from their `at` argument (week_start,
    created_at of forecasts, executed_at, decided_at, ts), so a replay scored as of a simulated
    time sees what existed then.
    """
    cohort_qs = Cohort.objects.filter(kind=scope, week_start__lte=as_of)
    cohorts = {
        pk: {"week_start": ws, "label": label, "initial": ib}
        for pk, ws, label, ib in cohort_qs.order_by("week_start").values_list(
            "pk", "week_start", "label", "initial_balance"
        )
    }
    entry_qs = Entry.objects.filter(cohort__in=cohort_qs.values("pk"))
    entry_q = Q(entry__in=entry_qs.values("pk"))
    entries = list(
        entry_qs.order_by("pk").values_list(
            "pk", "cohort_id", "competitor_id", "initial_balance", "cash"
        )
    )
    competitors = list(
        Competitor.objects.filter(pk__in=entry_qs.values("competitor_id"))
        .order_by("pk")
        .values_list("pk", "slug", "display_name")
    )
    comp_index = {c[0]: i for i, c in enumerate(competitors)}
    entry_arrays = {
        "id": np.asarray([e[0] for e in entries], dtype=np.int64),
        "cohort": np.asarray([e[1] for e in entries], dtype=np.int64),
        "comp": np.asarray([comp_index[e[2]] for e in entries], dtype=np.int64),
        "initial": np.asarray([float(e[3]) for e in entries], dtype=float),
    }
    market_q = Q(pk__in=Forecast.objects.filter(entry_q).values("market_id")) | Q(
        pk__in=Position.objects.filter(entry_q).values("market_id")
    )
    markets = _load_markets(market_q, as_of)
    decision_q = entry_q & (
        Q(decided_at__lte=as_of) | Q(decided_at__isnull=True, claimed_at__lte=as_of)
    )
    decisions = {
        pk: (entry_id, week, _ts(decided or claimed), None if cb is None else float(cb))
        for pk, entry_id, week, decided, claimed, cb in Decision.objects.filter(
            decision_q
        ).values_list("pk", "entry_id", "week", "decided_at", "claimed_at", "cash_before")
    }
    forecasts = _load_forecasts(decision_q, as_of, decisions)
    trades = list(
        Trade.objects.filter(entry_q, executed_at__lte=as_of)
        .order_by("executed_at", "pk")
        .values_list(
            "entry_id",
            "decision_id",
            "side",
            "amount",
            "price",
            "executed_at",
            "position__market_id",
            "position__outcome",
            "pk",
        )  # fmt: skip
    )
    settled = defaultdict(lambda: [0, 0])
    for entry_id, kind in Settlement.objects.filter(
        Q(position__in=Position.objects.filter(entry_q).values("pk")),
        Q(settled_at__lte=as_of),
        Q(reversed_at__isnull=True) | Q(reversed_at__gt=as_of),
    ).values_list("position__entry_id", "kind"):
        if kind == Settlement.Kind.WON:
            settled[entry_id][0] += 1
        elif kind == Settlement.Kind.LOST:
            settled[entry_id][1] += 1
    return ScopeData(
        scope=scope,
        as_of=as_of,
        cohorts=cohorts,
        competitors=competitors,
        entries=entry_arrays,
        forecasts=forecasts,
        markets=markets,
        decisions=decisions,
        trades=trades,
        money=_load_money(entry_qs, entries, as_of, markets),
        settlements=dict(settled),
        usage=_load_usage(decision_q),
        prices=_load_prices(market_q, as_of),
    )


def _load_usage(decisions: Q) -> dict[int, tuple[int, Decimal]]:
    """Tokens and dollars per entry: the decision totals, or the sum of its LLM calls when the
    decision row has none (a decision that crashed before adding its calls up)."""
    per_decision = Decision.objects.filter(decisions).values_list(
        "pk", "entry_id", "tokens_in", "tokens_out", "cost_usd"
    )
    calls = {
        d: (int(pt or 0) + int(ct or 0), c or Decimal(0))
        for d, pt, ct, c in LLMCall.objects.filter(
            decision__in=Decision.objects.filter(decisions).values("pk")
        )
        .values("decision_id")
        .annotate(pt=Sum("prompt_tokens"), ct=Sum("completion_tokens"), c=Sum("cost_usd"))
        .values_list("decision_id", "pt", "ct", "c")
    }
    usage: dict[int, list] = defaultdict(lambda: [0, Decimal(0)])
    for pk, entry_id, t_in, t_out, cost in per_decision:
        tokens, dollars = t_in + t_out, cost or Decimal(0)
        if tokens == 0 and not dollars and pk in calls:
            tokens, dollars = calls[pk]
        usage[entry_id][0] += tokens
        usage[entry_id][1] += dollars
    return {k: (v[0], v[1]) for k, v in usage.items()}


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
# Row computation
# ---------------------------------------------------------------------------------------------


def _f(x: Any) -> float | None:
    """A JSON-safe float: None for NaN/inf/None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def json_safe(value: Any) -> Any:
    """Recursively turn numpy scalars/arrays into Python, NaN/inf into None, keys into str."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _f(value)
    if isinstance(value, Decimal):
        return _f(value)
    return value


def _forecast_scores(items: Items, sel: np.ndarray, n_comp: int) -> dict[str, Any]:
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


def _calibration_extras(s: dict, ci: int) -> dict[str, Any]:
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


def _required_n(s: dict, ci: int) -> float:
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


def _rps_by_comp(items: Items, sel: np.ndarray, data: ScopeData) -> dict[int, dict]:
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


def _money_by_comp(data: ScopeData, entry_sel: np.ndarray, n_comp: int) -> dict[str, Any]:
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


def _implied_confidence(data: ScopeData, cohort_ids: set[int], entry_comp: dict) -> dict:
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


def _dm_tables(items: Items, sel: np.ndarray, data: ScopeData, present: list[int]) -> dict:
    """Pairwise Diebold-Mariano on common forecasts, Brier and log loss, Bonferroni levels.

    A "common forecast" is (cohort, week, market, outcome); a competitor's replicates are
    averaged on it. Forecasts are ordered by time so the HAC variance sees the real sequence.
    """
    s = sel & items.scored
    if not s.any() or len(present) < 2:
        return {"brier": [], "log": [], "n_keys": 0}
    keys = np.stack(
        [items.cohort[s], items.week[s], items.market[s], _codes(items.outcome[s])], axis=1
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


def _codes(values: np.ndarray) -> np.ndarray:
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


def _information_tests(items: Items, sel: np.ndarray, yes: YesView) -> dict:
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


def _trade_clv(data: ScopeData, entry_comp: dict) -> list[tuple]:
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


def _clv_summary(rows: list[tuple]) -> dict[str, Any]:
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


@dataclass
class PaperCandidates:
    """What the standard trading layer may bet: one row per binary market (as its first outcome)
    and per stated outcome of a multi-outcome market, per decision, with kelly_stake's verdict."""

    entry: np.ndarray
    decision: np.ndarray
    t: np.ndarray
    market: np.ndarray
    outcome: np.ndarray  # the outcome bought if the side is YES
    kelly: np.ndarray  # full-Kelly fraction of the side kelly_stake chose (0: no bet)
    side_no: np.ndarray
    price: np.ndarray  # price of the side bought


def paper_candidates(items: Items, yes: YesView, data: ScopeData) -> PaperCandidates:
    first = np.asarray(
        [(data.markets[m].outcomes or [""])[0] if m in data.markets else "" for m in items.market.tolist()],
        dtype=object,
    ) if items.p.size else np.zeros(0, dtype=object)  # fmt: skip
    void = np.asarray(
        [data.markets.get(m) is None or data.markets[m].status == Market.Status.VOID
         for m in items.market.tolist()], dtype=bool,
    )  # fmt: skip
    p = np.where(items.binary, yes.p, items.p)
    m = np.where(items.binary, yes.m, items.m)
    outcome = np.where(items.binary, first, items.outcome)
    # Below the smaller edge threshold no side can be bet: skip those before kelly_stake.
    reach = np.abs(p - m) >= min(C.edge_threshold_binary, C.edge_threshold_multi) - 1e-9
    ok = np.flatnonzero(np.isfinite(m) & ~void & reach)
    # First statement per (decision, market, outcome): a binary market stated twice (Yes and
    # No) is one candidate.
    keys = np.stack([items.decision[ok], items.market[ok], _codes(outcome[ok])], axis=1)
    if ok.size:
        _, first_pos = np.unique(keys, axis=0, return_index=True)
        ok = ok[np.sort(first_pos)]
    # Side, edge threshold and Kelly fraction do not depend on the cash, so one call decides
    # every candidate; cash 0 leaves the stakes to _within_budget (kelly_stake's proportional
    # scale-down would push a long list of small edges under min_bet).
    bets = metrics.kelly_stake(p[ok], m[ok], 0, multi=~items.binary[ok])
    eligible = np.asarray([b.reason in ("bet", "below_min_bet") for b in bets], dtype=bool)
    return PaperCandidates(
        entry=items.entry[ok], decision=items.decision[ok], t=items.t[ok], market=items.market[ok],
        outcome=outcome[ok],
        kelly=np.where(eligible, np.asarray([b.kelly for b in bets], dtype=float), 0.0),
        side_no=np.asarray([b.side == "NO" for b in bets], dtype=bool),
        price=np.asarray([b.price for b in bets], dtype=float),
    )  # fmt: skip


def _paper_portfolios(cands: PaperCandidates, data: ScopeData) -> dict[int, dict]:
    """Champion's clothes: every entry's stated probabilities through the standard trading layer.

    Per entry, decisions in time order; paper cash starts at the entry's initial balance, pays
    out when a market resolves before the next decision (void refunds the stake), and a
    decision's bets together stay within max_bet_fraction of the cash before it (the real
    execution rule, see _within_budget) and above min_bet. Returns per entry: pnl (resolved at
    1/0, open marked at the last price), n_bets, and the paper bets' CLV rows.
    """
    initial = dict(zip(data.entries["id"].tolist(), data.entries["initial"].tolist()))
    order = np.lexsort((np.arange(cands.t.size), cands.t, cands.entry))
    entry, decision = cands.entry[order], cands.decision[order]
    cut = np.flatnonzero(np.r_[True, (entry[1:] != entry[:-1]) | (decision[1:] != decision[:-1])])
    blocks = np.split(order, cut[1:]) if order.size else []
    per_entry: dict[int, list[np.ndarray]] = defaultdict(list)
    for block in blocks:
        per_entry[int(cands.entry[block[0]])].append(block)
    return {
        entry_id: _paper_entry(cands, data, initial.get(entry_id, 0.0), decision_blocks)
        for entry_id, decision_blocks in per_entry.items()
    }


def _paper_entry(cands: PaperCandidates, data, initial: float, blocks: list[np.ndarray]) -> dict:
    cash = initial
    open_bets: list[dict] = []
    done: list[dict] = []
    cap_share, min_bet = C.max_bet_fraction, float(C.min_bet)
    for idx in blocks:  # one block per decision, in time order
        t = float(cands.t[idx[0]])
        cash, open_bets = _paper_settle(cash, open_bets, done, t)
        if cash <= 0:
            continue
        wanted = np.minimum(C.kelly_fraction * cands.kelly[idx], cap_share) * cash
        amounts = _within_budget(wanted, cap_share * cash, min_bet)
        for i, amount in zip(idx[amounts > 0], amounts[amounts > 0]):
            info = data.markets[int(cands.market[i])]
            outcome = cands.outcome[i]
            if cands.side_no[i]:
                outcome = next(o for o in info.outcomes if o != outcome)
            cash -= amount
            open_bets.append(
                {"market": int(cands.market[i]), "outcome": outcome, "stake": float(amount),
                 "shares": amount / cands.price[i], "price": float(cands.price[i]), "t": t,
                 "info": info}
            )  # fmt: skip
    cash, open_bets = _paper_settle(cash, open_bets, done, math.inf)
    value = cash
    for bet in open_bets:  # still open at as_of: mark at the last price, like the snapshots
        price = outcome_price(bet["info"].last_prices, bet["info"].outcomes, bet["outcome"])
        value += bet["stake"] if price is None else bet["shares"] * float(price)
    clv = []
    for bet in done + open_bets:
        c = closing_price(data, bet["market"], bet["outcome"])
        if math.isfinite(c):
            clv.append((bet["t"], float(metrics.clv_prob([bet["price"]], [c])[0])))
    return {"pnl": value - initial, "n_bets": len(done) + len(open_bets), "clv": clv}


def _within_budget(stakes: np.ndarray, budget: float, min_bet: float) -> np.ndarray:
    """Fit one decision's stakes (dollars, floored to cents) into the real execution budget
    (25% of the cash before it).

    Largest stakes (largest Kelly edge) are funded first; the one that meets the end of the
    budget gets the remainder if that is still a legal bet; the rest are skipped. Shrinking
    every stake in proportion instead would push a long list of small edges under min_bet.
    """
    order = np.argsort(-stakes, kind="stable")
    wanted = np.floor(stakes[order] * 100) / 100
    remaining = budget - np.r_[0.0, np.cumsum(wanted)[:-1]]
    amount = np.floor(np.minimum(wanted, np.maximum(remaining, 0.0)) * 100) / 100
    amount[amount < min_bet] = 0.0
    out = np.zeros(stakes.size)
    out[order] = amount
    return out


def _paper_settle(cash: float, open_bets: list, done: list, t: float):
    still = []
    for bet in open_bets:
        info = bet["info"]
        if info.status in (Market.Status.RESOLVED, Market.Status.VOID) and (
            math.isnan(info.resolved_t) or info.resolved_t <= t
        ):
            if info.status == Market.Status.VOID:
                cash += bet["stake"]
            elif bet["outcome"] == info.resolved_outcome:
                cash += bet["shares"]
            done.append(bet)
        else:
            still.append(bet)
    return cash, still


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


def _tournament(tp: TournamentPairs, cohort_ids: set[int], data: ScopeData, present) -> dict:
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


# ---------------------------------------------------------------------------------------------
# Assembling rows
# ---------------------------------------------------------------------------------------------


def _group_rows(
    data: ScopeData, items: Items, group: int | str, shared: dict
) -> tuple[list[LeaderboardRow], dict]:
    """Unsaved rows (one per competitor with an entry in the group) and the group's tables."""
    n_comp = len(data.competitors)
    cohort_ids = set(data.cohorts) if group == ALL else {group}
    f_sel = np.isin(items.cohort, list(cohort_ids))
    e_sel = np.isin(data.entries["cohort"], list(cohort_ids))
    present = sorted(set(data.entries["comp"][e_sel].tolist()))
    s = _forecast_scores(items, f_sel, n_comp)
    money = _money_by_comp(data, e_sel, n_comp)
    rps = _rps_by_comp(items, f_sel, data)
    implied = _implied_confidence(data, cohort_ids, shared["entry_comp"])
    info_tests = _information_tests(items, f_sel, shared["yes"])
    clv_rows = [r for r in shared["clv"] if r[2] in cohort_ids]
    paper = shared["paper"]
    rows = []
    for ci in present:
        rows.append(
            _make_row(data, group, ci, s, money, rps, implied, info_tests, clv_rows, paper, e_sel)
        )
    headline = _rank(rows)
    tables = {
        "dm": _dm_tables(items, f_sel, data, [ci for ci in present if s["n_resolved"][ci] > 0]),
        "tournament": _tournament(shared["tournament"], cohort_ids, data, present),
        "headline": headline,
    }
    take = {r["competitor"]: r for r in tables["tournament"]["rows"]}
    for row in rows:
        row.details["tournament"] = take.get(row.details["slug"])
    return rows, tables


def _make_row(data, group, ci, s, money, rps, implied, info_tests, clv_rows, paper, e_sel):
    n_res = int(s["n_resolved"][ci])
    required = _required_n(s, ci) if n_res else math.inf
    initial = money["initial"][ci]
    pnl = money["pnl"][ci]
    returns = [r for r in money["returns"][ci] if math.isfinite(r)]
    return_ci = metrics.bootstrap_ci(np.asarray(returns)) if len(returns) >= 2 else (None, None)
    won, lost = money["won"][ci], money["lost"][ci]
    cost = money["cost"][ci]
    ic = implied.get(ci)
    comp_entries = set(data.entries["id"][e_sel & (data.entries["comp"] == ci)].tolist())
    paper_pnl = sum(paper[e]["pnl"] for e in comp_entries if e in paper)
    paper_clv = sorted(c for e in comp_entries if e in paper for c in paper[e]["clv"])
    clv = _clv_summary([r for r in clv_rows if r[1] == ci])
    details = {
        "slug": data.competitors[ci][1],
        "display_name": data.competitors[ci][2],
        "entries": int(money["entries"][ci]),
        "n_with_price": int(s["n_with_price"][ci]),
        "bss_vs_market": s["bss_market"][ci],
        "brier_convention": "binary one-vs-rest per stated outcome, range 0..1",
        "rps": rps.get(ci),
        **_calibration_extras(s, ci),
        "money_source": sorted(money["sources"][ci]),
        "settled_won": int(won),
        "settled_lost": int(lost),
        "implied_confidence_n": ic[1] if ic else 0,
        "information_test": info_tests.get(ci),
        "clv": clv,
        "edge_label": clv["label"],
        "champions_clothes": {
            "paper_pnl": paper_pnl,
            "paper_return_pct": 100.0 * paper_pnl / initial if initial else None,
            "paper_bets": sum(paper[e]["n_bets"] for e in comp_entries if e in paper),
            "paper_clv_mean": float(np.mean([c[1] for c in paper_clv])) if paper_clv else None,
            "real_pnl": pnl,
            "real_clv_mean": clv.get("mean_prob"),
        },
    }
    return LeaderboardRow(
        cohort_id=None if group == ALL else group,
        competitor_id=data.competitors[ci][0],
        n_forecasts=int(s["n_forecasts"][ci]),
        n_resolved=n_res,
        brier=_f(s["brier"][ci]),
        brier_lo=_f(s["brier_ci"][0][ci]),
        brier_hi=_f(s["brier_ci"][1][ci]),
        log_score=_f(s["log"][ci]),
        skill_vs_market=_f(s["skill"][ci]),
        skill_lo=_f(s["skill_ci"][0][ci]),
        skill_hi=_f(s["skill_ci"][1][ci]),
        bss_vs_half=_f(s["bss_half"][ci]),
        return_pct=_f(100.0 * float(pnl) / initial) if initial else None,
        return_lo=_f(return_ci[0]),
        return_hi=_f(return_ci[1]),
        pnl=pnl.quantize(CENT),
        realized_pnl=money["realized"][ci].quantize(CENT),
        unrealized_pnl=money["unrealized"][ci].quantize(CENT),
        win_rate=_f(won / (won + lost)) if won + lost else None,
        implied_confidence_brier=_f(ic[0]) if ic else None,
        tokens=int(money["tokens"][ci]),
        cost_usd=cost.quantize(Decimal("0.0001")),
        cost_per_resolved=_f(float(cost) / n_res) if n_res else None,
        provisional=not (n_res >= required),
        required_n=int(required) if math.isfinite(required) else None,
        details=json_safe(details),
    )


def _rank(rows: list[LeaderboardRow]) -> str:
    """Assign ranks in place by the headline metric (see HEADLINE_RULE); returns its name."""
    use_skill = any(r.skill_vs_market is not None for r in rows)
    headline = "brier_skill_vs_market" if use_skill else "return_pct"

    def key(r: LeaderboardRow):
        primary = r.skill_vs_market if use_skill else r.return_pct
        ret = r.return_pct if r.return_pct is not None else -math.inf
        return (primary is None, -(primary or 0.0), -ret, r.competitor_id)

    for rank, row in enumerate(sorted(rows, key=key), start=1):
        row.rank = rank
    return headline


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def compute_scores(scope: str = "live", as_of: datetime | None = None) -> ScoreRun:
    """Score one scope (live / replay / demo) as of a time and store it as a DONE ScoreRun.

    The run row is created first (RUNNING) so a crash leaves a FAILED run with the error, which
    selectors never serve. Two concurrent runs just produce two runs; the latest finished wins.
    """
    if scope not in ScoreRun.Scope.values:
        raise ValueError(f"unknown scope {scope!r}; expected one of {ScoreRun.Scope.values}")
    as_of = as_of or timezone.now()
    run = ScoreRun.objects.create(
        scope=scope,
        as_of=as_of,
        started_at=timezone.now(),
        methodology_version=METHODOLOGY_VERSION,
        methodology_hash=METHODOLOGY_HASH,
        engine_version=ENGINE_VERSION,
    )
    try:
        rows, details, n_forecasts, n_resolved, clv = _score(scope, as_of)
        with transaction.atomic():
            store_trade_clv(clv)
            for row in rows:
                row.run = run
            LeaderboardRow.objects.bulk_create(rows, batch_size=500)
            ScoreRun.objects.filter(pk=run.pk).update(
                status=ScoreRun.Status.DONE,
                finished_at=timezone.now(),
                n_forecasts=n_forecasts,
                n_resolved=n_resolved,
                details=json_safe(details),
            )
            scores_changed()  # a new leaderboard: every cached page is stale
    except Exception as exc:
        ScoreRun.objects.filter(pk=run.pk).update(
            status=ScoreRun.Status.FAILED,
            finished_at=timezone.now(),
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    run.refresh_from_db()
    return run


def store_trade_clv(clv_rows: list[tuple]) -> int:
    """Keep each BUY's closing-line value on record (probability and log-odds forms, with the
    closing price used), so a trade's CLV can be audited and exported, not only averaged."""
    objs = [
        TradeCLV(trade_id=r[6], close_price=r[7], clv_prob=r[4], clv_logodds=r[5]) for r in clv_rows
    ]
    TradeCLV.objects.bulk_create(
        objs,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["trade"],
        update_fields=["close_price", "clv_prob", "clv_logodds", "computed_at"],
    )
    return len(objs)


def _score(scope: str, as_of: datetime) -> tuple[list[LeaderboardRow], dict, int, int, list]:
    data = load_scope(scope, as_of)
    items = build_items(data)
    entry_comp = dict(
        zip(
            data.entries["id"].tolist(),
            zip(data.entries["cohort"].tolist(), data.entries["comp"].tolist()),
        )
    )
    yes = yes_view(items, data)
    # Computed once for the scope, then sliced per cohort group.
    shared = {
        "entry_comp": entry_comp,
        "yes": yes,
        "clv": _trade_clv(data, entry_comp),
        "paper": _paper_portfolios(paper_candidates(items, yes, data), data),
        "tournament": tournament_pairs(items, yes, data),
    }
    rows: list[LeaderboardRow] = []
    details: dict[str, Any] = {
        "headline": {"rule": HEADLINE_RULE, "by_cohort": {}},
        "notes": NOTES,
        "dm": {},
        "tournament": {},
        "cohorts": [
            {"id": pk, "week_start": c["week_start"].isoformat(), "label": c["label"]}
            for pk, c in data.cohorts.items()
        ],
    }
    groups: list[int | str] = [*data.cohorts, ALL] if data.cohorts else []
    for group in groups:
        group_rows, tables = _group_rows(data, items, group, shared)
        rows.extend(group_rows)
        details["headline"]["by_cohort"][str(group)] = tables["headline"]
        details["dm"][str(group)] = tables["dm"]
        details["tournament"][str(group)] = tables["tournament"]
    return rows, details, int(items.p.size), int(items.scored.sum()), shared["clv"]


def prune_runs(keep: int = 48, at: datetime | None = None) -> int:
    """Delete all but the latest `keep` finished runs per scope, and failed runs older than two
    days (kept that long so staff can read their errors). Pages only ever read the latest run."""
    at = at or timezone.now()
    deleted = 0
    for scope in ScoreRun.Scope.values:
        done = ScoreRun.objects.filter(scope=scope, status=ScoreRun.Status.DONE)
        keep_ids = list(done.order_by("-finished_at", "-pk").values_list("pk", flat=True)[:keep])
        deleted += done.exclude(pk__in=keep_ids).delete()[1].get("scoring.ScoreRun", 0)
    stale_failed = ScoreRun.objects.filter(
        status=ScoreRun.Status.FAILED, started_at__lt=at - timedelta(days=2)
    )
    deleted += stale_failed.delete()[1].get("scoring.ScoreRun", 0)
    return deleted
