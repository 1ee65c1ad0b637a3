"""Read queries for the public pages and the JSON API: scopes, score runs, cohorts and
entries, competitors, markets, decisions. Charts as pages serve them are in
web/chart_reads.py, each list page's leaders and headline figures in web/leaders.py, the
sealed records in web/seal_reads.py.

Every function here returns rows with a fixed number of queries, whatever the number of
entries, decisions or snapshots: per-row numbers come from annotations, grouped counts or
what the write path stored (an entry's series head), related objects from select_related /
prefetch_related. Nothing is kept between reads: the page cache (web/cache.py) is the one
read-side cache; a few hot queries keep only their built shape (web/shapes.py, per thread, no
rows). The tests guard the counts on small and large data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import (
    Case,
    Count,
    DecimalField,
    F,
    IntegerField,
    JSONField,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404

from agents.models import Competitor
from cohorts.models import (
    AgentSubmission,
    Cohort,
    Decision,
    Entry,
    Forecast,
    LLMCall,
    Position,
    Settlement,
    Trade,
    Universe,
)
from cohorts.scope import LIVE_PATH_KINDS, SOURCE_FOR_KIND
from markets.models import Market, ResolutionChange
from scoring import selectors as scoring_selectors
from scoring.models import LeaderboardRow, ScoreRun
from web.shapes import per_thread

SCOPES: tuple[str, ...] = (
    Cohort.Kind.LIVE,
    Cohort.Kind.REPLAY,
    Cohort.Kind.DEMO,
    Cohort.Kind.REHEARSAL,
)
# What a page shows when no scope is asked for. A rehearsal is only ever shown when asked for
# (?scope=rehearsal): the home page must never pass its results off as the arena's.
DEFAULT_SCOPES: tuple[str, ...] = (Cohort.Kind.LIVE, Cohort.Kind.REPLAY, Cohort.Kind.DEMO)
ZERO = Value(Decimal("0.00"), output_field=DecimalField(max_digits=14, decimal_places=2))

# What a table shows of a competitor: its name, link and badges. The rest (endpoint, prices,
# params, notes) no table reads, and each column read costs every row its conversion.
TABLE_COMPETITOR = ("id", "slug", "display_name", "kind", "simulated")


def unshown_competitor(path: str) -> list[str]:
    """The competitor fields a table does not show, as defer() paths from the model read
    (`path`: the relation to the competitor, e.g. "competitor")."""
    return [
        f"{path}__{f.name}"
        for f in Competitor._meta.concrete_fields
        if f.name not in TABLE_COMPETITOR
    ]


# Leaderboard columns a visitor may sort by -> (field, lower-is-better). The default direction
# of each column is "best first"; the rank column follows the scoring engine's own order.
SORTABLE: dict[str, tuple[str, bool]] = {
    "rank": ("rank", True),
    "competitor": ("competitor__display_name", True),
    "brier": ("brier", True),
    "log_score": ("log_score", True),
    "skill": ("skill_vs_market", False),
    "return": ("return_pct", False),
    "pnl": ("pnl", False),
    "win_rate": ("win_rate", False),
    "n_resolved": ("n_resolved", False),
    "cost": ("cost_usd", True),
}


def scope_or_default(raw: str | None, competitor: Competitor | None = None) -> str:
    """The asked-for scope, else the first of live / replay / demo that has any cohort (of this
    competitor, when given): after `arena demo` on a fresh install the demo is what there is."""
    if raw in SCOPES:
        return raw
    cohorts = Cohort.objects.all()
    if competitor is not None:
        cohorts = cohorts.filter(entries__competitor=competitor)
    # order_by(): the model's default ordering would make DISTINCT run over (kind, week_start).
    kinds = set(cohorts.order_by().values_list("kind", flat=True).distinct())
    return next((k for k in DEFAULT_SCOPES if k in kinds), Cohort.Kind.LIVE)


def scopes_with_cohorts() -> list[str]:
    """live / replay / demo / rehearsal, in that order, that have at least one cohort."""
    kinds = set(Cohort.objects.values_list("kind", flat=True).distinct())
    return [k for k in SCOPES if k in kinds]


# --- score runs and leaderboard rows -------------------------------------------------------


def latest_run(scope: str) -> ScoreRun | None:
    return scoring_selectors.latest_run(scope)


def sorted_rows(
    rows: QuerySet[LeaderboardRow], sort: str, descending: bool | None
) -> tuple[QuerySet[LeaderboardRow], str, bool]:
    """Leaderboard rows ordered by a whitelisted column (an unknown one is the rank), each
    column best first unless `descending` says otherwise; missing values sort last."""
    if sort not in SORTABLE:
        sort = "rank"
    field, lower_better = SORTABLE[sort]
    if descending is None:
        descending = not lower_better
    order = F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)
    ordered = rows.select_related("competitor").order_by(order, "competitor__display_name")
    return ordered, sort, descending


def competitor_rows(competitor: Competitor, scope: str) -> tuple[ScoreRun | None, list]:
    """The competitor's rows in the latest run of a scope: the all-cohorts row first."""
    # Its details are read sliced where the page needs them (competitor_view.dm_row).
    run = scoring_selectors.done_runs(scope).defer("details").first()
    if run is None:
        return None, []
    # The rows are read for the run just fetched, so the run the page names and the rows it
    # shows are the same run.
    # Only the all-cohorts row's details are shown (its calibration, tests, measures): a row's
    # details are about a kilobyte of JSON, and a competitor in twenty cohorts has twenty more
    # rows whose details the per-cohort table never reads.
    overall_details = Case(When(cohort__isnull=True, then=F("details")), output_field=JSONField())
    rows = list(
        LeaderboardRow.objects.filter(run=run, competitor=competitor)
        .select_related("cohort", "competitor")
        .defer("details")
        .annotate(overall_details=overall_details)
        .order_by(F("cohort__week_start").desc(nulls_first=True), "pk")
    )
    for row in rows:
        if row.cohort_id is None:
            row.details = row.overall_details
    return run, rows


