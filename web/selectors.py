"""Read queries for the public pages and the JSON API.

Every function here returns rows with a fixed number of queries, whatever the number of
entries, decisions or snapshots: per-row numbers come from annotations and correlated
subqueries, related objects from select_related / prefetch_related. The tests guard this with
query counts measured on small and large data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import (
    Count,
    DecimalField,
    F,
    IntegerField,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import get_object_or_404

from agents.models import Competitor
from cohorts.models import (
    Cohort,
    Decision,
    Entry,
    Forecast,
    LLMCall,
    Position,
    Settlement,
    Snapshot,
    Trade,
)
from cohorts.seal_models import DecisionDigest, EventLogEntry, WeekSeal
from core import clock
from core.versions import DATA_KEY, VALUES_KEY, memo
from markets.models import Market, PricePoint, ResolutionChange
from scoring import selectors as scoring_selectors
from scoring.models import LeaderboardRow, ScoreRun
from web import charts, colours, standings

SCOPES: tuple[str, ...] = (Cohort.Kind.LIVE, Cohort.Kind.REPLAY, Cohort.Kind.DEMO)
ZERO = Value(Decimal("0.00"), output_field=DecimalField(max_digits=14, decimal_places=2))

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
    # Kept per data version: cohorts appear only with data writes.
    owner = "all" if competitor is None else competitor.pk
    return memo(f"default-scope:{owner}", lambda: _default_scope(competitor))


def _default_scope(competitor: Competitor | None) -> str:
    cohorts = Cohort.objects.all()
    if competitor is not None:
        cohorts = cohorts.filter(entries__competitor=competitor)
    # order_by(): the model's default ordering would make DISTINCT run over (kind, week_start).
    kinds = set(cohorts.order_by().values_list("kind", flat=True).distinct())
    return next((k for k in SCOPES if k in kinds), Cohort.Kind.LIVE)


def scopes_with_cohorts() -> list[str]:
    """live / replay / demo, in that order, that have at least one cohort."""
    kinds = set(Cohort.objects.values_list("kind", flat=True).distinct())
    return [k for k in SCOPES if k in kinds]


# --- score runs and leaderboard rows -------------------------------------------------------


def latest_run(scope: str) -> ScoreRun | None:
    return scoring_selectors.latest_run(scope)


def latest_run_light(scope: str) -> ScoreRun | None:
    """The latest run without its details (tens of kilobytes of JSON), loaded only if a page
    reads them: the home page needs them only when its leaderboard fragment is rendered again.
    Kept per data version (a score run replaces it)."""
    return memo(
        f"latest-run:{scope}",
        lambda: (
            ScoreRun.objects.filter(scope=scope, status=ScoreRun.Status.DONE)
            .defer("details")
            .order_by("-finished_at", "-pk")
            .first()
        ),
    )


def leaderboard_rows(
    run: ScoreRun | None, cohort: Cohort | None = None, sort: str = "rank", descending=None
) -> tuple[list[LeaderboardRow], str, bool]:
    """Rows of one run (all cohorts when cohort is None), sorted by a whitelisted column.

    Returns (rows, sort key used, descending flag used). Missing values sort last.
    """
    if run is None:
        return [], "rank", False
    if sort not in SORTABLE:
        sort = "rank"
    field, lower_better = SORTABLE[sort]
    if descending is None:
        descending = not lower_better
    qs = scoring_selectors.leaderboard_rows(run, cohort=cohort)
    order = F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)
    rows = list(qs.select_related("competitor").order_by(order, "competitor__display_name"))
    return rows, sort, descending


def competitor_rows(competitor: Competitor, scope: str) -> tuple[ScoreRun | None, list]:
    """The competitor's rows in the latest run of a scope: the all-cohorts row first."""
    run = latest_run(scope)
    if run is None:
        return None, []
    # Read directly (not via scoring.selectors.competitor_rows) so the run the page names and the
    # rows it shows are guaranteed to be the same run.
    rows = list(
        LeaderboardRow.objects.filter(run=run, competitor=competitor)
        .select_related("cohort", "competitor")
        .order_by(F("cohort__week_start").desc(nulls_first=True), "pk")
    )
    return run, rows


@dataclass(frozen=True)
class SiteState:
    """What exists yet, so empty pages can say truthfully why they are empty."""

    markets: int
    markets_synced: bool
    cohorts: int
    resolved_markets: int


