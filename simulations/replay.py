"""ForecastBench replay: real historical questions run through the arena on a simulated clock.

A ForecastBench question set (published every two weeks) lists ~500 questions with the market
price (or community forecast) at freeze time; its resolution set says later how each resolved.
The market questions (polymarket, manifold, metaculus, infer) become replay markets; each set
becomes one replay cohort whose universe is exactly that set's market questions, priced at the
freeze values. The active competitors (or, with `simulated`, the active baselines and the simulated
model competitors, never together with real models) decide once, at the set's due date; then the
replay clock walks through the resolution dates, moving prices, resolving markets, settling,
snapshotting and finally scoring, with the same services live cohorts use (only the clock is
simulated).

Reading and validation (no database) live in simulations.forecastbench; the writes here.

Why every set gets its own copy of a market (external_id "<due>:<platform>:<id>"): the same
question appears in up to 21 sets with a different freeze value each, and a market has one
status and one latest price. Shared markets would tie the sets to one global clock: replaying
the 2025-10-26 set resolves markets that the 2025-11-09 set must still trade. Own copies keep
every set a self-contained world, importable alone, in any order. The platform is part of the
id because metaculus and infer both use small integers as question ids.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Max

from agents.models import Competitor
from cohorts.decisions.run import decide
from cohorts.models import Cohort, Decision, Snapshot
from cohorts.services import advance_cohorts, open_cohort, week_start_for
from cohorts.settlement import settle_market
from cohorts.snapshots import take_snapshot
from cohorts.universe import freeze_universe
from core import clock
from markets.models import Market, PricePoint
from markets.pricing import PRICE_PLACES
from markets.resolution import record_resolution
from simulations.forecastbench import (  # noqa: F401  (the replay's public names)
    OUTCOMES,
    PUBLIC_BASE_URL,
    ReplayError,
    ReplayQuestion,
    ReplaySet,
    Resolution,
    SetFiles,
    load_sets,
    parse_set,
)
from simulations.simllm import MappingWorld, ensure_simulated_competitors, simulated_llm

log = logging.getLogger(__name__)

# Like the live beat: cohorts open Sunday 00:00 UTC and decide at 00:05.
DECISION_DELAY = timedelta(minutes=5)
# A resolution never lands in the decision's own 10-minute snapshot bucket.
MIN_EVENT_GAP = timedelta(minutes=10)
SIMULATED_LABEL = "simulated models"
SIMULATED_NOTE = (
    "Simulated models (labelled 'simulated') are the arena's built-in seeded forecasters, not "
    "real models: no training data, no cost. The skilled one reads this set's resolutions through "
    "noise, so its score shows what skill over the market looks like, not what a model can do."
)
CUTOFF_WARNING = (
    "Warning: this is a replay of past questions. A model may already know outcomes that "
    "predate its training cutoff, so its scores here can be better than it could do live."
)


# --- writing: markets ---------------------------------------------------------------------


def upsert_markets(rs: ReplaySet) -> dict[str, Market]:
    """Create the set's markets if missing; returns {external_id: Market}. Idempotent.

    An existing market is left alone: its status and latest price belong to the replay clock.
    """
    ids = [rs.external_id(q) for q in rs.questions]
    existing = set(
        Market.objects.filter(source=Market.Source.FORECASTBENCH, external_id__in=ids).values_list(
            "external_id", flat=True
        )
    )
    new = [_market(rs, q) for q in rs.questions if rs.external_id(q) not in existing]
    Market.objects.bulk_create(new, ignore_conflicts=True, batch_size=500)
    markets = Market.objects.filter(source=Market.Source.FORECASTBENCH, external_id__in=ids)
    return {m.external_id: m for m in markets}


def _market(rs: ReplaySet, q: ReplayQuestion) -> Market:
    return Market(
        source=Market.Source.FORECASTBENCH,
        external_id=rs.external_id(q),
        platform=q.platform,
        condition_id=q.qid if q.platform == "polymarket" else "",
        event_slug=rs.slug,
        event_title=rs.label,
        url=q.url,
        question=q.question,
        description=q.description,
        category=q.platform,
        tags=["forecastbench", q.platform],
        kind=Market.Kind.BINARY,
        outcomes=list(OUTCOMES),
        open_time=q.open_time,
        close_time=q.close_time,
        status=Market.Status.OPEN,
        last_prices=_quote(q.freeze_value),
        last_priced_at=_midnight(rs.due),
        raw=q.raw,
    )


def _quote(yes: Decimal) -> dict[str, str]:
    return {OUTCOMES[0]: str(yes), OUTCOMES[1]: str((1 - yes).quantize(PRICE_PLACES))}


def _midnight(d: date) -> datetime:
    return datetime.combine(d, time(0), tzinfo=UTC)


def set_prices(prices: dict[int, Decimal], at: datetime, *, latest: bool = True) -> None:
    """Record Yes prices at `at` (PricePoint history) and, if `latest`, as the markets' quote."""
    if not prices:
        return
    PricePoint.objects.bulk_create(
        [PricePoint(market_id=pk, outcome=OUTCOMES[0], ts=at, price=p) for pk, p in prices.items()],
        ignore_conflicts=True,
        batch_size=1000,
    )
    if latest:
        markets = list(Market.objects.filter(pk__in=prices).only("pk"))
        for m in markets:
            m.last_prices = _quote(prices[m.pk])
            m.last_priced_at = at
        Market.objects.bulk_update(markets, ["last_prices", "last_priced_at"], batch_size=500)