def scope_cohorts(scope: str | tuple[str, ...]) -> list[Cohort]:
    """The scope's (or scopes') cohorts, oldest first, with what a chart's events and a count
    need."""
    return list(
        Cohort.objects.filter(Q(kind=scope) if isinstance(scope, str) else Q(kind__in=scope))
        .only("id", "kind", "week_start")
        .order_by("week_start")
    )


def synced_markets(scope: str) -> QuerySet[Market]:
    """The scope's markets a page can show: for the live path (Polymarket, or its rehearsal
    stand-in), those synced at least once; for a simulated scope, all of them. Pages only
    test whether any exists, so an empty page can say why it is empty without counting."""
    markets = Market.objects.order_by()
    if scope in LIVE_PATH_KINDS:
        markets = markets.filter(source=SOURCE_FOR_KIND[scope], last_synced_at__isnull=False)
    return markets


# --- cohorts and entries -------------------------------------------------------------------


def _count_subquery(qs: QuerySet, key: str = "entry") -> Subquery:
    return Subquery(
        qs.order_by().values(key).annotate(c=Count("id")).values("c")[:1],
        output_field=IntegerField(),
    )


def cohorts_overview(kind: str | None = None) -> QuerySet[Cohort]:
    """Cohorts with entry counts and the latest decided week (3 aggregates, 1 query)."""
    qs = Cohort.objects.all()
    if kind in SCOPES:
        qs = qs.filter(kind=kind)
    entries = Entry.objects.filter(cohort=OuterRef("pk"))
    latest_week = (
        Decision.objects.filter(entry__cohort=OuterRef("pk"))
        .order_by()
        .values("entry__cohort")
        .annotate(w=Max("week"))
        .values("w")[:1]
    )
    return qs.annotate(
        n_entries=Coalesce(_count_subquery(entries, "cohort"), 0),
        latest_week=Subquery(latest_week, output_field=IntegerField()),
    ).order_by("-week_start", "kind")


def entry_rows(cohort: Cohort) -> list[Entry]:
    """The cohort's entries with value, return, cash, invested, trades and resolved counts, in
    one query (_entry_figures): the entries with their competitor and series head (the latest
    snapshot, kept by cohorts/series/write.py as snapshots are written), and per entry its trades
    counted and its open and settled positions counted and summed."""
    rows = list(_entry_figures().filter(cohort=cohort))
    for e in rows:
        head = getattr(e, "series_head", None)
        has_value = head is not None and head.last_ts is not None
        e.snap_total = head.last_total if has_value else None
        e.snap_ts = head.last_ts if has_value else None
        e.invested = e.open_cost if e.open_cost is not None else Decimal("0.00")
        e.n_open = e.open_count or 0
        e.n_resolved = e.settled_count or 0
        e.n_trades = e.trade_count or 0
        decorate_entry(e)
    rows.sort(key=lambda e: (-e.value, e.competitor.display_name, e.replicate))
    return rows


