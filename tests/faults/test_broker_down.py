"""Fault: the broker (Redis) is down when beat's tick comes; it comes back later, empty.

Beat here is our real scheduler class (arena.beat.SingleBeatScheduler, which also keeps its lock
in that Redis) with the real `decide` and `snapshot` entries of arena/celery.py, ticked in this
process so the test controls when entries are due. A real worker subprocess does the work.
Proves: a tick during the outage fails cleanly (no exception out of tick(), which would end the
beat process, nothing half-published), and once Redis is back the next tick publishes and the
worker makes the missed work good (both tasks are idempotent catch-ups) — nothing lost.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from celery import Celery
from django.utils import timezone

from arena.beat import SingleBeatScheduler
from arena.celery import BEAT_SCHEDULE
from cohorts.models import Decision, Snapshot
from cohorts.services import open_cohort, week_start_for
from core.models import JobRun
from markets.models import Market
from tests.agents.helpers import baseline_competitor
from tests.factories import make_market
from tests.faults.conftest import child_env, wait_until, worker_args

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

ENTRIES = ("decide", "snapshot")


def _beat_app(broker_url: str) -> Celery:
    """The arena's Celery configuration, pointed at our private broker, with two real entries."""
    app = Celery("arena-beat-under-test", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.broker_url = broker_url
    app.conf.beat_schedule = {name: BEAT_SCHEDULE[name] for name in ENTRIES}
    return app


def _make_due(scheduler: SingleBeatScheduler) -> None:
    """Pretend the last runs were an hour ago: every entry is due now (as after an outage)."""
    for name in ENTRIES:
        scheduler.schedule[name].last_run_at = timezone.now() - timedelta(hours=1)
    scheduler._heap = None  # rebuilt from the entries on the next tick


def _tick_until_idle(scheduler: SingleBeatScheduler, budget: float) -> list[float]:
    """Tick like beat's loop does, without its sleeps, until it wants to wait; bounded time."""
    started, intervals = time.monotonic(), []
    while time.monotonic() - started < budget:
        intervals.append(scheduler.tick())
        if intervals[-1] > 0:
            return intervals
    pytest.fail(f"beat kept ticking for {budget} s")


def test_beat_tick_with_broker_down_fails_cleanly_and_the_next_tick_does_the_work(
    tmp_path, redis_server, procs, settings
):
    settings.CELERY_BROKER_URL = redis_server.url  # where the beat lock lives
    now = timezone.now()
    for _ in range(3):
        make_market(source=Market.Source.POLYMARKET, close_time=now + timedelta(days=30))
    comps = [baseline_competitor("favorite"), baseline_competitor("random")]
    cohort, _ = open_cohort(week_start_for(now), competitors=comps, at=now)
    entries = list(cohort.entries.values_list("pk", flat=True))

    # Never reach the real Polymarket, whatever the worker is asked to do.
    env = child_env(tmp_path, redis_server.url, ARENA_GAMMA_URL="http://127.0.0.1:9")
    worker = procs("worker", worker_args("w"), env)
    scheduler = SingleBeatScheduler(
        app=_beat_app(redis_server.url), schedule_filename=str(tmp_path / "beat-schedule")
    )
    try:
        assert scheduler.producer.connection.connected  # beat was up and connected
        wait_until(lambda: "ready" in worker.output(), 30, "the worker", procs=(worker,))

        redis_server.stop()
        _make_due(scheduler)
        _tick_until_idle(scheduler, budget=20)  # raises if a tick blows up
        assert not JobRun.objects.exists()  # nothing reached the worker
        assert not Decision.objects.exists()

        redis_server.start()  # back, and empty: no lock, no queues, no bindings
        _tick_until_idle(scheduler, budget=20)
        wait_until(
            lambda: Decision.objects.filter(status=Decision.Status.DONE).count() == len(entries),
            45, "every entry's decision", procs=(worker,),
        )  # fmt: skip
        wait_until(
            lambda: JobRun.objects.filter(job="snapshot", status=JobRun.Status.OK).exists(),
            30, "the snapshot run", procs=(worker,),
        )  # fmt: skip
    finally:
        scheduler.close()

    assert Decision.objects.filter(week=1).count() == len(entries)  # exactly one each
    assert set(Snapshot.objects.values_list("entry_id", flat=True)) == set(entries)
    assert not JobRun.objects.filter(status=JobRun.Status.FAILED).exists()