def resolve_market(market_id: int, outcome: str, at: datetime, reason: str) -> bool:
    """Open -> resolved through the one resolution service (audit row, settlement, event log);
    False when the market was already resolved (a rerun or a racing run is a no-op). No rescore
    request: the replay scores its own scope once, at the end of the import."""
    recorded = record_resolution(
        market_id,
        status=Market.Status.RESOLVED,
        outcome=outcome,
        by=Market.ResolvedBy.REPLAY,
        reason=reason,
        at=at,
        only_unresolved=True,
        rescore=False,
        market_fields={"closed_time": at},
    )
    return recorded is not None


# --- writing: the replay clock ------------------------------------------------------------


@dataclass
class Step:
    """What happens at one instant of the replay clock."""

    at: datetime
    prices: dict[int, Decimal] = field(default_factory=dict)  # market pk -> later Yes price
    resolutions: dict[int, str] = field(default_factory=dict)  # market pk -> outcome


@dataclass
class SetReport:
    due: date
    cohort_id: int
    created: bool
    markets: int
    skipped: Counter
    warnings: int
    resolved: int
    steps: int
    decisions: Counter
    clock: datetime | None
    held: int = 0  # steps dated after the import's today, left for a later import
    held_until: datetime | None = None  # the latest of them


def decision_time(due: date) -> datetime:
    return week_start_for(_midnight(due)) + DECISION_DELAY


def timeline(rs: ReplaySet, markets: dict[str, Market]) -> list[Step]:
    """The set's later prices and resolutions, grouped by instant, in clock order."""
    earliest = decision_time(rs.due) + MIN_EVENT_GAP
    steps: dict[datetime, Step] = {}
    for q in rs.questions:
        market = markets[rs.external_id(q)]
        for res in q.resolutions:
            at = max(_midnight(res.on), earliest)
            step = steps.setdefault(at, Step(at))
            if res.resolved:
                step.resolutions[market.pk] = q.outcome
            else:
                step.prices[market.pk] = res.value
    return [steps[at] for at in sorted(steps)]


def _check_lineup(rs: ReplaySet, cohort: Cohort, simulated: bool) -> None:
    models = set(
        cohort.entries.filter(competitor__kind=Competitor.Kind.LLM).values_list(
            "competitor__simulated", flat=True
        )
    )
    if simulated and False in models:
        raise ReplayError(
            f"{rs.label}: cohort {cohort.pk} was replayed with real models; simulated models "
            "never share a cohort with them (replay another set, or use a fresh database)"
        )
    if not simulated and True in models:
        raise ReplayError(
            f"{rs.label}: cohort {cohort.pk} holds simulated models; rerun with --simulated"
        )


def replay_clock(cohort: Cohort) -> datetime | None:
    """How far the cohort's replay got: its latest snapshot (every step ends with one)."""
    return Snapshot.objects.filter(entry__cohort=cohort).aggregate(ts=Max("ts"))["ts"]


