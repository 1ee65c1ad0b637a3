"""Loading: one scope's cohorts, entries, forecasts, markets, trades, money and usage, read from
the database into plain data (numpy arrays, dicts, the ScopeData and MarketInfo dataclasses).

Owns every query the scoring engine makes before it writes: a fixed number of them whatever the
number of forecasts (values_list straight into numpy), each filtered to what existed at `as_of`.
It never scores: the only derivation here is an entry's money when it has no snapshot, marked the
way cohorts.snapshots marks it. Nothing in this module writes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import NamedTuple

import numpy as np
from django.db.models import FloatField, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Cast

from agents.models import Competitor
from cohorts.models import (
    Cohort,
    Decision,
    Entry,
    Forecast,
    LedgerEntry,
    LLMCall,
    Position,
    Settlement,
    Snapshot,
    Trade,
    Universe,
)
from markets.models import Market, PricePoint
from markets.pricing import outcome_price

CENT = Decimal("0.01")


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


class DecisionRow(NamedTuple):
    entry: int
    week: int
    decided_t: float  # when it decided (or was claimed, if it never decided)
    cash_before: float | None


class TradeRow(NamedTuple):
    entry: int
    decision: int | None
    side: str
    amount: Decimal
    price: Decimal
    executed_at: datetime
    market: int
    outcome: str
    pk: int


@dataclass
class ScopeData:
    scope: str
    as_of: datetime
    cohorts: dict[int, dict]
    competitors: list[tuple[int, str, str]]  # (id, slug, display name), index = competitor index
    entries: dict[str, np.ndarray]
    forecasts: dict[str, np.ndarray]
    markets: dict[int, MarketInfo]
    decisions: dict[int, DecisionRow]
    trades: list[TradeRow]  # in execution order
    money: dict[int, EntryMoney]
    settlements: dict[int, list[int]]  # entry id -> [won, lost]
    # entry id -> market id -> P/L of its positions there at as_of (return intervals resample it)
    market_pnl: dict[int, dict[int, float]]
    usage: dict[int, tuple[int, Decimal]]  # entry id -> (tokens, cost)
    prices: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # (cohort, week) -> market id -> outcome -> price shown, for markets with more than two
    # outcomes only (what the outcomes a decision did not state were priced at).
    shown: dict[tuple[int, int], dict[int, dict[str, float]]] = field(default_factory=dict)
    closes: dict[tuple[int, str], tuple[float, float]] = field(default_factory=dict)  # cache
    # (cohort, week) -> market id -> outcome -> price shown, for the week's forecast sample in
    # universe order: the questions the week asked every entry (coverage, the common set).
    samples: dict[tuple[int, int], dict[int, dict[str, float]]] = field(default_factory=dict)

    @property
    def as_of_t(self) -> float:
        return self.as_of.timestamp()


def _load_markets(market_q: Q, as_of: datetime) -> dict[int, MarketInfo]:
    rows = Market.objects.filter(market_q).values_list(
        "pk", "kind", "outcomes", "ordered_outcomes", "status", "resolved_outcome",
        "open_time", "close_time", "closed_time", "resolved_at", "resolution_recorded_at",
        "last_prices",
    )  # fmt: skip
    out = {}
    for pk, kind, outcomes, ordered, status, resolved, *times, last in rows:
        open_, close, closed, res_at, rec_at = times
        known = known_at(rec_at, res_at, as_of)
        status = status_at(status, resolved, known)
        # An unknown resolution has no time either: the run that read before it was recorded
        # saw none (the closing line's anchor, the tournament's end).
        res_at = res_at if known else None
        out[pk] = MarketInfo(
            kind, list(outcomes or []), bool(ordered), status, resolved or "",
            _ts(open_), _ts(close), _closed_at(status, close, closed, res_at, as_of),
            _ts(res_at), last or {},
        )  # fmt: skip
    return out


def known_at(recorded_at: datetime | None, resolved_at: datetime | None, as_of: datetime) -> bool:
    """Whether a market's resolution (or voiding) is known at as_of: the one rule the score
    loader and `arena verify --scores` apply, the loader's reading of "resolved by the score
    time" in the methodology (no constant of its own).

    Known iff the arena had recorded it by as_of (Market.resolution_recorded_at): a run can only
    have read what was recorded, and upstream's own time (resolved_at) may be minutes (the sync
    interval) or, after an outage or a market held for attention, days earlier. Without the
    stamp (exports from before the column, markets never recorded through markets.resolution)
    resolved_at stands in; a final market with neither is taken as known."""
    stamp = recorded_at if recorded_at is not None else resolved_at
    return stamp is None or stamp <= as_of


def status_at(status: str, resolved: str | None, known: bool) -> str:
    """A market's status as known at as_of, from its current row and `known_at`: a resolution
    (or voiding) not known then reads as closed (replays, rescoring, a run that read before it
    was recorded). Also what `arena verify --scores` applies to exported rows."""
    if status == Market.Status.RESOLVED and not (known and resolved):
        return Market.Status.CLOSED
    if status == Market.Status.VOID and not known:
        return Market.Status.CLOSED
    return status


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


def _load_forecasts(
    decision_q: Q, as_of: datetime, decisions: dict[int, DecisionRow]
) -> dict[str, np.ndarray]:
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
    cols: list[tuple] = [()] * 6 if not rows else list(zip(*rows))
    decision = np.asarray(cols[1], dtype=np.int64)
    d_ids = np.asarray(sorted(decisions), dtype=np.int64)
    d_t = np.asarray([decisions[d].decided_t for d in d_ids.tolist()], dtype=float)
    d_week = np.asarray([decisions[d].week for d in d_ids.tolist()], dtype=np.int64)
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


@dataclass(frozen=True)
class EntryMoney:
    """An entry's money at as_of: from its latest snapshot, or computed like one ("computed")."""

    cash: Decimal
    total: Decimal
    realized: Decimal
    unrealized: Decimal
    source: str  # "snapshot" or "computed"


