"""A standby beat (another one holds the schedule lock) stops promptly on SIGTERM and SIGINT.

A real `celery -A arena beat` process waits for a real lock that this test holds: the flock of
the embedded broker's machine, or the Redis key of a private redis-server. Before the fix the
signal made Celery save the schedule through a scheduler still being built, which built another
one that stood by again: the process answered each signal with a new "standing by".
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from arena.beat import LOCK_KEY, FileLock
from tests.faults.conftest import Proc, wait_until

PROMPTLY = 10  # seconds; the standby polls its lock every 0.2 s here


def _standby_beat(tmp_path: Path, broker_url: str) -> Proc:
    env = dict(
        os.environ,
        ARENA_VAR_DIR=str(tmp_path),
        CELERY_BROKER_URL=broker_url,
        ARENA_BEAT_STANDBY_POLL="0.2",
        LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
    )
    env.pop("DATABASE_URL", None)  # a standby never reaches the database
    args = [sys.executable, "-m", "celery", "-A", "arena", "beat", "-l", "info",
            "--schedule", str(tmp_path / "schedule")]  # fmt: skip
    proc = Proc("beat", args, env, tmp_path)
    wait_until(lambda: "standing by" in proc.output(), 60, "the beat to stand by", procs=(proc,))
    return proc


def _stops_on(proc: Proc, sig: signal.Signals) -> None:
    try:
        os.kill(proc.popen.pid, sig)
        wait_until(lambda: not proc.alive(), PROMPTLY, f"the standby beat to stop on {sig.name}")
        output = proc.output()
        assert output.count("standing by") == 1, output
        assert f"stopped by {sig.name}" in output
        assert "lock acquired" not in output
    finally:
        proc.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_standby_beat_on_the_flock_stops_on_a_signal(tmp_path, sig):
    held = FileLock(tmp_path / "beat.lock")
    assert held.acquire()
    try:
        _stops_on(_standby_beat(tmp_path, "filesystem://"), sig)
    finally:
        held.release()


@pytest.mark.redis
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_standby_beat_on_redis_stops_on_a_signal(tmp_path, redis_server, sig):
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.set(LOCK_KEY, "another-beat", ex=120)
    _stops_on(_standby_beat(tmp_path, redis_server.url), sig)
    assert client.get(LOCK_KEY) == b"another-beat"  # the standby never touched the holder's lock
