"""The accelerated clock: arena time = start + rate x (wall time since a shared anchor), from
the environment, in every process; beat evaluates its schedule on it; without it, the wall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import clock
from tests.faults.conftest import Proc, wait_until

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 11, 22, 0, 0, 30, tzinfo=UTC)  # a Sunday, just after midnight


def test_arena_time_is_start_plus_rate_times_wall_time_since_the_anchor():
    anchor = clock.wall() - timedelta(seconds=10)
    accelerated = clock.AcceleratedClock(START, anchor, 60)
    before = clock.wall()
    now = accelerated()
    after = clock.wall()
    assert START + (before - anchor) * 60 <= now <= START + (after - anchor) * 60
    assert now >= START + timedelta(minutes=10)


def test_the_environment_configures_it_and_live_stays_the_wall_clock():
    assert clock.from_environment({}) is None
    env = {"ARENA_CLOCK_START": "2026-11-22T00:00:30Z", "ARENA_CLOCK_RATE": "120",
           "ARENA_CLOCK_ANCHOR": "2026-11-26T10:00:00+00:00"}  # fmt: skip
    configured = clock.from_environment(env)
    assert configured is not None
    assert (configured.start, configured.rate) == (START, 120.0)
    assert configured.anchor == datetime(2026, 11, 26, 10, tzinfo=UTC)
    only_rate = clock.from_environment({"ARENA_CLOCK_RATE": "10"})
    assert only_rate is not None and only_rate.start == only_rate.anchor  # starts now


@pytest.mark.parametrize(
    "env, message",
    [
        ({"ARENA_CLOCK_RATE": "fast"}, "ARENA_CLOCK_RATE must be a number, got 'fast'"),
        ({"ARENA_CLOCK_RATE": "0"}, "ARENA_CLOCK_RATE must be above 0, got '0'"),
        ({"ARENA_CLOCK_RATE": "-2"}, "ARENA_CLOCK_RATE must be above 0, got '-2'"),
        ({"ARENA_CLOCK_RATE": "nan"}, "ARENA_CLOCK_RATE must be above 0, got 'nan'"),
        ({"ARENA_CLOCK_START": "Sunday"}, "ARENA_CLOCK_START must be an ISO 8601 instant"),
        ({"ARENA_CLOCK_START": "2026-11-22T00:00:00"}, "ARENA_CLOCK_START needs a UTC offset"),
    ],
)
def test_bad_settings_are_refused_in_one_line(env, message):
    with pytest.raises(clock.ClockConfigError) as refused:
        clock.from_environment(env)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_a_configured_process_reads_it_and_a_scope_still_overrides_it():
    try:
        clock.configure(clock.AcceleratedClock(START, clock.wall(), 1000))
        assert START <= clock.now() < START + timedelta(hours=1)
        assert clock.rate() == 1000
        at = datetime(2024, 3, 3, tzinfo=UTC)
        with clock.running_on(lambda: at):
            assert clock.now() == at
        assert clock.wall().year == datetime.now(UTC).year  # noqa: TID251 (the machine's clock)
    finally:
        clock.configure(None)
    assert clock.rate() == 1.0
    assert abs(clock.now() - clock.wall()) < timedelta(seconds=5)


def test_every_process_given_the_environment_runs_on_it(tmp_path):
    env = dict(os.environ, ARENA_CLOCK_START="2030-01-06T00:00:00Z", ARENA_CLOCK_RATE="3600",
               ARENA_CLOCK_ANCHOR=clock.wall().isoformat())  # fmt: skip
    code = "from core import clock; print(clock.now().isoformat())"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60).stdout  # fmt: skip
    seen = datetime.fromisoformat(out.strip())
    # An hour of arena time per wall second since the anchor: days ahead, never before start.
    assert datetime(2030, 1, 6, tzinfo=UTC) < seen < datetime(2030, 3, 1, tzinfo=UTC)


@pytest.mark.slow
def test_beat_runs_the_schedule_on_the_accelerated_clock(tmp_path):
    """Five arena minutes per wall second: the 10-minute snapshot comes every 2 s, the decision
    catch-up (minutes 5, 20, 35, 50) every 3 s. On the wall clock neither would come twice."""
    env = dict(os.environ, ARENA_VAR_DIR=str(tmp_path), CELERY_BROKER_URL="filesystem://",
               ARENA_CLOCK_START=START.isoformat(), ARENA_CLOCK_RATE="300",
               ARENA_CLOCK_ANCHOR=clock.wall().isoformat(), PYTHONUNBUFFERED="1",
               LOG_LEVEL="INFO")  # fmt: skip
    env.pop("DATABASE_URL", None)  # beat schedules; it never reads the database
    inbox = tmp_path / "broker" / "in"

    def published() -> Counter:
        return Counter(json.loads(p.read_text())["headers"]["task"] for p in inbox.glob("*.msg"))

    beat = Proc("beat", [sys.executable, "-m", "celery", "-A", "arena", "beat", "-l", "info",
                         "--schedule", str(tmp_path / "schedule")], env, tmp_path)  # fmt: skip
    try:
        wait_until(
            lambda: published()["cohorts.tasks.snapshot"] >= 3
            and published()["cohorts.tasks.decide"] >= 2,
            90, "three snapshots and two decision rounds on the arena's clock", procs=(beat,),
        )  # fmt: skip
    finally:
        beat.stop()