@per_thread
def _entry_figures() -> QuerySet[Entry]:
    """entry_rows' query, built once per thread (web.shapes): its four correlated counts cost
    more to build and resolve than the database spends on them (12 entries: 1.2 ms against
    2.3 ms for the three grouped queries it replaced). It holds no rows; callers filter a copy."""
    positions = Position.objects.filter(entry_id=OuterRef("pk")).order_by().values("entry_id")
    open_ = positions.filter(status=Position.Status.OPEN)
    settled = positions.filter(status=Position.Status.SETTLED)
    trades = Trade.objects.filter(entry_id=OuterRef("pk")).order_by().values("entry_id")

    def one(rows: QuerySet, figure, field) -> Subquery:
        return Subquery(rows.annotate(figure=figure).values("figure")[:1], output_field=field)

    money = DecimalField(max_digits=14, decimal_places=2)
    return (
        Entry.objects.select_related("competitor", "series_head")
        .defer(*unshown_competitor("competitor"))
        .annotate(
            trade_count=one(trades, Count("id"), IntegerField()),
            open_count=one(open_, Count("id"), IntegerField()),
            open_cost=one(open_, Sum("cost_basis"), money),
            settled_count=one(settled, Count("id"), IntegerField()),
        )
    )


def get_cohort(cohort_id: int) -> Cohort | None:
    return Cohort.objects.filter(pk=cohort_id).first()


def decorate_entry(e: Entry) -> None:
    """Value = latest snapshot total; before the first snapshot, cash plus open positions at cost."""
    e.value_at_cost = e.snap_total is None
    e.value = e.snap_total if e.snap_total is not None else e.cash + e.invested
    base = e.initial_balance or Decimal("1")
    e.return_pct = float((e.value - base) / base * 100)


# Columns no list of decisions, trades or markets shows, and that can weigh kilobytes a row
# (prompts, upstream payloads): never loaded for lists.
DECISION_HEAVY = ("system_prompt", "user_prompt", "parsed", "validation_errors", "forecast_sample")
MARKET_HEAVY = ("raw", "description")
EVENT_LIMIT = 60  # staff corrections listed, events marked on a chart: more would hide the rest


def recent_decisions(cohort: Cohort, limit: int = 20) -> list[dict[str, Any]]:
    """The cohort's latest decisions as the page lists them: the columns it shows, the
    entry's replicate and competitor, the trades counted (one query)."""
    return list(
        Decision.objects.filter(entry__cohort=cohort)
        .values(
            "pk",
            "week",
            "status",
            "action",
            "hold_reason",
            "reasoning",
            "entry__replicate",
            "entry__competitor__display_name",
            "entry__competitor__simulated",
        )
        .annotate(n_trades=Count("trades"))
        .order_by("-week", "-claimed_at", "-id")[:limit]
    )


@dataclass(frozen=True)
class Universes:
    """A cohort's frozen universes as its page reads them: when each week's was frozen (the
    chart's decision events) and the latest one's markets (the universe table)."""

    frozen: list[tuple[int, datetime]]  # (week, frozen_at), oldest week first
    latest_week: int | None
    latest_markets: list[dict]


def cohort_universes(cohort: Cohort) -> Universes:
    """Universes of the cohort in one query (_universe_weeks): every week's freeze, and the
    markets of the latest week only (a hundred markets a week)."""
    rows = list(_universe_weeks().filter(cohort=cohort))
    if not rows:
        return Universes([], None, [])
    week, _, markets = rows[-1]
    return Universes([(w, at) for w, at, _ in rows], week, list(markets or []))


@per_thread
def _universe_weeks() -> QuerySet:
    """cohort_universes' query, built once per thread (web.shapes)."""
    latest = (
        Universe.objects.filter(cohort_id=OuterRef("cohort_id")).order_by("-week").values("week")
    )
    markets = Case(When(week=Subquery(latest[:1]), then=F("markets")), output_field=JSONField())
    return Universe.objects.order_by("week").values_list("week", "frozen_at", markets)


def get_entry(cohort_id: int, slug: str, replicate: int) -> Entry:
    """The entry with its cohort, competitor and series head (the header's value and the
    chart's range read the head: with it here neither queries it again)."""
    return get_object_or_404(
        Entry.objects.select_related("cohort", "competitor", "series_head"),
        cohort_id=cohort_id,
        competitor__slug=slug,
        replicate=replicate,
    )