def site_state(scope: str) -> SiteState:
    """Counts that change only with data writes (syncs, resolutions, new cohorts): kept per data
    version."""
    return memo(f"site-state:{scope}", lambda: _site_state(scope))


def _site_state(scope: str) -> SiteState:
    market_qs = Market.objects.order_by()
    if scope == Cohort.Kind.LIVE:
        market_qs = market_qs.filter(source=Market.Source.POLYMARKET)
    agg = market_qs.aggregate(
        n=Count("id"),
        synced=Count("id", filter=Q(last_synced_at__isnull=False)),
        resolved=Count("id", filter=Q(status__in=[Market.Status.RESOLVED, Market.Status.VOID])),
    )
    synced = agg["synced"] > 0 if scope == Cohort.Kind.LIVE else agg["n"] > 0
    return SiteState(
        markets=agg["n"],
        markets_synced=synced,
        cohorts=Cohort.objects.filter(kind=scope).order_by().count(),
        resolved_markets=agg["resolved"],
    )


# --- cohorts and entries -------------------------------------------------------------------


def _count_subquery(qs: QuerySet, key: str = "entry") -> Subquery:
    return Subquery(
        qs.order_by().values(key).annotate(c=Count("id")).values("c")[:1],
        output_field=IntegerField(),
    )


def kept(name: str, compute, with_values: bool = False, ttl: int = 3600):
    """compute(), kept per data version (and values version: with_values), for pages whose
    whole context changes only with those writes (core.versions.memo)."""
    return memo(name, compute, VALUE_TOKENS if with_values else (DATA_KEY,), ttl)


def cohort_list_kept(kind: str | None) -> list[Cohort]:
    """The cohorts page's rows (at most 200, newest first) with each one's leader, kept per data
    version: cohorts, decisions and score runs change only with data writes."""

    def compute() -> list[Cohort]:
        cohorts = list(cohorts_overview(kind)[:200])
        leaders = cohort_leaders(cohorts)
        for c in cohorts:
            c.lead = leaders.get(c.pk)
        return cohorts

    return memo(f"cohort-list:{kind}", compute)


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
    """The cohort's entries with value, return, cash, invested, trades and resolved counts.

    Three plain queries: the entries with their series head (the latest snapshot, kept by
    cohorts/series.py as snapshots are written), their positions counted and summed by status,
    their trades counted. Cheaper to plan and run than one correlated subquery per figure.
    """
    rows = list(Entry.objects.filter(cohort=cohort).select_related("competitor", "series_head"))
    positions = (
        Position.objects.filter(entry__cohort=cohort)
        .order_by()
        .values_list("entry_id", "status")
        .annotate(n=Count("id"), cost=Sum("cost_basis"))
    )
    by_status = {(e, status): (n, cost) for e, status, n, cost in positions}
    trades = dict(
        Trade.objects.filter(entry__cohort=cohort)
        .order_by()
        .values_list("entry_id")
        .annotate(n=Count("id"))
    )
    open_, settled = Position.Status.OPEN, Position.Status.SETTLED
    for e in rows:
        head = getattr(e, "series_head", None)
        has_value = head is not None and head.last_ts is not None
        e.snap_total = head.last_total if has_value else None
        e.snap_ts = head.last_ts if has_value else None
        n_open, open_cost = by_status.get((e.pk, open_), (0, None))
        e.invested = open_cost if open_cost is not None else Decimal("0.00")
        e.n_open = n_open
        e.n_resolved = by_status.get((e.pk, settled), (0, None))[0]
        e.n_trades = trades.get(e.pk, 0)
        decorate_entry(e)
    rows.sort(key=lambda e: (-e.value, e.competitor.display_name, e.replicate))
    return rows


def cohort_kept(cohort_id: int) -> Cohort | None:
    """The cohort (None if there is none), kept per data version: its status, notes and
    label change only with data writes."""
    return memo(f"cohort:{cohort_id}", lambda: Cohort.objects.filter(pk=cohort_id).first())


def entry_rows_kept(cohort: Cohort) -> list[Entry]:
    """entry_rows, kept per data and values version: positions, trades and cash change only
    with data writes, values with snapshot ticks."""
    return memo(f"entry-rows:{cohort.pk}", lambda: entry_rows(cohort), VALUE_TOKENS)


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