def replay_set(
    rs: ReplaySet,
    *,
    competitors=None,
    on_step: Callable[[], None] | None = None,
    now: datetime | None = None,
    simulated: bool = False,
) -> SetReport:
    """Run one set end to end (idempotent: a rerun continues where the clock stopped).

    The cohort's latest snapshot is the replay clock: steps at or before it are done and are
    not replayed (a replayed step would rewrite old snapshots with today's state). Rows a newer
    resolution set adds before the clock are applied at the next step.

    The clock never passes today (`now`, the wall clock by default): a row dated in the future
    (ForecastBench dates some early-resolved market questions at their scheduled end) is held
    back, counted in the report, and applied by an import run on or after its date. Scores are
    computed as of the replay clock, so they never show a date after today either.

    `simulated`: the set is answered by simulated models (the caller serves their endpoint); a
    set's cohort holds either simulated or real models, never both, so a set already replayed
    the other way is refused.
    """
    now = now or clock.now()
    start = week_start_for(_midnight(rs.due))
    decide_at = decision_time(rs.due)
    if decide_at > now:
        raise ReplayError(f"{rs.label}: its decision time {decide_at:%Y-%m-%d %H:%M} is after now")
    label = f"{rs.label} · {SIMULATED_LABEL}" if simulated else rs.label
    if competitors is None and not simulated:
        # The active lineup, less any simulated competitor an operator activated to test it.
        competitors = Competitor.objects.filter(active=True, simulated=False).order_by("pk")
    cohort, created = open_cohort(
        start, kind=Cohort.Kind.REPLAY, label=label, competitors=competitors, at=start
    )
    _check_lineup(rs, cohort, simulated)
    if created:
        # A replay decides once, at the due date; from week 2 on it only tracks.
        Cohort.objects.filter(pk=cohort.pk).update(decision_weeks=1)
        cohort.decision_weeks = 1
    markets = upsert_markets(rs)
    latest = replay_clock(cohort)
    if latest is None:
        _open_and_decide(rs, cohort, markets, start, decide_at)
        latest = replay_clock(cohort) or decide_at
    _write_notes(cohort, rs)
    steps = _pending(timeline(rs, markets), latest)
    held = [step for step in steps if step.at > now]
    steps = [step for step in steps if step.at <= now]
    resolved = _walk(cohort, steps, latest, f"ForecastBench resolution set {rs.due}", on_step)
    decisions = Counter(
        Decision.objects.filter(entry__cohort=cohort).values_list("status", flat=True)
    )
    return SetReport(
        due=rs.due,
        cohort_id=cohort.pk,
        created=created,
        markets=len(markets),
        skipped=rs.skip_summary(),
        warnings=len(rs.warnings),
        resolved=resolved,
        steps=len(steps),
        decisions=decisions,
        clock=replay_clock(cohort),
        held=len(held),
        held_until=max((step.at for step in held), default=None),
    )


def _walk(
    cohort: Cohort,
    steps: list[Step],
    latest: datetime,
    reason: str,
    on_step: Callable[[], None] | None,
) -> int:
    """Apply the steps on the replay's clock of record: every service called inside (the
    resolution service, settlement, seals, the event log, snapshots) reads the step's instant
    as now, so what a step writes is stamped with replay time, never the wall clock."""
    resolved = 0
    replay_time = clock.SimulatedClock(latest)
    with clock.running_on(replay_time):
        for step in steps:
            replay_time.set(step.at)
            # All or nothing per step: an interrupted step leaves no half-moved latest behind.
            with transaction.atomic():
                resolved += apply_step(cohort, step, reason=reason)
            if on_step:
                on_step()
    return resolved


def _open_and_decide(
    rs: ReplaySet, cohort: Cohort, markets: dict[str, Market], start: datetime, decide_at: datetime
) -> None:
    """The cohort's first instant: freeze prices, the universe of exactly this set, decisions."""
    ordered = [markets[rs.external_id(q)] for q in rs.questions]
    freeze = {markets[rs.external_id(q)].pk: q.freeze_value for q in rs.questions}
    set_prices(freeze, start)
    freeze_universe(
        cohort,
        1,
        decide_at,
        markets=ordered,
        prices={pk: _quote(value) for pk, value in freeze.items()},
        sample_size=len(ordered),
    )
    decide(cohort=cohort, week=1, at=decide_at, sync=True)
    # Decisions are claimed on the machine's clock, not the replay's: a claim's staleness says
    # whether the process holding it is still alive, and a rerun must be able to reclaim it.
    # The first snapshot starts the clock, after which the decision instant is never revisited;
    # a claim left by an interrupted run must be finished (reclaimed) before that.
    if Decision.objects.filter(entry__cohort=cohort, status=Decision.Status.CLAIMED).exists():
        raise ReplayError(
            f"{rs.label}: a decision of cohort {cohort.pk} is still claimed by an interrupted run; "
            "rerun after ARENA_CLAIM_TIMEOUT_SECONDS so it is reclaimed"
        )
    take_snapshot(at=decide_at, cohorts=[cohort])


def _pending(steps: list[Step], latest: datetime) -> list[Step]:
    """Steps after the clock; late rows (dated at or before it) fold into the next step."""
    late = Step(latest + MIN_EVENT_GAP)
    pending = []
    for step in steps:
        if step.at > latest:
            pending.append(step)
            continue
        set_prices(step.prices, step.at, latest=False)  # history only: the quote moved on
        open_ids = set(
            Market.objects.filter(pk__in=step.resolutions, status=Market.Status.OPEN).values_list(
                "pk", flat=True
            )
        )
        late.resolutions.update({pk: o for pk, o in step.resolutions.items() if pk in open_ids})
    if late.resolutions:
        if pending:
            pending[0].resolutions = {**late.resolutions, **pending[0].resolutions}
        else:
            pending.append(late)
    return pending


