"""What each pytest-xdist worker keeps to itself, and the tests that run alone.

Loaded with `-p tests.xdist_worker` (pyproject's addopts), so it is imported before
pytest-django reads the settings: what it sets in the environment here is what the settings,
the tests and every process they start see.

Under xdist (`./run test` runs `-n auto`: pyproject's addopts; two workers a core, at most
MAX_WORKERS, from `pytest_xdist_auto_num_workers` below), each worker has its own
- test database: pytest-django suffixes the name with the worker id (test_arena_gw0, ...);
- ARENA_VAR_DIR: `$ARENA_VAR_DIR/gw0` (or var/pytest-gw0), so files made on first use (the seal
  signing key, created with O_EXCL and then written) and rehearsal folders never race;
- Redis database: REDIS_URL's number for gw0, then one lower a worker (15, 14, 13, 12 from
  CI's db 15), or higher where that would go below 0. The Redis tests clear
  their database (the page cache's FLUSHDB) and read a queue they fill.

Demos built for tests (tests/demo_snapshot.py) are shared by the run's workers through files in
the run's temporary folder, whose path each worker finds in ARENA_TEST_SHARED_DIR.

Tests marked `exclusive` measure time (a latency band, a phase deadline): they run alone. Every
test holds a shared lock for its set-up, call and tear-down; an exclusive test waits for the
running ones to finish, holds the lock to itself and meanwhile keeps the others from starting
(writer first: it holds the turnstile every test passes on its way in). A test whose set-up is
long and not measured (a worker's start) runs only its measured block alone, inside the `alone`
fixture's `with alone():`, instead of keeping every other worker idle through its set-up.
Without xdist both locks are skipped.

The order: xdist deals whole modules (`--dist loadfile`), the longest first by the seconds in
tests/module_seconds.json, modules with an exclusive test last. Refresh the figures with
`./run test --record-module-seconds` after adding a long test.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # set by xdist before its worker configures
SECONDS = Path(__file__).with_name("module_seconds.json")
# More workers than this would each build a test database and collect the suite for little:
# the long modules (the rehearsal, the deploy docs' run) bound the run's length anyway.
MAX_WORKERS = 8


@pytest.hookimpl(tryfirst=True)  # before xdist's own (one a core)
def pytest_xdist_auto_num_workers(config) -> int | None:
    """`-n auto`: two workers a core (PYTEST_XDIST_AUTO_NUM_WORKERS, xdist's own setting,
    overrides it). Why: much of a test's wall time is a wait (a subprocess starting, a server
    answering, the database committing); on the 2-core CI machine, 3 workers left the
    PostgreSQL pass's cores idle a quarter of the time, 4 keep them busy."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist reads it
    # The cores this process may use (Linux); elsewhere (macOS has no sched_getaffinity) all.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(2 * (cores or 1), MAX_WORKERS))


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


_held: IO | None = None  # the running test's shared lock (one test at a time per worker)


@contextmanager
def _locked(config, exclusive: bool):
    global _held
    turnstile_path, lock_path = _lock_paths(config)
    with open(turnstile_path, "a") as turnstile, open(lock_path, "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        _held = None if exclusive else lock
        try:
            yield
        finally:
            _held = None
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)


@contextmanager
def _alone(config) -> Iterator[None]:
    lock = _held
    if lock is None:  # not under xdist, or already the whole test runs alone
        yield
        return
    turnstile_path, _ = _lock_paths(config)
    # Our shared lock goes first: a test of another worker waiting in here for the turnstile
    # would otherwise hold its shared lock while we wait for it to let go (a deadlock). So an
    # exclusive test already waiting may run first, with this test's set-up still alive (the
    # embedded broker's idle worker, reading a folder ten times a second): the block itself
    # still runs with nothing else.
    fcntl.flock(lock, fcntl.LOCK_UN)
    with open(turnstile_path, "a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # no test starts meanwhile
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the running ones end first
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.fixture
def alone(request) -> Callable[[], AbstractContextManager[None]]:
    """`with alone(): ...` runs the block while no other test runs (as `exclusive` does a
    whole test): for the measured part of a test whose set-up need not run alone."""
    return lambda: _alone(request.config)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _measured_seconds() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(SECONDS.read_text())["modules"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def pytest_collection_modifyitems(config, items):
    # xdist deals the suite out a module at a time (`--dist loadfile`: a module's fixtures are
    # built once, on one worker), in the order collected. So the longest modules come first, by
    # their measured seconds (a module not measured yet counts as the median one): they start at
    # once on different workers instead of ending the run one after another. Modules with a test
    # that runs alone come last: an exclusive test waits for every running test to end, which
    # costs least when the others are short. Every worker sorts the same way (xdist requires
    # one order); without xdist the order is as collected.
    if WORKER:
        deal_order(items, _measured_seconds())


def _runs_alone(item) -> bool:
    return bool(item.get_closest_marker("exclusive")) or "alone" in getattr(item, "fixturenames", ())


def deal_order(items: list, seconds: dict[str, float]) -> None:
    """Sorts `items` in place: modules by their seconds, longest first (a module not measured
    counts as the median one), those with an exclusive test last; a module's tests keep their
    order."""
    default = statistics.median(seconds.values()) if seconds else 1.0
    alone = {_module(item.nodeid) for item in items if _runs_alone(item)}

    def place(item) -> tuple[bool, float, str]:
        module = _module(item.nodeid)
        return module in alone, -seconds.get(module, default), module

    items.sort(key=place)


def pytest_addoption(parser):
    parser.addoption(
        "--record-module-seconds", action="store_true",
        help=f"write each module's seconds of this run into {SECONDS.name} (the order xdist deals "
             "modules in); run the whole suite on PostgreSQL on an idle machine",
    )  # fmt: skip


class _Recorder:
    """Sums each module's set-up, call and tear-down seconds as the reports reach the controller."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        module = _module(report.nodeid)
        self.seconds[module] = self.seconds.get(module, 0.0) + report.duration

    def pytest_sessionfinish(self, session) -> None:
        if session.testsfailed or not self.seconds:
            return  # a failed run's figures would move modules for the wrong reason
        known = _measured_seconds()
        known.update({m: round(s, 1) for m, s in self.seconds.items()})
        doc = {
            "about": "Seconds each test module took in a whole run (set-up, call, tear-down), "
                     "written by `./run test --record-module-seconds`: xdist deals the longest "
                     "first (tests/xdist_worker.py).",
            "modules": dict(sorted(known.items(), key=lambda kv: -kv[1])),
        }  # fmt: skip
        SECONDS.write_text(json.dumps(doc, indent=1) + "\n")


def pytest_configure(config):
    if not WORKER and config.getoption("--record-module-seconds"):
        config.pluginmanager.register(_Recorder(), "module-seconds-recorder")


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has its factory
def pytest_sessionstart(session):
    if WORKER:
        os.environ["ARENA_TEST_SHARED_DIR"] = str(_lock_paths(session.config)[0].parent)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not WORKER:
        yield
        return
    with _locked(item.config, exclusive=item.get_closest_marker("exclusive") is not None):
        yield