def _load_money(
    entry_qs: QuerySet[Entry],
    entries: list[tuple],
    as_of: datetime,
    markets: dict[int, MarketInfo],
) -> dict[int, EntryMoney]:
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
    money = {e: EntryMoney(c, t, r, u, "snapshot") for e, c, t, r, u in snaps}
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
        money[entry_id] = EntryMoney(
            cash=c,
            total=c + pv,
            realized=realized[entry_id].quantize(CENT),
            unrealized=pv - cost[entry_id],
            source="computed",
        )
    return money


def _load_market_pnl(
    entry_q: Q, as_of: datetime, markets: dict[int, MarketInfo]
) -> dict[int, dict[int, float]]:
    """Per entry and market: realized P/L of the positions closed by as_of, plus realized P/L
    and the mark (as the snapshot job marks) minus cost of those still open then. Summed over
    markets this is the entry's P/L up to rounding and the snapshot's age; the return interval
    keeps that small remainder fixed."""
    out: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    rows = Position.objects.filter(entry_q, opened_at__lte=as_of).values_list(
        "entry_id", "market_id", "outcome", "shares", "cost_basis", "realized_pnl", "status",
        "closed_at",
    )  # fmt: skip
    for entry_id, market_id, outcome, shares, basis, rpnl, status, closed_at in rows:
        open_then = status == Position.Status.OPEN or (closed_at is not None and closed_at > as_of)
        pnl = rpnl
        if open_then and status == Position.Status.OPEN:
            price = _mark_price(markets.get(market_id), outcome)
            pnl += Decimal(0) if price is None else shares * price - basis
        elif open_then:
            # Closed after as_of: what it was worth then, like _load_money (realized as none).
            price = _mark_price(markets.get(market_id), outcome)
            pnl = Decimal(0) if price is None else shares * price - basis
        out[entry_id][market_id] += float(pnl)
    return {e: dict(m) for e, m in out.items()}


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
        pk: {"week_start": ws, "label": label, "initial": ib, "methodology_version": version}
        for pk, ws, label, ib, version in cohort_qs.order_by("week_start", "pk").values_list(
            "pk", "week_start", "label", "initial_balance", "methodology_version"
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
    samples = _load_samples(cohort_qs, as_of)
    sampled = sorted({m for week in samples.values() for m in week})
    market_q = (
        Q(pk__in=Forecast.objects.filter(entry_q).values("market_id"))
        | Q(pk__in=Position.objects.filter(entry_q).values("market_id"))
        | Q(pk__in=sampled)
    )
    markets = _load_markets(market_q, as_of)
    decision_q = entry_q & (
        Q(decided_at__lte=as_of) | Q(decided_at__isnull=True, claimed_at__lte=as_of)
    )
    decisions = {
        pk: DecisionRow(entry_id, week, _ts(decided or claimed), None if cb is None else float(cb))
        for pk, entry_id, week, decided, claimed, cb in Decision.objects.filter(
            decision_q
        ).values_list("pk", "entry_id", "week", "decided_at", "claimed_at", "cash_before")
    }
    forecasts = _load_forecasts(decision_q, as_of, decisions)
    trades = [
        TradeRow(*row)
        for row in Trade.objects.filter(entry_q, executed_at__lte=as_of)
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
    ]
    settled: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
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
        market_pnl=_load_market_pnl(entry_q, as_of, markets),
        usage=_load_usage(decision_q),
        prices=_load_prices(market_q, as_of),
        shown=_load_shown_prices(cohort_qs, forecasts, markets),
        samples=samples,
    )


