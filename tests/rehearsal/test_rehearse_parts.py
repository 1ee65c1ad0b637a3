"""The parts of `arena rehearse` that need no running arena: the simulated endpoint's provider
faults as the arena's own client meets them, the fault schedule, the refusal of live data, and
beat ordering its heap on the wall clock whatever the arena's time."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import requests
from celery.beat import ScheduleEntry

from agents.attempts import LOST, SENT
from agents.llm import LLMClient
from arena.beat import SingleBeatScheduler
from arena.celery import BEAT_SCHEDULE, app
from cohorts.models import Cohort, Decision, LLMCall
from core import clock
from simulations.rehearsal.checks import check_health, check_model_calls
from simulations.rehearsal.faults import schedule
from simulations.rehearsal.http import HealthSample
from simulations.rehearsal.procs import RehearsalError
from simulations.rehearsal.run import Options, plan_start, refuse_live_data
from simulations.simllm import SimulatedLLMServer
from simulations.simmodels import CHARACTERS
from tests.factories import make_cohort_with_entries

MODEL = next(iter(CHARACTERS.values())).model_id
ASK = [{"role": "user", "content": "Say hello."}]
SUNDAY = datetime(2026, 12, 6, tzinfo=UTC)


@pytest.fixture
def endpoint():
    with SimulatedLLMServer(latency_scale=0) as server:
        yield server


def _client(server: SimulatedLLMServer, **kw) -> LLMClient:
    return LLMClient(
        server.base_url,
        None,
        **{"timeout": 1.0, "max_retries": 2, "backoff_base": 0.01, "max_backoff": 2.0, **kw},
    )


def test_a_429_with_retry_after_is_waited_out_then_answered(endpoint):
    endpoint.fail("status", status=429, retry_after="1")
    started = time.monotonic()
    result = _client(endpoint).chat(MODEL, ASK)
    assert time.monotonic() - started >= 0.9  # the server's Retry-After, not the tiny backoff
    assert [a.http_status for a in result.attempts][:1] == [429]
    assert result.attempts[-1].http_status == 200 and endpoint.faulted == 1


def test_a_402_is_not_retried_and_says_so(endpoint):
    endpoint.fail("status", status=402)
    response = requests.post(endpoint.base_url + "/chat/completions",
                             json={"model": MODEL, "messages": ASK}, timeout=5)  # fmt: skip
    assert response.status_code == 402 and "credits" in response.json()["error"]["message"]
    endpoint.fail("status", status=402)
    result = _client(endpoint).chat(MODEL, ASK)
    assert [a.http_status for a in result.attempts] == [402]


def test_a_stall_past_the_timeout_is_retried_and_the_queue_empties(endpoint):
    endpoint.fail("stall", stall=3.0)
    result = _client(endpoint, timeout=0.5).chat(MODEL, ASK)
    assert result.attempts[0].http_status is None and result.attempts[-1].http_status == 200
    assert endpoint.faults == [] and endpoint.faulted == 1
    # Without a queued fault it answers as it always did.
    assert _client(endpoint).chat(MODEL, ASK).attempts[-1].http_status == 200
    with pytest.raises(ValueError):
        endpoint.fail("explode")


def test_the_schedule_names_every_fault_and_why_one_is_skipped():
    full = schedule(SUNDAY, 2, postgres=True, redis=True)
    names = [f.name for f in full.faults]
    assert sorted(names) == sorted([
        "worker-kill", "gamma-5xx", "gamma-timeout", "gamma-malformed", "staff-corrections",
        "model-429", "model-402", "model-timeout", "redis-restart", "pg-kill"])  # fmt: skip
    assert [f.at for f in full.faults] == sorted(f.at for f in full.faults)
    assert all(SUNDAY - timedelta(hours=2) < f.at < SUNDAY + timedelta(days=8) for f in full.faults)
    assert len(full.lines()) == len(names)
    embedded = schedule(SUNDAY, 2, postgres=False, redis=False)
    embedded.faults = [f for f in embedded.faults if f.name in ("pg-kill", "redis-restart")]
    skipped = embedded.run_due(stage=None, now=SUNDAY + timedelta(days=30))  # type: ignore[arg-type]
    notes = {f.name: f.detail for f in skipped if f.skipped}
    assert notes["pg-kill"] == "not injected: the database is SQLite"
    assert notes["redis-restart"] == "not injected: the broker is the embedded one, not Redis"


@pytest.mark.django_db
def test_a_database_with_live_cohorts_is_refused_and_a_rehearsal_starts_after_every_cohort():
    cohort, _ = make_cohort_with_entries(1, kind=Cohort.Kind.REHEARSAL, week_start=SUNDAY)
    assert plan_start(Options()) >= SUNDAY + timedelta(days=7 * (cohort.decision_weeks + 1))
    refuse_live_data()  # only rehearsal data: fine
    make_cohort_with_entries(1)
    with pytest.raises(RehearsalError, match="holds 1 live cohort"):
        refuse_live_data()


def test_beat_orders_crontabs_and_the_heartbeat_on_the_wall_clock(tmp_path):
    """Arena time a month ahead of the wall: a crontab due in 15 arena minutes comes a fraction
    of a wall second from now, the heartbeat in 60 wall seconds; neither starves the other."""
    wall = clock.wall()
    clock.configure(clock.AcceleratedClock(wall + timedelta(days=30), wall, 3600))
    try:
        scheduler = SingleBeatScheduler(app=app, lazy=True,
                                        schedule_filename=str(tmp_path / "schedule"))  # fmt: skip
        sync = ScheduleEntry(name="sync", app=app, **BEAT_SCHEDULE["sync-markets"])
        beat = ScheduleEntry(name="heartbeat", app=app, **BEAT_SCHEDULE["heartbeat"])
        now = clock.wall().timestamp()
        assert now <= scheduler._when(sync, 900) <= now + 1.5  # 900 / 3600 s
        assert now + 59 <= scheduler._when(beat, 60) <= now + 61
    finally:
        clock.configure(None)


def test_beat_holds_periodic_work_back_while_a_backlog_waits(tmp_path, monkeypatch, caplog):
    """With ARENA_BEAT_MAX_BACKLOG (a rehearsal's), a crontab due while that many messages wait
    in the queue is not sent; the heartbeat (wall clock) always is; unset (live), all are."""
    from django.test.utils import override_settings

    import arena.beat

    inbox = tmp_path / "in"
    inbox.mkdir()
    for i in range(3):
        (inbox / f"{i}.msg").write_text("{}")
    scheduler = SingleBeatScheduler(app=app, lazy=True, schedule_filename=str(tmp_path / "s"))
    sync = ScheduleEntry(name="sync", app=app, **BEAT_SCHEDULE["sync-markets"])
    beat = ScheduleEntry(name="heartbeat", app=app, **BEAT_SCHEDULE["heartbeat"])
    options = {"data_folder_in": str(inbox)}
    held = "not sending sync: 3 messages already wait for a worker"
    with override_settings(CELERY_BROKER_URL="filesystem://",
                           CELERY_BROKER_TRANSPORT_OPTIONS=options):  # fmt: skip
        assert scheduler._backlog() == 3
        monkeypatch.setattr(arena.beat, "MAX_BACKLOG", 3)
        with caplog.at_level("INFO", logger="arena.beat"):
            scheduler.apply_entry(sync)
            scheduler.apply_entry(beat)
        assert held in caplog.text and "not sending heartbeat" not in caplog.text
        caplog.clear()
        monkeypatch.setattr(arena.beat, "MAX_BACKLOG", 4)
        with caplog.at_level("INFO", logger="arena.beat"):
            scheduler.apply_entry(sync)
        assert "not sending" not in caplog.text


def _health_run(samples, outages):
    return SimpleNamespace(health=SimpleNamespace(samples=samples), outages=outages)


def test_an_error_answer_to_a_request_in_flight_when_a_fault_began_is_inside_its_outage():
    ok = HealthSample(100.0, "a", 200, "ok", "ok", "ok", "ok", answered=100.1)
    # Sent at 110.0, before the backends were killed at 110.3; its query died under it.
    killed = HealthSample(110.0, "a", 503, "error", "ok", "error", "unknown", answered=110.4)
    outage = {"what": "database", "start": 110.3, "end": 112.3, "required": False}
    assert check_health(_health_run([ok, killed], [outage])).ok

    # The same answer to a request that was over before the fault began is a false alarm.
    early = HealthSample(110.0, "a", 503, "error", "ok", "error", "unknown", answered=110.2)
    check = check_health(_health_run([ok, early], [outage]))
    assert not check.ok and "1 error answers outside any outage" in check.detail

    # A required outage no sample overlapped was never reported.
    check = check_health(_health_run([ok], [{**outage, "required": True}]))
    assert not check.ok and "was never reported" in check.detail


def test_an_outage_the_run_did_not_cause_before_the_first_heartbeat_fails_the_check():
    starting = HealthSample(100.0, "a", 503, "error", "ok", "ok", "down", answered=100.1)
    broker_down = HealthSample(101.0, "a", 503, "error", "error", "ok", "down", answered=101.1)
    ok = HealthSample(102.0, "a", 200, "ok", "ok", "ok", "ok", answered=102.1)
    # No worker yet is the start-up, excused on its own.
    assert check_health(_health_run([starting, ok], [])).ok
    # The broker down before the first heartbeat, with no fault of the run's: a failure.
    check = check_health(_health_run([starting, broker_down, ok], []))
    assert not check.ok and "1 error answers outside any outage" in check.detail
    # The same answer inside an outage the run caused is that outage, seen.
    outage = {"what": "broker", "start": 100.5, "end": 101.5, "required": True}
    assert check_health(_health_run([starting, broker_down, ok], [outage])).ok


@pytest.mark.django_db
def test_the_model_calls_check_counts_requests_against_records():
    cohort, (entry,) = make_cohort_with_entries(1)
    now = clock.now()
    decision = Decision.objects.create(entry=entry, week=1, claimed_at=now,
                                       takeovers=[{"from": "a", "to": "b", "lost_calls": 1}])  # fmt: skip
    url = "http://127.0.0.1:8765/v1/chat/completions"

    def calls(*kinds: str) -> None:
        LLMCall.objects.filter(decision=decision).delete()
        LLMCall.objects.bulk_create([LLMCall(decision=decision, attempt=n, url=url, error_kind=k,
                                             started_at=now) for n, k in enumerate(kinds, 1)])  # fmt: skip

    def check(requests: int, killed: bool = True):
        fault = {"name": "worker-kill", "injected": killed}
        run = SimpleNamespace(model_requests=requests, cohort_ids=[cohort.pk], faults=[fault])
        return check_model_calls(run)

    calls(LOST, "")
    assert check(2).ok  # the killed worker's request and the one sent again, both on record
    assert not check(3).ok  # a request the models saw with no record of it
    # Killed after its row was committed, before the request left: a lost record, no request.
    assert check(1).ok and not check(0).ok
    calls(SENT, "")
    assert not check(2).ok  # a call still "sent" after the run: nobody marked it lost
    calls("", "")
    nothing_lost = check(2)  # every request on record, yet the kill left no trace
    assert not nothing_lost.ok
    assert "killed mid-call but no call is on the record as lost" in nothing_lost.detail
    assert check(2, killed=False).ok