def recent_decisions(cohort: Cohort, limit: int = 20) -> list[Decision]:
    return list(
        Decision.objects.filter(entry__cohort=cohort)
        .defer(*DECISION_HEAVY)
        .select_related("entry__competitor")
        .annotate(n_trades=Count("trades"))
        .order_by("-week", "-claimed_at", "-id")[:limit]
    )


def cohort_universe(cohort: Cohort) -> tuple[int | None, list[dict]]:
    """The latest frozen universe (week, markets) or (None, []) before the first decision."""
    universe = cohort.universes.order_by("-week").first()
    if universe is None:
        return None, []
    return universe.week, list(universe.markets or [])


def get_entry(cohort_id: int, slug: str, replicate: int) -> Entry:
    return get_object_or_404(
        Entry.objects.select_related("cohort", "competitor"),
        cohort_id=cohort_id,
        competitor__slug=slug,
        replicate=replicate,
    )


def get_entry_kept(cohort_id: int, slug: str, replicate: int) -> Entry:
    """get_entry, kept per data version (entries, their cash and competitors change only with
    data writes); 404 when there is none."""
    entry = memo(
        f"entry:{cohort_id}:{slug}:{replicate}",
        lambda: (
            Entry.objects.select_related("cohort", "competitor")
            .filter(cohort_id=cohort_id, competitor__slug=slug, replicate=replicate)
            .first()
        ),
    )
    if entry is None:
        raise Http404(f"no entry {slug} #{replicate} in cohort {cohort_id}")
    return entry


