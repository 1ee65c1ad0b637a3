"""What each pytest-xdist worker keeps to itself, and the tests that run alone.

Loaded with `-p tests.xdist_worker` (pyproject's addopts), so it is imported before
pytest-django reads the settings: what it sets in the environment here is what the settings,
the tests and every process they start see.

Under xdist (`./run test` runs `-n 3`: pyproject's addopts), each worker has its own
- test database: pytest-django suffixes the name with the worker id (test_arena_gw0, ...);
- ARENA_VAR_DIR: `$ARENA_VAR_DIR/gw0` (or var/pytest-gw0), so files made on first use (the seal
  signing key, created with O_EXCL and then written) and rehearsal folders never race;
- Redis database: REDIS_URL's number for gw0, then one lower a worker (15, 14, 13 from CI's
  db 15; 12, 11, 10 from db 12), or higher where that would go below 0. The Redis tests clear
  their database (the page cache's FLUSHDB) and read a queue they fill.

Tests marked `exclusive` measure time (a latency band, a phase deadline): they run alone. Every
test holds a shared lock for its set-up, call and tear-down; an exclusive test waits for the
running ones to finish, holds the lock to itself and meanwhile keeps the others from starting
(writer first: it holds the turnstile every test passes on its way in). Without xdist both
locks are skipped.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # set by xdist before its worker configures


def _worker_redis_url(url: str, index: int) -> str:
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    db = base - index if base - index >= 0 else base + index
    return urlunsplit(parts._replace(path=f"/{db}"))


if WORKER:
    _index = int(WORKER.removeprefix("gw"))
    _base = os.environ.get("ARENA_VAR_DIR") or str(Path(__file__).resolve().parents[1] / "var")
    _var = Path(_base) / (WORKER if os.environ.get("ARENA_VAR_DIR") else f"pytest-{WORKER}")
    _var.mkdir(parents=True, exist_ok=True)
    os.environ["ARENA_VAR_DIR"] = str(_var)
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _worker_redis_url(os.environ["REDIS_URL"], _index)


def _lock_paths(config) -> tuple[Path, Path]:
    # xdist gives each worker the folder <the run's basetemp>/gw0, ...: the run's is shared by
    # its workers alone, and pytest removes it with the old runs' folders.
    folder = config._tmp_path_factory.getbasetemp().parent
    return folder / "exclusive.turnstile", folder / "exclusive.lock"


@contextmanager
def _locked(config, exclusive: bool):
    turnstile_path, lock_path = _lock_paths(config)
    with open(turnstile_path, "a") as turnstile, open(lock_path, "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)


def pytest_collection_modifyitems(config, items):
    # Long tests first (marked slow, or driving a browser), the rest in their order: xdist's load
    # scheduling deals the first items out round-robin, so the long ones start at once on
    # different workers instead of ending the run one after another. Every worker sorts the same
    # way (xdist requires one order), and without xdist the order is as collected.
    if WORKER:
        items.sort(key=lambda item: not (item.get_closest_marker("slow")
                                         or item.get_closest_marker("browser")))  # fmt: skip


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not WORKER:
        yield
        return
    with _locked(item.config, exclusive=item.get_closest_marker("exclusive") is not None):
        yield