def entry_replicates(entry: Entry) -> list[int]:
    """The replicate numbers of the entry's competitor in its cohort."""
    return list(
        Entry.objects.filter(cohort_id=entry.cohort_id, competitor_id=entry.competitor_id)
        .order_by("replicate")
        .values_list("replicate", flat=True)
    )


def entry_positions(entry: Entry) -> tuple[list[Position], list[Position]]:
    """(open, closed) positions; closed ones carry .result won/lost/void/exited."""
    live_settlement = Settlement.objects.filter(reversed_at__isnull=True)
    positions = list(
        Position.objects.filter(entry=entry)
        .select_related("market")
        .defer(*(f"market__{f}" for f in MARKET_HEAVY))
        .prefetch_related(Prefetch("settlements", queryset=live_settlement, to_attr="live"))
        .order_by("-opened_at", "-id")
    )
    open_, closed = [], []
    for p in positions:
        settlement = p.live[0] if p.live else None
        p.settlement = settlement
        p.avg_price = p.cost_basis / p.shares if p.shares else None
        if p.status == Position.Status.OPEN:
            open_.append(p)
            continue
        p.result = settlement.kind if settlement else "exited"
        closed.append(p)
    return open_, closed


def entry_decisions(entry: Entry) -> list[Decision]:
    return list(
        Decision.objects.filter(entry=entry)
        .defer(*DECISION_HEAVY)
        .annotate(
            n_trades=Count("trades", distinct=True), n_forecasts=Count("forecasts", distinct=True)
        )
        .order_by("week", "id")
    )


def entry_trades(entry: Entry, limit: int = 200) -> list[Trade]:
    return list(
        Trade.objects.filter(entry=entry)
        .select_related("position__market", "decision")
        .defer(
            *(f"decision__{f}" for f in (*DECISION_HEAVY, "reasoning")),
            *(f"position__market__{f}" for f in MARKET_HEAVY),
        )
        .order_by("-executed_at", "-id")[:limit]
    )


def entry_forecasts(entry: Entry, limit: int = 300) -> list[Forecast]:
    return list(
        Forecast.objects.filter(entry=entry)
        .select_related("market", "decision")
        .defer(
            *(f"decision__{f}" for f in (*DECISION_HEAVY, "reasoning")),
            *(f"market__{f}" for f in MARKET_HEAVY),
        )
        .order_by("-created_at", "-id")[:limit]
    )


# --- competitors ---------------------------------------------------------------------------


def competitors_overview() -> QuerySet[Competitor]:
    return Competitor.objects.annotate(
        n_entries=Count("entries", distinct=True),
        n_cohorts=Count("entries__cohort", distinct=True),
    ).order_by("-active", "kind", "display_name")


def competitor_costs(competitor: Competitor) -> dict[str, Any]:
    """Spend on model calls: total, per decision, per scored forecast. A forecast is one
    decision's probabilities for one market (the question the leaderboard scores), so the
    outcomes stated for one market count once."""
    agg = Decision.objects.filter(entry__competitor=competitor).aggregate(
        n=Count("id"),
        cost=Coalesce(Sum("cost_usd"), Value(Decimal("0"))),
        tokens_in=Coalesce(Sum("tokens_in"), 0),
        tokens_out=Coalesce(Sum("tokens_out"), 0),
    )
    resolved = (
        Forecast.objects.filter(entry__competitor=competitor, market__status=Market.Status.RESOLVED)
        .values("decision_id", "market_id")
        .distinct()
        .count()
    )
    cost = Decimal(agg["cost"])
    return {
        "decisions": agg["n"],
        "cost": cost,
        "tokens_in": agg["tokens_in"],
        "tokens_out": agg["tokens_out"],
        "per_decision": cost / agg["n"] if agg["n"] else None,
        "resolved_forecasts": resolved,
        "per_resolved": cost / resolved if resolved else None,
    }


def competitor_entries(competitor: Competitor, limit: int = 50) -> list[Entry]:
    # Each entry's value is its latest snapshot's total, which its series head keeps as
    # snapshots are written (entry_rows reads the same): a join, not a subquery per entry.
    money = DecimalField(max_digits=14, decimal_places=2)
    open_cost = (
        Position.objects.filter(entry=OuterRef("pk"), status=Position.Status.OPEN)
        .order_by()
        .values("entry")
        .annotate(s=Sum("cost_basis"))
        .values("s")[:1]
    )
    rows = list(
        Entry.objects.filter(competitor=competitor)
        .select_related("cohort", "competitor")
        .annotate(
            snap_total=F("series_head__last_total"),
            invested=Coalesce(Subquery(open_cost, output_field=money), ZERO),
        )
        .order_by("-cohort__week_start", "replicate")[:limit]
    )
    for e in rows:
        decorate_entry(e)
    return rows


