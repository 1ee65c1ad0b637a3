"""Shared machinery for the fault tests: real processes, a private Redis, polling with deadlines.

Every fault test runs the arena's real parts in separate processes (Celery workers, beats) against
pytest-django's test database, so they need PostgreSQL (a subprocess cannot see the test's
in-memory SQLite database). Each test starts its own redis-server on a free port: the tests stop
and restart the broker, and a private server means no other worker or beat on the machine's
Redis can take our messages or hold our beat lock.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from django.conf import settings
from django.db import connection

from simulations.rehearsal.procs import PrivateRedis

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    *,
    procs: tuple[Proc, ...] = (),
    interval: float = 0.1,
) -> T:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` s,
    or at once (with its output) if one of `procs` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for proc in procs:
            if proc.popen.poll() is not None:
                pytest.fail(f"{proc.name} exited ({proc.popen.returncode}) while waiting for "
                            f"{what}:\n{proc.output()[-4000:]}")  # fmt: skip
        if time.monotonic() > deadline:
            details = "".join(f"\n--- {p.name}:\n{p.output()[-3000:]}" for p in procs)
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}{details}")
        time.sleep(interval)


class Proc:
    """A child process whose output goes to a file (a pipe nobody reads would fill and block)."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop())
        self.popen = subprocess.Popen(
            args, cwd=settings.BASE_DIR, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # our signals reach only this process group
        )  # fmt: skip

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown handlers, no acks, like a lost machine."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


@pytest.fixture
def redis_server(tmp_path):
    if shutil.which("redis-server") is None:
        # Only tests marked redis ask for it, and they run only where REDIS_URL is set: a Redis
        # without its server binary is a broken set-up, not a reason to pass quietly.
        pytest.fail(
            "REDIS_URL is set but redis-server is not installed (apt-get install redis-server)"
        )
    # The rehearsal's own private Redis: no persistence, so a restart starts empty, like a
    # crashed broker without AOF (the worst case for lost messages).
    server = PrivateRedis(tmp_path).start()
    yield server
    server.stop()


def child_env(tmp_path: Path, broker_url: str, **extra: str) -> dict:
    """The environment of an arena process that shares this test's database and our broker."""
    db = connection.settings_dict  # NAME is the test database (test_...) by now
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        CELERY_BROKER_URL=broker_url,
        ARENA_VAR_DIR=str(tmp_path),
        LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
        # Names the child's backends in pg_stat_activity: a backend left holding a lock says whose.
        PGAPPNAME=f"arena-test-child:{tmp_path.name}",
    )
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    env.update(extra)
    return env


def release_database(timeout: float = 20) -> list[str]:
    """Wait until no other backend holds a lock in this test's PostgreSQL database.

    The teardown's flush (TRUNCATE) waits on any lock another backend holds, with no deadline;
    a backend that lingers after its process was stopped would hang the suite for pytest's
    timeout instead of saying whose it was. Past `timeout` the holders are terminated and
    returned (application name, state, query) for the caller to report.
    """
    sql = (
        "SELECT DISTINCT a.pid, a.application_name, a.state, left(a.query, 200) "
        "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND l.granted"
    )
    deadline = time.monotonic() + timeout
    while True:
        with connection.cursor() as cur:
            cur.execute(sql)
            holders = cur.fetchall()
        if not holders:
            return []
        if time.monotonic() > deadline:
            with connection.cursor() as cur:
                for pid, *_ in holders:
                    cur.execute("SELECT pg_terminate_backend(%s)", [pid])
            return [" | ".join(str(v) for v in row) for row in holders]
        time.sleep(0.2)


@pytest.fixture
def procs(tmp_path):
    """Start arena processes; every one still running is stopped at teardown."""
    started: list[Proc] = []

    def start(name: str, celery_args: list[str], env: dict) -> Proc:
        proc = Proc(name, [sys.executable, "-m", "celery", "-A", "arena", *celery_args], env,
                    tmp_path)  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


def worker_args(name: str, concurrency: int = 2) -> list[str]:
    return ["worker", "--pool", "threads", "--concurrency", str(concurrency), "-n", f"{name}@%h",
            "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"]  # fmt: skip


# --- faults injected in PostgreSQL itself (test-only triggers) -------------------------------

FAULT_SQL = """
CREATE SEQUENCE fault_rows;
CREATE FUNCTION fault_inject() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('fault_rows') = TG_ARGV[0]::int THEN
        IF TG_ARGV[1] = 'terminate' THEN
            PERFORM pg_terminate_backend(pg_backend_pid());
        ELSE
            RAISE EXCEPTION 'injected fault';
        END IF;
    END IF;
    RETURN NEW;
END $$;
"""
# Where to strike: (table, timing/event, row filter). Rows are counted per test from 1.
POINTS = {
    "settlement rows": ("cohorts_settlement", "AFTER INSERT", "TRUE"),
    "payout ledger rows": ("cohorts_ledgerentry", "AFTER INSERT", "NEW.kind = 'payout'"),
    "entry cash updates": ("cohorts_entry", "BEFORE UPDATE", "OLD.cash IS DISTINCT FROM NEW.cash"),
    "accepted submission": ("cohorts_agentsubmission", "BEFORE UPDATE",
                            "NEW.outcome = 'accepted' AND OLD.outcome <> 'accepted'"),
}


@pytest.fixture
def inject_fault():
    """inject_fault(point, nth, action) arms a one-shot fault; it is removed at teardown (the
    test database outlives the test, and a flush does not drop triggers)."""
    armed: list[str] = []

    def arm(point: str, nth: int, action: str) -> None:
        table, when, condition = POINTS[point]
        with connection.cursor() as cur:
            cur.execute(FAULT_SQL)
            cur.execute(
                f"CREATE TRIGGER fault_trigger {when} ON {table} FOR EACH ROW "
                f"WHEN ({condition}) EXECUTE FUNCTION fault_inject('{nth}', '{action}')"
            )
        armed.append(table)

    yield arm
    connection.close()  # the test may have left a dead connection behind
    with connection.cursor() as cur:
        for table in armed:
            cur.execute(f"DROP TRIGGER IF EXISTS fault_trigger ON {table}")
        cur.execute("DROP FUNCTION IF EXISTS fault_inject() CASCADE")
        cur.execute("DROP SEQUENCE IF EXISTS fault_rows")
