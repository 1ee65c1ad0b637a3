"""ARENA_SCOPE=rehearsal: the unchanged live path (sync, open-cohort, freeze, decide, snapshot,
resolution, scoring) reads and writes only the rehearsal scope, against the Polymarket stand-in;
with the default (live) nothing it does reaches a rehearsal row, and a rehearsal process refuses
a database that holds live cohorts."""

from __future__ import annotations

import runpy
from datetime import timedelta
from io import StringIO

import pytest
from celery import signals
from django.core.management import CommandError, call_command

from agents.models import Competitor
from cohorts import snapshots
from cohorts import tasks as cohort_tasks
from cohorts.decisions import run as decisions
from cohorts.models import Cohort, Decision, Snapshot, Universe
from cohorts.scope import LiveDataPresent, exit_on_live_data, live_path_kind, refuse_live_data
from cohorts.seals.models import EventLogEntry, WeekSeal
from core.clock import SimulatedClock, running_on
from markets.clob import ClobClient
from markets.gamma import GammaClient
from markets.models import Market, PricePoint, live_path_source
from markets.sync import backfill_markets, sync_markets
from markets.upstream import resolve_markets
from scoring.models import ScoreRun
from scoring.tasks import scopes_with_cohorts, score_all
from scoring.tasks import score as score_task
from simulations.demo_plan import build_plan
from simulations.world import RESOLVE_DELAY, World
from tests.factories import make_cohort_with_entries, make_competitor, make_market
from tests.fixtures import WORLD_START

START = WORLD_START  # a Sunday: the first rehearsed week opens here

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def world() -> World:
    return World.of(build_plan(seed=11, weeks=2, n_markets=30, start=START))


@pytest.fixture
def rehearsal(settings):
    settings.ARENA_SCOPE = "rehearsal"


def _client(world_server) -> GammaClient:
    return GammaClient(world_server.url, timeout=2.0, retries=1, page_size=10, sleep=lambda s: None)


def test_the_live_path_names_its_scope_from_the_setting(settings):
    assert (live_path_kind(), live_path_source()) == ("live", "polymarket")
    settings.ARENA_SCOPE = "rehearsal"
    assert (live_path_kind(), live_path_source()) == ("rehearsal", "rehearsal")


def test_sync_writes_rehearsal_markets_and_leaves_polymarket_ones_alone(
    rehearsal, world, world_clock, world_server
):
    first = world.listed(START)[0].key
    # A real Polymarket market with the same upstream id, tracked: the rehearsal must not touch it.
    real = make_market("Real?", source=Market.Source.POLYMARKET, external_id=first, tracked=True,
                       url="https://polymarket.com/event/real")  # fmt: skip
    with running_on(world_clock):
        report = sync_markets(12, client=_client(world_server))
    assert report.stored == 12 and report.new == 12
    synced = Market.objects.exclude(pk=real.pk)
    assert set(synced.values_list("source", flat=True)) == {"rehearsal"}
    assert synced.count() == 12 and not synced.exclude(url="").exists()  # no fake polymarket links
    assert synced.filter(external_id=first).exists()
    real.refresh_from_db()
    assert (real.question, real.last_synced_at, real.tracked) == ("Real?", None, True)

    # Resolution follows the stand-in's world for rehearsal markets only.
    decided = min(
        (m for m in world.plan.markets
         if m.outcome and m.key != world.disputed_key and m.open_at <= START < m.close_at
         and synced.filter(external_id=m.key).exists()),
        key=lambda m: m.close_at,
    )  # fmt: skip
    world_clock.set(decided.close_at + RESOLVE_DELAY + timedelta(hours=2))
    with running_on(world_clock):
        report = resolve_markets(client=_client(world_server))
    assert report.checked >= 1
    assert Market.objects.get(source="rehearsal", external_id=decided.key).status in (
        Market.Status.RESOLVED,
        Market.Status.VOID,
    )
    real.refresh_from_db()
    assert real.status == Market.Status.OPEN


def test_backfill_fills_rehearsal_markets_from_the_standin(rehearsal, world_clock, world_server):
    with running_on(world_clock):
        sync_markets(4, client=_client(world_server))
    real = make_market("Real?", source=Market.Source.POLYMARKET, token_ids=["1", "2"])
    world_clock.set(START + timedelta(days=1))
    clob = ClobClient(world_server.url, timeout=2.0, retries=0)
    with running_on(world_clock):
        summary = backfill_markets(Market.objects.all(), days=1, client=clob)
    assert summary["markets"] == 4 and summary["points"] > 0 and summary["failed"] == 0
    assert not PricePoint.objects.filter(market=real).exists()
    assert PricePoint.objects.filter(market__source="rehearsal", ts__gt=START).exists()


def test_a_live_sync_never_touches_rehearsal_markets(world, world_clock, world_server):
    key = world.listed(START)[0].key
    mine = make_market("Rehearsed?", source=Market.Source.REHEARSAL, external_id=key, tracked=True)
    with running_on(world_clock):
        sync_markets(5, client=_client(world_server))
    mine.refresh_from_db()
    assert (mine.question, mine.last_synced_at) == ("Rehearsed?", None)
    assert Market.objects.filter(source="polymarket").count() == 5


