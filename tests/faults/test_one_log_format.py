"""The worker and beat, started as the shipped systemd units start them and stopped as systemd
stops them (SIGTERM), write nothing outside the one key=value format: no start-up banner (39
and 11 lines a start), no bare shutdown notice ("worker: Warm shutdown (MainProcess)" with a
blank line before it, on every restart)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.faults.conftest import child_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"


def _unit_args(unit: str, tmp_path: Path) -> list[str]:
    """The celery arguments of a unit's ExecStart, after `celery -A arena`, with the unit's
    paths under /srv/arena moved into the test's directory."""
    line = next(
        row for row in (UNITS / unit).read_text().splitlines() if row.startswith("ExecStart=")
    )
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert argv[0].endswith("/celery") and argv[1:3] == ["-A", "arena"], argv
    return [a.replace("/srv/arena/var", str(tmp_path)) for a in argv[3:]]


def test_the_units_worker_and_beat_write_only_lines_of_the_format(tmp_path, redis_server, procs):
    env = child_env(tmp_path, redis_server.url)
    worker = procs("worker", _unit_args("arena-worker.service", tmp_path), env)
    beat = procs("beat", _unit_args("arena-beat.service", tmp_path), env)
    wait_until(lambda: " ready." in worker.output(), 60, "the worker ready", procs=(worker,))
    wait_until(lambda: "beat: Starting" in beat.output(), 60, "beat started", procs=(beat,))
    worker.stop()
    beat.stop()

    for proc, role in ((worker, "worker"), (beat, "beat")):
        lines = proc.output().splitlines()
        stray = [line for line in lines if not line.startswith("ts=")]
        assert not stray, f"{proc.name} wrote lines outside the format:\n" + "\n".join(stray)
        assert all(f" role={role} " in line for line in lines), lines
    shutdown = [line for line in worker.output().splitlines() if "Warm shutdown" in line]
    assert len(shutdown) == 1 and " logger=celery.apps.worker " in shutdown[0], shutdown