def apply_step(cohort: Cohort, step: Step, *, reason: str) -> int:
    """Prices, resolutions, settlement, lifecycle and a snapshot at one instant."""
    set_prices(step.prices, step.at)
    resolved = 0
    for pk, outcome in sorted(step.resolutions.items()):
        if resolve_market(pk, outcome, step.at, reason):
            resolved += 1
        else:  # resolved by an earlier run that may have stopped before settling: finish it
            settle_market(Market(pk=pk), at=step.at)
    advance_cohorts(at=step.at, cohorts=[cohort.pk])
    take_snapshot(at=step.at, cohorts=[cohort])
    return resolved


def _write_notes(cohort: Cohort, rs: ReplaySet) -> None:
    """The leakage warning and each entrant's declared knowledge cutoff, shown on the site."""
    competitors = (
        Competitor.objects.filter(entries__cohort=cohort)
        .distinct()
        .order_by("kind", "display_name")
    )
    lines = [
        f"Replay of the ForecastBench question set due {rs.due} ({len(rs.questions)} market "
        "questions; source: forecastingresearch/forecastbench-datasets, CC BY-SA 4.0).",
        CUTOFF_WARNING,
        "Prices are the freeze values: market prices for Polymarket and Manifold, community "
        "forecasts for Metaculus and INFER (traded here as if they were prices).",
        "Knowledge cutoffs:",
    ]
    for c in competitors:
        if c.kind == Competitor.Kind.BASELINE or c.simulated:
            continue
        if c.knowledge_cutoff is None:
            lines.append(f"- {c.display_name}: not declared")
        else:
            flag = (
                " (after the due date: may know outcomes)" if c.knowledge_cutoff >= rs.due else ""
            )
            lines.append(f"- {c.display_name}: {c.knowledge_cutoff}{flag}")
    lines.append("- baselines: no training data (they only read the prices)")
    if any(c.simulated for c in competitors):
        lines.append(SIMULATED_NOTE)
    if rs.skipped:
        reasons = ", ".join(f"{n} {kind}" for kind, n in sorted(rs.skip_summary().items()))
        lines.append(f"Rows skipped as invalid: {reasons}.")
    notes = "\n".join(lines)
    if cohort.notes != notes:
        Cohort.objects.filter(pk=cohort.pk).update(notes=notes)
        cohort.notes = notes


# --- the whole import ---------------------------------------------------------------------


@dataclass
class ReplayResult:
    sets: list[ReplaySet]
    reports: list[SetReport]
    score_run_id: int | None


def replay(
    location: str,
    dues: Iterable[date] = (),
    *,
    competitors=None,
    score: bool = True,
    progress_factory: Callable[[int], object] | None = None,
    now: datetime | None = None,
    simulated: bool = False,
    latency_scale: float = 0.0,
) -> ReplayResult:
    """Read, validate and replay every set at `location`; score the replay scope once at the end.

    Nothing dated after `now` (default: the wall clock) is applied; see replay_set.
    `simulated`: the active baselines and the simulated model competitors answer (instead of the
    active lineup), through the simulated endpoint served in this process for the run; it knows
    the sets' resolutions (the skilled forecaster peeks at them through noise).
    """
    now = now or clock.now()
    files = load_sets(location, dues)
    sets = [parse_set(f) for f in files]
    total = sum(len({r.on for q in s.questions for r in q.resolutions}) + 1 for s in sets)
    world = None
    if simulated:
        if competitors is None:
            baselines = Competitor.objects.filter(kind=Competitor.Kind.BASELINE, active=True)
            competitors = [*baselines.order_by("pk"), *ensure_simulated_competitors()]
        world = _world(sets)
    progress = progress_factory(total) if progress_factory else None
    reports = []
    with simulated_llm(world, latency_scale) if simulated else contextlib.nullcontext():
        for rs in sets:
            reports.append(
                replay_set(
                    rs,
                    competitors=competitors,
                    on_step=_advance(progress),
                    now=now,
                    simulated=simulated,
                )
            )
            if progress is not None:
                progress.advance()
    if progress is not None:
        progress.close()
    run_id = None
    if score and reports:
        from scoring.services import compute_scores

        # As of the scope's own clock (the furthest replay clock of any replay cohort, not just
        # this import's), the instant `arena score` and the hourly job use too.
        run_id = compute_scores("replay").pk
    return ReplayResult(sets=sets, reports=reports, score_run_id=run_id)


def _world(sets: list[ReplaySet]) -> MappingWorld:
    """Each set's outcomes, by the market ids its prompts show (the simulated endpoint's world)."""
    outcomes = {}
    for rs in sets:
        markets = upsert_markets(rs)
        for q in rs.questions:
            outcomes[str(markets[rs.external_id(q)].pk)] = q.outcome or ""
    return MappingWorld(outcomes)


def _advance(progress) -> Callable[[], None] | None:
    return progress.advance if progress is not None else None