def entry_replicates(entry: Entry) -> list[int]:
    """The replicate numbers of the entry's competitor in its cohort (kept per data version)."""
    return memo(
        f"replicates:{entry.cohort_id}:{entry.competitor_id}",
        lambda: list(
            Entry.objects.filter(cohort_id=entry.cohort_id, competitor_id=entry.competitor_id)
            .order_by("replicate")
            .values_list("replicate", flat=True)
        ),
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
    """Spend on model calls: total, per decision, per resolved forecast (one query)."""
    agg = Decision.objects.filter(entry__competitor=competitor).aggregate(
        n=Count("id"),
        cost=Coalesce(Sum("cost_usd"), Value(Decimal("0"))),
        tokens_in=Coalesce(Sum("tokens_in"), 0),
        tokens_out=Coalesce(Sum("tokens_out"), 0),
    )
    resolved = Forecast.objects.filter(
        entry__competitor=competitor, market__status=Market.Status.RESOLVED
    ).count()
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
    latest = Snapshot.objects.filter(entry=OuterRef("pk")).order_by("-ts")
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
            snap_total=Subquery(latest.values("total")[:1], output_field=money),
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
    return list(
        Position.objects.filter(market=market, status=Position.Status.OPEN)
        .select_related("entry__competitor", "entry__cohort")
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


def market_price_points(market: Market, since=None, max_points: int = 2000) -> list[PricePoint]:
    # Newest first, bounded; the chart builder downsamples further per outcome.
    qs = PricePoint.objects.filter(market=market)
    if since is not None:
        qs = qs.filter(ts__gte=since)
    rows = list(qs.only("outcome", "ts", "price").order_by("-ts")[:max_points])
    rows.reverse()
    return rows


def market_price_chart(market: Market, range_raw: str | None = None) -> dict[str, Any]:
    """The market's price chart for a range (see charts.RANGES), anchored at the chart's end:
    the resolution, or the latest quote. Each line starts with the price in force at the start
    of the range and is carried to the end; the resolution and staff changes are annotated."""
    range_key = charts.range_or_default(range_raw)
    last_ts = PricePoint.objects.filter(market=market).aggregate(m=Max("ts"))["m"]
    staff = list(
        market.resolution_changes.filter(source=Market.ResolvedBy.ADMIN).order_by("changed_at")
    )
    candidates = [t for t in (last_ts, market.last_priced_at) if t is not None]
    if market.status in (Market.Status.RESOLVED, Market.Status.VOID) and market.resolved_at:
        candidates.append(market.resolved_at)
    candidates += [rc.changed_at for rc in staff]
    until = max(candidates) if candidates and last_ts is not None else None
    window = charts.RANGES[range_key]
    since = until - window if window is not None and until is not None else None
    points = market_price_points(market, since)
    if since is not None:
        starts = []
        for outcome in market.outcomes or []:
            before = (
                PricePoint.objects.filter(market=market, outcome=outcome, ts__lt=since)
                .only("outcome", "ts", "price")
                .order_by("-ts")
                .first()
            )
            if before is not None:
                before.ts = since  # the price in force when the range starts
                starts.append(before)
        points = starts + points
    payload = charts.price_history(points, list(market.outcomes or []), until=until)
    payload["range"] = range_key
    events = []
    if market.status == Market.Status.RESOLVED and market.resolved_at:
        events.append(
            _event(market.resolved_at, "resolution", f"resolved {market.resolved_outcome}")
        )
    elif market.status == Market.Status.VOID and market.resolved_at:
        events.append(_event(market.resolved_at, "resolution", "void"))
    for rc in staff:
        word = CHANGE_WORDS.get(rc.to_status, "changed")
        outcome = f" to {rc.to_outcome}" if rc.to_outcome else ""
        events.append(_event(rc.changed_at, "correction", f"staff: {word}{outcome}", rc.reason))
    xs = sorted(x for line in payload["lines"] for x in line["x"])
    payload["annotations"] = _within(events, [xs[0], xs[-1]] if xs else [])
    return payload


# --- decisions -----------------------------------------------------------------------------


def get_decision(decision_id: int) -> Decision:
    return get_object_or_404(
        Decision.objects.select_related("entry__competitor", "entry__cohort").prefetch_related(
            Prefetch("llm_calls", queryset=LLMCall.objects.order_by("attempt")),
            Prefetch(
                "forecasts", queryset=Forecast.objects.select_related("market").order_by("id")
            ),
            Prefetch(
                "trades",
                queryset=Trade.objects.select_related("position__market").order_by(
                    "executed_at", "id"
                ),
            ),
        ),
        pk=decision_id,
    )


# --- chart decorations: colours and the events that moved a chart ---------------------------

EVENT_LIMIT = 60  # annotations per chart; more would hide the lines


def _competitor_ids(slugs) -> dict[str, int]:
    return dict(Competitor.objects.filter(slug__in=set(slugs)).values_list("slug", "pk"))


def _within(events: list[dict], xs: list[str]) -> list[dict]:
    if not xs:
        return []
    lo, hi = xs[0], xs[-1]
    kept = sorted((e for e in events if lo <= e["x"] <= hi), key=lambda e: (e["x"], e["label"]))
    return kept[-EVENT_LIMIT:]


def _styled(lines: list[dict], replicated: bool) -> None:
    # charts.py styles its lines from the competitor ids it already has; other payloads get
    # their ids here (one query).
    missing = [line for line in lines if "color" not in line]
    if not missing:
        return
    ids = _competitor_ids(line["competitor"] for line in missing)
    for line in missing:
        replicate = (line.get("replicate") or 1) if replicated else 1
        line.update(colours.style_for(ids.get(line["competitor"], 0), replicate))


def _event_tokens(kind: str) -> tuple[str, ...]:
    # A simulated clock's corrections sit on its snapshots, so they move with them too.
    return (DATA_KEY,) if kind == Cohort.Kind.LIVE else (DATA_KEY, VALUES_KEY)


EVENTS_TTL = 600  # a replay whose clock is ahead of the wall clock places events by "now"


def decorate_series(payload: dict, cohort: Cohort, entry_ids: list[int] | None = None) -> dict:
    """A cohort's (or one entry's) value series with each line's fixed colour and the events
    that moved it: the cohort's weekly decisions and lifecycle, and staff corrections of
    markets its entries held. The events change only with data writes, so they are kept per
    data version (core.versions.memo), never recomputed after a snapshot tick."""
    _styled(payload.get("entries", []), replicated=True)
    if payload.get("x"):
        only = ",".join(map(str, sorted(entry_ids))) if entry_ids is not None else "all"
        events = memo(
            f"cohort-events:{cohort.pk}:{only}",
            lambda: cohort_events(cohort) + correction_events([cohort], entry_ids),
            _event_tokens(cohort.kind),
            EVENTS_TTL,
        )
        payload["annotations"] = _within(events, payload["x"])
    return payload


def decorate_overview(payload: dict, scope: str) -> dict:
    """The home chart with colours, cohorts opening and staff corrections in the scope (kept
    per data version, as for a cohort's chart)."""
    _styled(payload.get("series", []), replicated=False)
    if payload.get("x"):
        events = memo(
            f"overview-events:{scope}",
            lambda: _scope_events(scope),
            _event_tokens(scope),
            EVENTS_TTL,
        )
        payload["annotations"] = _within(events, payload["x"])
    return payload


@dataclass(frozen=True)
class ChartJSON:
    """A chart's finished payload as JSON text, kept per data and values version: a page embeds
    it (`chart_script` tag) and the API returns it as it is, so a read neither recomputes nor
    re-encodes a chart after the first one since the last write or snapshot tick. The text has
    <, > and & escaped as \\u003C etc. (what json_script does), which is still the same JSON."""

    text: str
    x: bool  # has points (the templates' "no snapshots yet" test)
    step_seconds: int

    @classmethod
    def of(cls, payload: dict) -> ChartJSON:
        text = json.dumps(payload, cls=DjangoJSONEncoder, separators=(",", ":"))
        return cls(
            text.translate(JSON_SCRIPT_ESCAPES),
            bool(payload.get("x")),
            int(payload.get("step_seconds") or 0),
        )


JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}
VALUE_TOKENS = (DATA_KEY, VALUES_KEY)  # what a chart of portfolio values depends on


def overview_chart(scope: str, range_key: str) -> ChartJSON:
    """The home chart (charts.scope_return_series, decorated), kept per data and values
    version."""
    return memo(
        f"chart:overview:{scope}:{range_key}",
        lambda: ChartJSON.of(
            decorate_overview(charts.scope_return_series(scope, range_key=range_key), scope)
        ),
        VALUE_TOKENS,
        EVENTS_TTL,
    )


def cohort_chart(cohort: Cohort, range_key: str, entries=None, only: list[int] | None = None):
    """A cohort's value chart (all entries, or the entries `only`), kept per data and values
    version. `entries` (with their competitors) saves a query when the caller has them."""

    def compute() -> ChartJSON:
        rows = entries
        if rows is None:
            rows = Entry.objects.filter(cohort=cohort).select_related("competitor")
            if only is not None:
                rows = rows.filter(pk__in=only)
        payload = charts.cohort_series(cohort, range_key, entries=list(rows))
        return ChartJSON.of(decorate_series(payload, cohort, only))

    which = "all" if only is None else ",".join(map(str, sorted(only)))
    return memo(f"chart:cohort:{cohort.pk}:{which}:{range_key}", compute, VALUE_TOKENS, EVENTS_TTL)


def _scope_events(scope: str) -> list[dict]:
    cohorts = list(Cohort.objects.filter(kind=scope).order_by("week_start"))
    events = [
        _event(c.week_start, "cohort", f"{c.week_start:%b %d} cohort opens", str(c))
        for c in cohorts
    ]
    return events + correction_events(cohorts)


def _event(at, kind: str, label: str, detail: str = "") -> dict:
    return {"x": charts.fmt_ts(at), "kind": kind, "label": label, "detail": detail}


def cohort_events(cohort: Cohort) -> list[dict]:
    """Moments that move every entry of a cohort: each week's decisions, the end of deciding,
    completion."""
    events = []
    for week, frozen_at in cohort.universes.order_by("week").values_list("week", "frozen_at"):
        events.append(_event(frozen_at, "cohort", f"week {week} decisions"))
    decisions_end = cohort.week_start + timedelta(weeks=cohort.decision_weeks)
    if cohort.status != Cohort.Status.ACTIVE:
        events.append(_event(decisions_end, "cohort", "decisions end, tracking"))
    if cohort.completed_at:
        events.append(_event(cohort.completed_at, "cohort", "completed"))
    return events


CHANGE_WORDS = {
    Market.Status.RESOLVED: "re-resolved",
    Market.Status.VOID: "voided",
    Market.Status.OPEN: "reopened",
    Market.Status.CLOSED: "reopened",
}


def correction_events(cohorts: list[Cohort], entry_ids: list[int] | None = None) -> list[dict]:
    """Staff resolution changes of markets that the cohorts' entries (or the given entries)
    held, placed where they took effect on each cohort's clock.

    A live cohort's clock is the wall clock: the change's own time. A replay or demo cohort
    runs on a simulated clock, and the settlement rewrote its latest snapshot of the moment
    (cohorts.snapshots.write_settlement_snapshots): the line goes on the cohort's last snapshot
    at or before the change, or on its latest snapshot when its clock is still ahead of the
    wall clock (a replay of questions that resolve in the future).
    """
    if not cohorts:
        return []
    positions = Position.objects.filter(entry__cohort__in=cohorts)
    if entry_ids is not None:
        positions = positions.filter(entry_id__in=entry_ids)
    changes = list(
        ResolutionChange.objects.filter(
            source=Market.ResolvedBy.ADMIN, market_id__in=positions.values("market_id")
        )
        .select_related("market")
        .order_by("changed_at", "pk")[:EVENT_LIMIT]
    )
    if not changes:
        return []
    held = set(positions.values_list("market_id", "entry__cohort_id").distinct())
    simulated = [c for c in cohorts if c.kind != Cohort.Kind.LIVE]
    marks: dict[int, dict] = {}
    if simulated:
        # Per cohort, its latest snapshot and its latest at or before each change (one query).
        per_change = {f"c{rc.pk}": Max("ts", filter=Q(ts__lte=rc.changed_at)) for rc in changes}
        for row in (
            Snapshot.objects.filter(entry__cohort__in=simulated)
            .values("entry__cohort_id")
            .annotate(last=Max("ts"), **per_change)
        ):
            marks[row["entry__cohort_id"]] = row
    now = clock.now()
    events = {}
    for rc in changes:
        word = CHANGE_WORDS.get(rc.to_status, "changed")
        outcome = f" to {rc.to_outcome}" if rc.to_outcome else ""
        label = f"staff: {word}{outcome}"
        detail = f"{rc.market.question[:80]} ({rc.reason[:120]})"
        for c in cohorts:
            if (rc.market_id, c.pk) not in held:
                continue
            at = rc.changed_at
            mark = marks.get(c.pk)
            if c.kind != Cohort.Kind.LIVE and mark:
                before = mark[f"c{rc.pk}"]
                at = mark["last"] if mark["last"] > now or before is None else before
            ev = _event(at, "correction", label, detail)
            events[(rc.pk, ev["x"])] = ev
    return list(events.values())


# --- leaders and headline scores for the list pages ------------------------------------------


def _latest_runs(scopes) -> dict[str, ScoreRun]:
    runs = {}
    for scope in scopes:
        run = latest_run(scope)
        if run is not None:
            runs[scope] = run
    return runs


def cohort_leaders(cohorts: list[Cohort]) -> dict[int, dict]:
    """Per cohort: its leader in the latest score run of its kind and the margin over the
    runner-up in the headline metric, with whether the paired test separates them."""
    runs = _latest_runs({c.kind for c in cohorts})
    if not runs or not cohorts:
        return {}
    rows = (
        LeaderboardRow.objects.filter(run__in=runs.values(), cohort__in=cohorts)
        .select_related("competitor")
        .order_by("cohort_id", "rank", "pk")
    )
    by_cohort: dict[int, list[LeaderboardRow]] = {}
    for r in rows:
        by_cohort.setdefault(r.cohort_id, []).append(r)
    out = {}
    for c in cohorts:
        run = runs.get(c.kind)
        ranked = by_cohort.get(c.pk) or []
        if run is None or not ranked:
            continue
        board = standings.build(run, ranked, group=str(c.pk))
        scored = sorted(board.scored, key=lambda s: s.rank)
        if not scored:
            continue
        field_name = standings.HEADLINES[board.headline][0]
        leader = scored[0]
        info = {"leader": leader.row.competitor, "label": board.headline_label, "margin": None}
        if len(scored) > 1:
            a, b = getattr(leader.row, field_name), getattr(scored[1].row, field_name)
            info["margin"] = a - b
            info["runner_up"] = scored[1].row.competitor
            info["tied"] = board.tiers and scored[1].tier == leader.tier
            info["places"] = standings.places_to_separate([a, b], [a - b], 3)
        info["headline"] = board.headline
        out[c.pk] = info
    return out


def competitor_headlines(competitors) -> dict[int, dict]:
    """Per competitor: rank and headline figure of its all-cohorts row in the latest run of the
    first scope (live, replay, demo) where it has one."""
    runs = _latest_runs(SCOPES)
    if not runs:
        return {}
    rows = list(
        LeaderboardRow.objects.filter(run__in=runs.values(), cohort__isnull=True).select_related(
            "competitor", "run"
        )
    )
    by_run: dict[int, list[LeaderboardRow]] = {}
    for r in rows:
        by_run.setdefault(r.run_id, []).append(r)
    out: dict[int, dict] = {}
    for scope in SCOPES:
        run = runs.get(scope)
        if run is None:
            continue
        board = standings.build(run, by_run.get(run.pk, []))
        field_name = standings.HEADLINES[board.headline][0]
        for s in board.scored + board.unscored:
            cid = s.row.competitor_id
            if cid in out:
                continue
            out[cid] = {
                "scope": scope,
                "rank": s.rank,
                "of": len(board.scored),
                "value": getattr(s.row, field_name),
                "headline": board.headline,
                "label": board.headline_label,
                "places": board.places.get(
                    "skill" if field_name == "skill_vs_market" else "return"
                ),
                "reason": s.reason,
                "provisional": s.row.provisional,
                "tier": s.tier,
            }
    return out


def staff_corrections_kept(cohort: Cohort) -> list[ResolutionChange]:
    """staff_corrections(cohort), kept per data version (only staff changes move it)."""
    return memo(f"staff-corrections:{cohort.pk}", lambda: staff_corrections(cohort))


def staff_corrections(cohort: Cohort, entry: Entry | None = None) -> list[ResolutionChange]:
    """Staff resolution changes of markets the cohort's entries (or one entry) held, newest
    first, each with .entries: the entries it moved (two queries)."""
    positions = Position.objects.filter(entry__cohort=cohort)
    if entry is not None:
        positions = positions.filter(entry=entry)
    held: dict[int, set[int]] = {}
    for market_id, entry_id in positions.values_list("market_id", "entry_id").distinct():
        held.setdefault(market_id, set()).add(entry_id)
    if not held:
        return []
    changes = list(
        ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN, market_id__in=held)
        .select_related("market", "changed_by")
        .order_by("-changed_at", "-pk")[:EVENT_LIMIT]
    )
    for rc in changes:
        rc.entry_ids = held[rc.market_id]
    return changes


