"""`arena demo`: a seeded, offline, clearly labelled synthetic history for a fresh install.

What it builds (source "demo" markets, kind "demo" cohorts, scope "demo" scores):
- a few hundred markets from question templates: mostly binary, some negRisk-like groups
  (several Yes/No markets of which exactly one resolves Yes), a few voided;
- a price path per market: the probability of Yes that a trader who sees noisy news about the
  outcome would state, news arriving faster as the close nears. The price is a calibrated
  forecast at every hour (among markets priced 0.3, about 30 % resolve Yes), so nobody beats
  the demo's market by merely stretching or copying it; early prices are uncertain and late
  ones nearly certain;
- N weekly demo cohorts of the active baseline competitors and the simulated model competitors
  (simulations/simllm.py), deciding every decision week through the real pipeline
  (freeze_universe + decide(sync=True, at=...)); the simulated ones are real HTTP calls to the
  simulated endpoint served in this process, which knows the plan's outcomes (the skilled
  forecaster peeks at them through noise) and nothing else;
- resolutions (market status) and settlements (settle_market), snapshots, and scores.

Only the clock is simulated: the same services as the live arena run at each tick.

Snapshot cadence: a 10-minute snapshot for every simulated 10 minutes would be ~1,000 ticks per
week; instead the last day before the demo's end is snapshotted every 10 minutes and everything
before it hourly (what the snapshot retention keeps for old data anyway), plus one snapshot at
every decision and settlement.

Safe to interrupt and re-run: the demo's latest snapshot is its clock, ticks at or before it are
not replayed, and every write underneath is idempotent (unique keys, conditional updates). The
history runs up to a fixed anchor (DEFAULT_ANCHOR unless `--anchor` says otherwise), never up to
the wall clock: two builds with the same options are the same rows, whenever and wherever they
run. A rerun with a later anchor continues, until the demo's last market has closed. The demo's
identity (seed, weeks, markets, start) is stored on its markets; a rerun with other options
refuses with a clear error unless `reset=True`, which deletes only demo data first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from agents.models import Competitor
from cohorts.decisions.run import decide
from cohorts.models import (
    Cohort,
    Decision,
    Entry,
    Forecast,
    LedgerEntry,
    Position,
    Settlement,
    Snapshot,
    Trade,
)
from cohorts.seals.sealing import delete_sealed
from cohorts.services import advance_cohorts, cohort_week, open_cohort, week_start_for
from cohorts.settlement import settle_market
from cohorts.snapshots import (
    Book,
    SnapshotRow,
    bucket_for,
    read_book,
    snapshot_cohorts,
    store_snapshots,
    value_book,
)
from cohorts.universe import freeze_universe
from core import clock
from markets.bulk import insert_rows
from markets.models import Market, PricePoint
from markets.resolution import record_resolution
from scoring.models import ScoreRun
from simulations.demo_plan import (  # noqa: F401  (the demo's public names)
    HOUR,
    DemoPlan,
    MarketPlan,
    build_plan,
    price_path,
)
from simulations.simllm import (
    SIMULATION_LATENCY_SCALE,
    MappingWorld,
    ensure_simulated_competitors,
    simulated_llm,
)

DEFAULT_WEEKS = 8
DEFAULT_SEED = 42
DEFAULT_MARKETS = 300
# Where the default demo's clock stops: a fixed instant in the past (a Wednesday noon, so the
# last week is half played), never the wall clock, so the default demo is the same history on
# every machine and at any time of day. `arena demo --anchor` moves it.
DEFAULT_ANCHOR = datetime(2026, 3, 11, 12, 0, tzinfo=UTC)
# The live arena runs a week's decisions side by side (one worker task each), so a week costs
# about its slowest answer; the demo runs the same decisions one after another inside the day's
# transaction, so every answer's wait adds up (~20 a week). A fifth of the replay's scale keeps
# the demo's total wait near what its weeks' parallel answers would take scaled by
# SIMULATION_LATENCY_SCALE, instead of ~18 s of sleeping.
DEFAULT_LATENCY_SCALE = SIMULATION_LATENCY_SCALE / 5
TEN_MINUTES = timedelta(minutes=10)
DECISION_DELAY = timedelta(minutes=5)  # like the live beat: open 00:00, decide 00:05
FINE_SNAPSHOT_SPAN = timedelta(days=1)
PRICE_HISTORY_EVERY = 4  # hours between stored PricePoints (the latest quote moves hourly)
LABEL = "Synthetic demo"
RESOLUTION_REASON = "demo plan: the market's planned outcome at its close"


class DemoError(Exception):
    """The demo cannot run as asked (e.g. another seed's demo exists): one line for the CLI."""


# --- the run -------------------------------------------------------------------------------


@dataclass
class DemoReport:
    plan: DemoPlan
    end: datetime
    ticks: int = 0
    cohorts: int = 0
    decisions: int = 0
    resolved: int = 0
    snapshots: int = 0
    model_calls: int = 0  # HTTP calls the simulated endpoint answered in this run
    score_run_id: int | None = None


def run_demo(
    *,
    weeks: int = DEFAULT_WEEKS,
    seed: int = DEFAULT_SEED,
    n_markets: int = DEFAULT_MARKETS,
    reset: bool = False,
    now: datetime | None = None,
    progress_factory: Callable[[int], object] | None = None,
    simulated: bool = True,
    latency_scale: float = DEFAULT_LATENCY_SCALE,
) -> DemoReport:
    """Build (or continue) the demo history up to `now`, its anchor (default DEFAULT_ANCHOR,
    never the wall clock: the same options build the same history whenever they run).

    `simulated`: new cohorts also enter the simulated model competitors (an existing cohort keeps
    the lineup it opened with). `latency_scale`: see DEFAULT_LATENCY_SCALE (0: no waiting)."""
    if weeks < 1:
        raise DemoError("--weeks must be at least 1")
    if reset:
        delete_demo_data()
    now = now or DEFAULT_ANCHOR
    if now.tzinfo is None:
        raise DemoError("the demo's anchor needs a time zone (UTC)")
    identity = _existing_identity()
    start = week_start_for(now) - timedelta(weeks=weeks - 1)
    if identity is not None:
        start = datetime.fromisoformat(identity["start"]).replace(tzinfo=UTC)
        wanted = {"seed": seed, "weeks": weeks, "markets": n_markets}
        if {k: identity.get(k) for k in wanted} != wanted:
            raise DemoError(
                f"a demo with seed {identity.get('seed')}, {identity.get('weeks')} weeks and "
                f"{identity.get('markets')} markets exists; rerun with those options to continue "
                "it, or pass --reset to delete the demo data and rebuild"
            )
    # Competitors (and so their first releases) made here are dated on the demo's clock, at its
    # first cohort, not on the machine's: a release is never younger than a cohort that ran it.
    with clock.running_on(clock.SimulatedClock(start)):
        competitors = _baselines() + (ensure_simulated_competitors() if simulated else [])
    plan = build_plan(seed=seed, weeks=weeks, n_markets=n_markets, start=start)
    end = _floor(min(now, plan.horizon))
    report = DemoReport(plan=plan, end=end)
    latest = demo_clock()
    ticks = [t for t in tick_times(plan, end) if latest is None or t > latest]
    # One step per tick, plus the markets before them and the score run after.
    progress = progress_factory(len(ticks) + 2) if progress_factory else None
    _phase(progress, "demo: markets and price history")
    _create_markets(plan, end)
    _advance(progress)
    sim = _Sim(plan, competitors, report)
    # The demo's clock of record: every service called in a tick reads the tick as now.
    demo_time = clock.SimulatedClock(ticks[0] if ticks else end)
    with (
        simulated_llm(_world(plan), latency_scale, now=demo_time) as endpoint,
        clock.running_on(demo_time),
    ):
        for day in _by_day(ticks):
            sunday = any(sim.is_decision_time(t) for t in day)
            _phase(progress, f"demo: {day[0]:%a %Y-%m-%d}, {_DAY_WORK[sunday]}")
            # One transaction per simulated day: per-statement commits (an fsync each on SQLite)
            # would dominate the run. An interrupted day rolls back whole and is redone next time.
            with transaction.atomic():
                for t in day:
                    demo_time.set(t)
                    sim.tick(t)
                sim.flush()
            _advance(progress, len(day))
        report.model_calls = endpoint.served
        demo_time.set(max(end, demo_time()))
        with transaction.atomic():
            sim.finish(end)
    from scoring.services import compute_scores

    _phase(progress, "demo: scores")
    # As of the demo's clock (its latest snapshot, `end`), like `arena score` and the hourly job.
    report.score_run_id = compute_scores("demo").pk
    if progress is not None:
        progress.advance()
        progress.close()
    return report


_DAY_WORK = {
    False: "resolving, settling, marking, snapshotting",
    True: "models deciding, then resolving, settling, marking, snapshotting",
}


def _phase(progress, name: str) -> None:
    """Name what the run is doing on the progress bar (core.progress.Progress draws `label`)."""
    if progress is not None:
        progress.label = name


def _advance(progress, n: int = 1) -> None:
    if progress is not None:
        progress.advance(n)


def _world(plan: DemoPlan) -> MappingWorld:
    """What the simulated endpoint may know: each demo market's outcome, by the id prompts show."""
    outcome = {m.key: m.outcome for m in plan.markets}
    ids = Market.objects.filter(source=Market.Source.DEMO).values_list("pk", "external_id")
    return MappingWorld({str(pk): outcome.get(key, "") for pk, key in ids})


def _by_day(ticks: list[datetime]) -> list[list[datetime]]:
    days: dict = {}
    for t in ticks:
        days.setdefault(t.date(), []).append(t)
    return list(days.values())


def _floor(at: datetime) -> datetime:
    return at.replace(minute=at.minute - at.minute % 10, second=0, microsecond=0)


def _baselines():
    from agents.services import ensure_default_lineup

    ensure_default_lineup()
    baselines = Competitor.objects.filter(kind=Competitor.Kind.BASELINE, active=True).order_by("pk")
    if not baselines.exists():
        raise DemoError("no active baseline competitor: the demo needs the baselines")
    return list(baselines)


def tick_times(plan: DemoPlan, end: datetime) -> list[datetime]:
    """Hourly, every 10 minutes in the last day, and each Sunday's decision time."""
    times = set()
    t = plan.start
    fine_from = end - FINE_SNAPSHOT_SPAN
    while t <= end:
        times.add(t)
        t += TEN_MINUTES if t >= fine_from else HOUR
    sunday = plan.start + DECISION_DELAY
    while sunday <= end:
        times.add(sunday)
        sunday += timedelta(weeks=1)
    times.add(end)
    return sorted(times)


def demo_clock() -> datetime | None:
    """How far the demo got: its latest snapshot (every tick ends with one)."""
    return Snapshot.objects.filter(entry__cohort__kind=Cohort.Kind.DEMO).aggregate(ts=Max("ts"))[
        "ts"
    ]


def _existing_identity() -> dict | None:
    market = Market.objects.filter(source=Market.Source.DEMO).order_by("pk").first()
    if market is None:
        return None
    return dict((market.raw or {}).get("demo") or {})


def _create_markets(plan: DemoPlan, end: datetime) -> None:
    """Insert the markets that have opened by `end` and their price history up to `end`."""
    rows = []
    for m in plan.markets:
        if m.open_at > end:
            continue
        rows.append(
            Market(
                source=Market.Source.DEMO,
                external_id=m.key,
                platform="demo",
                question=m.question,
                description=m.description,
                category=m.category,
                tags=["demo", m.category.lower()],
                kind=Market.Kind.BINARY if m.paths is None else Market.Kind.MULTI,
                outcomes=list(m.outcomes),
                neg_risk=bool(m.group),
                neg_risk_market_id=m.group,
                event_slug=m.group,
                event_title=m.group_title,
                group_item_title=m.item_title,
                open_time=m.open_at,
                close_time=m.close_at,
                volume=Decimal(str(round(m.volume, 2))),
                liquidity=Decimal(str(round(m.volume / 20, 2))),
                status=Market.Status.OPEN,
                last_prices=m.quote_at(m.open_at),
                last_priced_at=m.open_at,
                raw={"demo": plan.identity},
            )
        )
    Market.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    ids = dict(Market.objects.filter(source=Market.Source.DEMO).values_list("external_id", "pk"))
    points = []
    for m in plan.markets:
        pk = ids.get(m.key)
        if pk is None:
            continue
        last = min(end, m.close_at)
        for k in range(0, int((last - m.open_at) / HOUR) + 1, PRICE_HISTORY_EVERY):
            at = m.open_at + HOUR * k
            # A binary market's history is its Yes price; a larger one's, every outcome's.
            quote = m.quote_at(at) if m.paths is not None else {"Yes": m.price_at(at)}
            points += [
                {"market_id": pk, "outcome": name, "ts": at, "price": Decimal(price)}
                for name, price in quote.items()
            ]
    # Plain rows, not model instances: a demo's history is ~100k points, and building a model
    # instance per point cost more than writing it.
    with transaction.atomic():
        insert_rows(PricePoint, points, conflict="ON CONFLICT DO NOTHING")


class _Sim:
    """One tick at a time: resolve and settle, open/decide on Sundays, mark, snapshot.

    The live beat asks the database every tick; the demo knows its own plan, so it keeps in
    memory what only changes on a Sunday or a resolution (which markets are held, which cohorts
    are running) and calls the services only when something can have changed.
    """

    def __init__(self, plan: DemoPlan, competitors: list, report: DemoReport):
        self.plan = plan
        self.competitors = competitors
        self.report = report
        self.by_key = {m.key: m for m in plan.markets}
        still_open = Market.objects.filter(source=Market.Source.DEMO, status=Market.Status.OPEN)
        # (close time, pk, key) of every market still to resolve, soonest last (popped).
        self.closing = sorted(
            (
                (self.by_key[key].close_at, pk, key)
                for pk, key in still_open.values_list("pk", "external_id")
            ),
            reverse=True,
        )
        self.held: dict[int, str] | None = None  # pk -> key of open markets demo entries hold
        self.quoted: dict[int, dict[str, str]] = {}
        self.running: list[int] | None = None
        self.pending: list[SnapshotRow] = []  # computed at their tick, not stored yet
        # What the running entries hold, read once per stretch without events (see tick).
        self.book: Book | None = None

    def is_decision_time(self, t: datetime) -> bool:
        return (t - self.plan.start) % timedelta(weeks=1) == DECISION_DELAY

    def tick(self, t: datetime) -> None:
        sunday = self.is_decision_time(t)
        if sunday or self._settles_a_holding(t):
            # A settlement rewrites each touched entry's latest stored snapshot, so the ticks
            # before it must be stored first; a Sunday opens and fills cohorts, stored after
            # everything that came before them. A market nobody holds settles no entry.
            self.flush()
        changed = self._resolve_due(t)
        if sunday:
            self._sunday(t)
            changed = True
        if changed:
            advance_cohorts(at=t, cohorts=Cohort.objects.filter(kind=Cohort.Kind.DEMO).values("pk"))
            self.held = self.running = self.book = None
        self._mark(t)
        running = self._running(t)
        if running:
            # The tick's values are taken now, at t; they are stored with the next flush. Only
            # a Sunday or a resolution moves cash or positions (both reset the book above);
            # between them only the quotes move, and _mark hands the book each one it writes,
            # so the book values exactly as compute_snapshots' fresh read would.
            if self.book is None:
                self.book = read_book(snapshot_cohorts(t, running))
            self.pending += value_book(self.book, bucket_for(t))
        self.report.ticks += 1

    def flush(self) -> None:
        """Store the snapshots of the ticks since the last flush in one store_snapshots call.

        The same upsert and series fold as a tick's take_snapshot, but a series update costs
        about the same for one tick as for a day of them (locks, chunk rewrites, the scope
        overview), so between events the demo pays it once instead of once per tick.
        """
        self.report.snapshots += store_snapshots(self.pending)
        self.pending = []

    def finish(self, end: datetime) -> None:
        """Leave every open market quoting its price at the end, as a live sync would."""
        still_open = Market.objects.filter(source=Market.Source.DEMO, status=Market.Status.OPEN)
        quotes = {
            pk: self.by_key[key].quote_at(end)
            for pk, key in still_open.values_list("pk", "external_id")
        }
        _write_quotes(quotes, end)

    def _settles_a_holding(self, t: datetime) -> bool:
        """Does a market due at `t` have open demo positions?"""
        held = self._held()
        for close_at, pk, _key in reversed(self.closing):  # soonest first
            if close_at > t:
                return False
            if pk in held:
                return True
        return False

    def _resolve_due(self, t: datetime) -> bool:
        resolved_any = False
        while self.closing and self.closing[-1][0] <= t:
            _, pk, key = self.closing.pop()
            plan = self.by_key[key]
            # Settled by the resolution service at the demo's clock (t); no rescore request:
            # the demo scores its own scope at the end of the run.
            recorded = record_resolution(
                pk,
                status=Market.Status.RESOLVED if plan.outcome else Market.Status.VOID,
                outcome=plan.outcome,
                by=Market.ResolvedBy.DEMO,
                reason=RESOLUTION_REASON,
                at=plan.close_at,
                only_unresolved=True,
                rescore=False,
                market_fields={
                    "closed_time": plan.close_at,
                    "last_prices": plan.quote_at(plan.close_at),
                    "last_priced_at": plan.close_at,
                },
            )
            if recorded is not None:
                self.report.resolved += 1
            else:  # resolved by a run that stopped before settling: finish it
                settle_market(Market(pk=pk), at=t)
            resolved_any = True
        return resolved_any

    def _sunday(self, t: datetime) -> None:
        week_start = t - DECISION_DELAY
        if week_start < self.plan.start + timedelta(weeks=self.plan.weeks):
            _, created = open_cohort(
                week_start,
                kind=Cohort.Kind.DEMO,
                label=f"{LABEL} {week_start:%Y-%m-%d}",
                competitors=self.competitors,
                at=week_start,
            )
            self.report.cohorts += int(created)
        deciding = Cohort.objects.filter(
            kind=Cohort.Kind.DEMO, status=Cohort.Status.ACTIVE, week_start__lte=t
        ).order_by("week_start")
        markets, prices = self._universe(t)
        for cohort in deciding:
            week = cohort_week(cohort, t)
            if not 1 <= week <= cohort.decision_weeks:
                continue
            freeze_universe(cohort, week, t, markets=markets, prices=prices)
            self.report.decisions += decide(cohort=cohort, week=week, at=t, sync=True)

    def _universe(self, t: datetime) -> tuple[list[Market], dict[int, dict[str, str]]]:
        """Open demo markets trading at `t`, by volume, at their path price at `t`."""
        markets = list(
            Market.objects.filter(
                source=Market.Source.DEMO,
                status=Market.Status.OPEN,
                open_time__lte=t,
                close_time__gt=t,
            ).order_by("-volume", "id")[: settings.ARENA_MARKETS_PER_PROMPT]
        )
        prices = {m.pk: self.by_key[m.external_id].quote_at(t) for m in markets}
        return markets, prices

    def _held(self) -> dict[int, str]:
        """pk -> key of the open markets demo positions hold (reset by tick() on a change)."""
        if self.held is None:
            self.held = dict(
                Market.objects.filter(
                    positions__status=Position.Status.OPEN,
                    positions__entry__cohort__kind=Cohort.Kind.DEMO,
                    status=Market.Status.OPEN,
                )
                .distinct()
                .values_list("pk", "external_id")
            )
        return self.held

    def _mark(self, t: datetime) -> None:
        """Move the latest quote of markets demo positions hold (what snapshots read)."""
        changed = {}
        for pk, key in self._held().items():
            quote = self.by_key[key].quote_at(t)
            if self.quoted.get(pk) != quote:
                changed[pk] = self.quoted[pk] = quote
        _write_quotes(changed, t)
        if self.book is not None:
            self.book.requote(changed)

    def _running(self, t: datetime) -> list[int]:
        # Reset by tick() whenever a Sunday or a resolution may have changed the set.
        if self.running is None:
            self.running = list(
                Cohort.objects.filter(
                    kind=Cohort.Kind.DEMO,
                    status__in=[Cohort.Status.ACTIVE, Cohort.Status.TRACKING],
                    week_start__lte=t,
                ).values_list("pk", flat=True)
            )
        return self.running


def _write_quotes(quotes: dict[int, dict[str, str]], at: datetime) -> None:
    """Set last_prices/last_priced_at of many markets in one executemany.

    bulk_update compiles a CASE expression per row, which cost more than the rest of a tick
    together; a parameterised UPDATE run for each row is the same write at a fraction of it.
    Values go through the fields' own adapters, so JSON and datetimes are right per backend.
    """
    if not quotes:
        return
    table = connection.ops.quote_name(Market._meta.db_table)
    prices_field = Market._meta.get_field("last_prices")
    at_field = Market._meta.get_field("last_priced_at")
    sql = (
        f"UPDATE {table} SET {connection.ops.quote_name(prices_field.column)} = %s, "
        f"{connection.ops.quote_name(at_field.column)} = %s WHERE id = %s"
    )
    at_value = at_field.get_db_prep_value(at, connection)
    rows = [
        (prices_field.get_db_prep_value(quote, connection), at_value, pk)
        for pk, quote in quotes.items()
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


# --- reset ---------------------------------------------------------------------------------


def delete_demo_data() -> dict[str, int]:
    """Delete demo cohorts, markets and scores, and nothing else (children before parents,
    since the audit trail's foreign keys are PROTECT)."""
    demo_entries = Entry.objects.filter(cohort__kind=Cohort.Kind.DEMO)
    counts = {}
    with transaction.atomic():
        counts["seal records"] = delete_sealed(Cohort.Kind.DEMO)  # they protect what they seal
        for name, qs in [
            ("ledger", LedgerEntry.objects.filter(entry__in=demo_entries)),
            ("settlements", Settlement.objects.filter(position__entry__in=demo_entries)),
            ("trades", Trade.objects.filter(entry__in=demo_entries)),
            ("forecasts", Forecast.objects.filter(entry__in=demo_entries)),
            ("decisions", Decision.objects.filter(entry__in=demo_entries)),
            ("snapshots", Snapshot.objects.filter(entry__in=demo_entries)),
            ("positions", Position.objects.filter(entry__in=demo_entries)),
            ("cohorts", Cohort.objects.filter(kind=Cohort.Kind.DEMO)),
            ("score runs", ScoreRun.objects.filter(scope=ScoreRun.Scope.DEMO)),
            ("markets", Market.objects.filter(source=Market.Source.DEMO)),
        ]:
            counts[name] = qs.delete()[0]
    return counts