def _rehearse_one_week(world_clock, world_server) -> Cohort:
    """What the rehearsal's beat does on its first Sunday, through the same entry points."""
    for strategy in (Competitor.Strategy.FAVORITE, Competitor.Strategy.LONGSHOT_FADER,
                     Competitor.Strategy.MARKET):  # fmt: skip
        make_competitor(f"rehearsed-{strategy}", strategy=strategy)
    with running_on(world_clock):
        sync_markets(20, client=_client(world_server))
        out = StringIO()
        call_command("arena", "open-cohort", stdout=out)
        assert "[Rehearsal]" in out.getvalue()
        world_clock.set(START + timedelta(minutes=5))
        decisions.decide(sync=True)
        world_clock.set(START + timedelta(minutes=10))
        assert snapshots.take_snapshot() == 3
        score_all()
    return Cohort.objects.get()


def test_the_beat_tasks_snapshot_seal_and_score_the_rehearsal(rehearsal, world_clock, world_server):
    cohort = _rehearse_one_week(world_clock, world_server)
    world_clock.set(START + timedelta(days=1))
    with running_on(world_clock):
        assert cohort_tasks.snapshot() == 3  # the beat's tick: settle, mark, advance, seal
        score_task()
    seal = WeekSeal.objects.get(cohort=cohort, week=1)
    assert seal.scope == "rehearsal"
    scopes = set(EventLogEntry.objects.values_list("scope", flat=True))
    assert scopes == {"rehearsal"}
    latest = ScoreRun.objects.filter(status=ScoreRun.Status.DONE).latest("finished_at")
    assert (latest.scope, latest.as_of) == ("rehearsal", START + timedelta(days=1))
    assert not ScoreRun.objects.filter(scope="live").exists()


def test_a_rehearsed_week_makes_only_rehearsal_rows(rehearsal, world_clock, world_server):
    cohort = _rehearse_one_week(world_clock, world_server)
    assert cohort.kind == Cohort.Kind.REHEARSAL and cohort.week_start == START
    universe = Universe.objects.get(cohort=cohort, week=1)
    ids = [item["market_id"] for item in universe.markets]
    assert ids and set(Market.objects.filter(pk__in=ids).values_list("source", flat=True)) == {
        "rehearsal"
    }
    assert set(Decision.objects.values_list("status", flat=True)) == {Decision.Status.DONE}
    assert Decision.objects.count() == 3
    assert Snapshot.objects.filter(entry__cohort=cohort).count() == 3
    runs = ScoreRun.objects.filter(status=ScoreRun.Status.DONE)
    assert list(runs.values_list("scope", flat=True)) == ["rehearsal"]
    assert runs.get().as_of == START + timedelta(minutes=10)  # the rehearsal's clock of record
    assert runs.get().rows.filter(cohort__isnull=True).count() == 3


def test_a_live_process_leaves_a_rehearsal_alone(world_clock):
    cohort, _ = make_cohort_with_entries(2, kind=Cohort.Kind.REHEARSAL, week_start=START)
    with running_on(SimulatedClock(START + timedelta(days=1))):
        assert decisions.decide(sync=True) == 0
        assert snapshots.take_snapshot() == 0
    assert "rehearsal" not in scopes_with_cohorts()
    assert not Universe.objects.exists() and not Snapshot.objects.exists()
    assert cohort.entries.count() == 2


# --- the live-data guard ------------------------------------------------------------------


# Sent here without a worker, the signals make Celery's Django fix-up warn about its sender.
@pytest.mark.filterwarnings("ignore::celery.exceptions.FixupWarning")
def test_a_rehearsal_refuses_a_database_holding_live_cohorts(settings, capsys):
    make_cohort_with_entries(1, kind=Cohort.Kind.LIVE)
    refuse_live_data()  # live: never refused
    settings.ARENA_SCOPE = "rehearsal"
    with pytest.raises(LiveDataPresent, match="holds 1 live cohort;"):
        refuse_live_data()

    # The operator's verbs: one line, nothing written.
    before = Cohort.objects.count()
    with pytest.raises(CommandError, match="refusing to run with ARENA_SCOPE=rehearsal"):
        call_command("arena", "open-cohort")
    assert Cohort.objects.count() == before

    # Web (exit 4: gunicorn's "App failed to load"), worker and beat.
    with pytest.raises(SystemExit) as exited:
        exit_on_live_data(code=4)
    assert exited.value.code == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "live cohort" in err
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("arena.wsgi")  # what gunicorn loads
    assert exited.value.code == 4
    for signal in (signals.worker_init, signals.beat_init):
        with pytest.raises(SystemExit) as exited:
            signal.send(sender=None)
        assert exited.value.code == 1


# Sent here without a worker, the signals make Celery's Django fix-up warn about its sender.
@pytest.mark.filterwarnings("ignore::celery.exceptions.FixupWarning")
def test_a_rehearsal_database_without_live_cohorts_passes(settings):
    settings.ARENA_SCOPE = "rehearsal"
    make_cohort_with_entries(1, kind=Cohort.Kind.DEMO)
    make_cohort_with_entries(1, kind=Cohort.Kind.REHEARSAL)
    refuse_live_data()
    signals.worker_init.send(sender=None)