# --- seals (cohorts/seals.py; docs/verification.md) -----------------------------------------


def seal_feed(kind: str | None = None, cohort_id: int | None = None) -> QuerySet[WeekSeal]:
    """Week roots, newest first."""
    qs = WeekSeal.objects.select_related("cohort").order_by("-sealed_at", "-id")
    if kind in Cohort.Kind.values:
        qs = qs.filter(scope=kind)
    if cohort_id is not None:
        qs = qs.filter(cohort_id=cohort_id)
    return qs


def seal_digests(seals: list[WeekSeal]) -> dict[int, list[DecisionDigest]]:
    """seal id -> the digests its root covers (without the stored record bytes)."""
    weeks = {(s.cohort_id, s.week) for s in seals}
    chains: dict[tuple[int, int], list[DecisionDigest]] = {}
    cohort_ids = {c for c, _ in weeks}
    for dg in (
        DecisionDigest.objects.filter(cohort_id__in=cohort_ids)
        .defer("record")
        .order_by("cohort_id", "week", "seq")
    ):
        if (dg.cohort_id, dg.week) in weeks:
            chains.setdefault((dg.cohort_id, dg.week), []).append(dg)
    return {s.pk: chains.get((s.cohort_id, s.week), [])[: s.count] for s in seals}


def event_log_heads() -> list[dict[str, Any]]:
    heads = []
    for scope in sorted(set(EventLogEntry.objects.values_list("scope", flat=True).distinct())):
        head = EventLogEntry.objects.filter(scope=scope).defer("record").order_by("-seq").first()
        heads.append(
            {"scope": scope, "count": head.seq, "head": head.link, "updated_at": head.created_at}
        )
    return heads


def cohort_seal_rows(cohort: Cohort) -> list[WeekSeal]:
    return seal_feed(cohort_id=cohort.pk).order_by("week", "seq")


def decision_seal(decision: Decision) -> dict[str, Any] | None:
    """The decision's latest digest and the roots that cover it (None: not sealed yet)."""
    digest = (
        DecisionDigest.objects.filter(decision=decision).defer("record").order_by("-seq").first()
    )
    if digest is None:
        return None
    roots = list(
        WeekSeal.objects.filter(
            cohort_id=digest.cohort_id, week=digest.week, count__gte=digest.seq
        ).order_by("seq")
    )
    return {"digest": digest, "roots": roots, "amended": digest.amendment}