def _load_samples(cohort_qs, as_of: datetime) -> dict[tuple[int, int], dict[int, dict[str, float]]]:
    """Each week's forecast sample (universes frozen by as_of), in universe order, with the
    prices the universe showed for every outcome of each sampled market. One query."""
    out: dict[tuple[int, int], dict[int, dict[str, float]]] = {}
    rows = (
        Universe.objects.filter(cohort__in=cohort_qs.values("pk"), frozen_at__lte=as_of)
        .order_by("cohort_id", "week")
        .values_list("cohort_id", "week", "markets", "forecast_sample")
    )
    for cohort_id, week, items, sample in rows:
        prices = {
            item.get("market_id"): item.get("prices")
            for item in items or []
            if isinstance(item, dict)
        }
        out[(cohort_id, week)] = {
            int(m): shown_price_map(prices.get(int(m))) for m in sample or [] if str(m).isdigit()
        }
    return out


def _load_shown_prices(cohort_qs, forecasts: dict, markets: dict) -> dict:
    """Prices of every outcome of the multi-outcome markets forecast in the scope, as the frozen
    universes showed them. One query, and none at all for a scope of binary markets only."""
    multi = {
        int(m)
        for m in np.unique(forecasts["market"]).tolist()
        if m in markets and len(markets[m].outcomes) > 2
    }
    if not multi:
        return {}
    shown: dict[tuple[int, int], dict[int, dict[str, float]]] = {}
    rows = Universe.objects.filter(cohort__in=cohort_qs.values("pk")).values_list(
        "cohort_id", "week", "markets"
    )
    for cohort_id, week, items in rows:
        for item in items or []:
            market_id = item.get("market_id")
            if market_id in multi:
                shown.setdefault((cohort_id, week), {})[market_id] = shown_price_map(
                    item.get("prices")
                )
    return shown


def shown_price_map(prices: dict | None) -> dict[str, float]:
    """outcome -> price of a universe item's shown prices, unreadable ones left out (also read
    from the forecasts export's shown_prices by `arena verify --scores`)."""
    out = {}
    for name, price in (prices or {}).items():
        try:
            out[str(name)] = float(price)
        except (TypeError, ValueError):
            continue
    return out


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