# --- markets -------------------------------------------------------------------------------

MARKET_PAGE_SIZE = 50


def market_search(q: str = "", status: str = "") -> QuerySet[Market]:
    qs = Market.objects.all()
    if status in Market.Status.values:
        qs = qs.filter(status=status)
    # PostgreSQL cannot compare text with NUL in it (views refuse such a q with a 400 already).
    q = q.replace("\x00", "").strip()[:200]
    if q:
        qs = qs.filter(
            Q(question__icontains=q) | Q(slug__icontains=q) | Q(event_title__icontains=q)
        )
    return qs.defer("raw", "description").order_by("-volume", "id")


def market_holders(market: Market, limit: int = 200) -> list[Position]:
    # The holders' competitors as tables show them: a busy market has dozens of holders, and
    # every competitor column read costs each row its conversion.
    return list(
        Position.objects.filter(market=market, status=Position.Status.OPEN)
        .select_related("entry__competitor", "entry__cohort")
        .defer(*unshown_competitor("entry__competitor"))
        .order_by("-cost_basis", "id")[:limit]
    )


def market_forecasts(market: Market, limit: int = 200) -> list[Forecast]:
    rows = list(
        Forecast.objects.filter(market=market)
        .select_related("entry__competitor", "entry__cohort")
        .order_by("-created_at", "-id")[:limit]
    )
    for f in rows:
        f.edge = None if f.market_price is None else f.probability - f.market_price
    return rows


def market_resolution_trail(market: Market) -> list[ResolutionChange]:
    return list(
        market.resolution_changes.select_related("changed_by").order_by("-changed_at", "-id")
    )


# --- decisions -----------------------------------------------------------------------------


def get_decision(decision_id: int, submissions: bool = True) -> Decision:
    """The decision with everything its audit record shows. `submissions=False` leaves an
    outside agent's submissions unread (the page reads them itself, for an outside agent's
    decision only: for every other one the query would read nothing)."""
    return get_object_or_404(_decisions(submissions), pk=decision_id)


def decision_or_none(decision_id: int) -> Decision | None:
    return _decisions().filter(pk=decision_id).first()


def _decisions(submissions: bool = True):
    # Of each market, not its upstream payload and rules (MARKET_HEAVY: kilobytes a market
    # that neither the page nor the audit record shows).
    related = [
        Prefetch("llm_calls", queryset=LLMCall.objects.order_by("attempt")),
        Prefetch(
            "forecasts",
            queryset=Forecast.objects.select_related("market")
            .defer(*(f"market__{f}" for f in MARKET_HEAVY))
            .order_by("id"),
        ),
        Prefetch(
            "trades",
            queryset=Trade.objects.select_related("position__market")
            .defer(*(f"position__market__{f}" for f in MARKET_HEAVY))
            .order_by("executed_at", "id"),
        ),
    ]
    if submissions:
        related.append(
            Prefetch("submissions", queryset=AgentSubmission.objects.order_by("received_at", "id"))
        )
    return Decision.objects.select_related(
        "entry__competitor", "entry__cohort", "release"
    ).prefetch_related(*related)


def staff_corrections(
    cohort: Cohort, entry: Entry | None = None, any_staff: bool | None = None
) -> list[ResolutionChange]:
    """Staff resolution changes of markets the cohort's entries (or one entry) held, newest
    first, each with .entry_ids: the entries it moved (two queries; none when the caller knows
    there is no staff correction at all, `any_staff`)."""
    staff = ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN)
    # Staff corrections are rare: one cheap test spares reading who held what.
    if not (staff.exists() if any_staff is None else any_staff):
        return []
    held: dict[int, set[int]] = {}
    pairs = Position.objects.filter(entry__cohort=cohort)
    if entry is not None:
        pairs = pairs.filter(entry=entry)
    for market_id, entry_id in pairs.values_list("market_id", "entry_id").distinct():
        held.setdefault(market_id, set()).add(entry_id)
    changes = list(
        staff.filter(market_id__in=held)
        .select_related("market", "changed_by")
        .order_by("-changed_at", "-pk")[:EVENT_LIMIT]
    )
    for rc in changes:
        rc.entry_ids = held[rc.market_id]
    return changes
