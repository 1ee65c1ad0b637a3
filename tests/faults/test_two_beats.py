"""Fault: two beat processes started by mistake. Only one may schedule; the other stands by and
takes over when the first dies.

Two real `celery -A arena beat` processes, each with its own schedule file pre-dated so every
entry of arena/celery.py is due the moment its beat starts scheduling (a beat that scheduled
would publish all of them at once). We read what reached the broker: one message per task while
both run (the second logs that it stands by), then — after SIGKILL of the first, which cannot
release anything — the second takes over (Redis: once the lock's TTL expires; flock: at once,
the kernel drops a dead process's lock) and publishes its own round. Never two beats at once.

Each message names its sender (Celery's `origin` header: gen<pid>@host), so what is counted is
who sent what: a crontab entry that falls due again while the test runs (a 10-minute tick
crossed) adds messages from the beat that holds the lock, never from the other.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from celery.beat import PersistentScheduler
from django.utils import timezone

from arena.celery import BEAT_SCHEDULE
from tests.faults.conftest import child_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

OUR_TASKS = Counter(entry["task"] for entry in BEAT_SCHEDULE.values())
Published = Callable[[], Counter]  # (sender pid, task name) -> messages sent so far
LOCK_TTL = 3  # seconds: how long a SIGKILLed beat's Redis lock outlives it here


def _due_schedule_file(path: Path) -> None:
    """Write a beat schedule file whose entries all last ran two days ago (all due, the daily one too)."""
    app = Celery("arena-schedule-writer", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.beat_schedule = BEAT_SCHEDULE
    scheduler = PersistentScheduler(app=app, schedule_filename=str(path))
    for name in BEAT_SCHEDULE:
        scheduler.schedule[name].last_run_at = timezone.now() - timedelta(days=2)
    scheduler.sync()
    scheduler.close()


def _start_beats(procs, tmp_path: Path, env: dict) -> tuple:
    for name in ("first", "second"):
        _due_schedule_file(tmp_path / f"{name}-schedule")
    env = {**env, "ARENA_BEAT_STANDBY_POLL": "0.2", "ARENA_BEAT_LOCK_TTL": str(LOCK_TTL)}

    def beat(name):
        args = ["beat", "-l", "info", "--schedule", str(tmp_path / f"{name}-schedule")]
        return procs(f"beat-{name}", args, env)

    first = beat("first")
    wait_until(
        lambda: "lock acquired" in first.output(), 30, "the first beat's lock", procs=(first,)
    )
    second = beat("second")
    wait_until(
        lambda: "standing by" in second.output(), 30, "the second beat to stand by", procs=(second,)
    )
    return first, second


def _by_sender(messages: Iterable[dict]) -> Counter:
    """(sender pid, task name) of each task message."""
    sent: Counter = Counter()
    for message in messages:
        headers = message["headers"]
        sent[int(headers["origin"].split("@")[0].removeprefix("gen")), headers["task"]] += 1
    return sent


def _a_round_from(published: Published, proc) -> bool:
    """Whether `proc` has sent every entry of the schedule at least once."""
    sent = published()
    return all(sent[proc.popen.pid, task] >= n for task, n in OUR_TASKS.items())


def _senders(published: Published) -> set[int]:
    return {pid for pid, _ in published()}


def _check_one_beat_then_takeover(first, second, published: Published) -> None:
    """The shared script of both variants."""
    wait_until(lambda: _a_round_from(published, first), 20, "the first beat's round",
               procs=(first,))  # fmt: skip
    # Both alive: the second keeps standing by (it polls every 0.2 s) and sends nothing.
    standby_polls_before = second.output().count("lock")
    wait_until(lambda: "Sending due task" in first.output() and second.alive(), 5, "both alive")
    assert _senders(published) == {first.popen.pid}
    assert "lock acquired" not in second.output() and standby_polls_before

    first.kill()
    wait_until(lambda: "lock acquired" in second.output(), LOCK_TTL + 20, "the takeover",
               procs=(second,))  # fmt: skip
    wait_until(lambda: _a_round_from(published, second), 20, "the second beat's round",
               procs=(second,))  # fmt: skip
    assert _senders(published) == {first.popen.pid, second.popen.pid}


@pytest.mark.redis
def test_two_beats_on_redis_only_one_schedules_and_the_other_takes_over(
    tmp_path, redis_server, procs
):
    import redis

    client = redis.Redis.from_url(redis_server.url)

    def published() -> Counter:
        # Celery's Redis transport keeps a queue as a list of JSON messages.
        return _by_sender(json.loads(m) for m in client.lrange("celery", 0, -1))

    first, second = _start_beats(procs, tmp_path, child_env(tmp_path, redis_server.url))
    holder = client.get("arena:beat-lock").decode()
    assert holder.startswith(f"{first.popen.pid}-")
    _check_one_beat_then_takeover(first, second, published)
    assert client.get("arena:beat-lock").decode().startswith(f"{second.popen.pid}-")


def test_two_beats_on_one_machine_flock_only_one_schedules_and_the_other_takes_over(
    tmp_path, procs
):
    inbox = tmp_path / "broker" / "in"

    def published() -> Counter:
        # The filesystem transport writes one file per message; one being written right now
        # reads empty or cut, and is counted on the next poll.
        messages = []
        for path in inbox.glob("*.msg"):
            try:
                messages.append(json.loads(path.read_text()))
            except ValueError:
                continue
        return _by_sender(messages)

    env = child_env(tmp_path, "filesystem://")
    first, second = _start_beats(procs, tmp_path, env)
    assert (tmp_path / "beat.lock").exists()
    _check_one_beat_then_takeover(first, second, published)
