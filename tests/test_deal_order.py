"""The order xdist deals the suite in (tests/xdist_worker.py): longest modules first, a module's
tests together and in their order, modules with a test that runs alone last."""

from __future__ import annotations

import fcntl
import json
import threading
import time
from dataclasses import dataclass, field

from tests import xdist_worker


@dataclass
class Item:
    nodeid: str
    marks: set[str] = field(default_factory=set)
    fixturenames: list[str] = field(default_factory=list)

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def test_longest_modules_first_and_exclusive_ones_last():
    items = [
        Item("tests/a.py::one"), Item("tests/b.py::one"), Item("tests/a.py::two"),
        Item("tests/c.py::alone", {"exclusive"}), Item("tests/c.py::after"),
        Item("tests/d.py::new"), Item("tests/e.py::one"),
    ]  # fmt: skip
    seconds = {"tests/a.py": 5.0, "tests/b.py": 40.0, "tests/c.py": 900.0, "tests/e.py": 1.0}
    xdist_worker.deal_order(items, seconds)
    # d.py is not measured: it counts as the median of the measured ones, (5 + 40) / 2.
    assert [i.nodeid for i in items] == [
        "tests/b.py::one", "tests/d.py::new", "tests/a.py::one", "tests/a.py::two",
        "tests/e.py::one", "tests/c.py::alone", "tests/c.py::after",
    ]  # fmt: skip


def test_the_committed_figures_name_modules_that_exist():
    doc = json.loads(xdist_worker.SECONDS.read_text())
    root = xdist_worker.SECONDS.parents[1]
    missing = [m for m in doc["modules"] if not (root / m).is_file()]
    assert not missing, f"tests/module_seconds.json names modules that are gone: {missing}"
    assert all(s >= 0 for s in doc["modules"].values())


def test_a_module_with_a_block_run_alone_goes_last_too():
    items = [Item("tests/a.py::one"), Item("tests/b.py::measured", fixturenames=["alone"]),
             Item("tests/c.py::one")]  # fmt: skip
    xdist_worker.deal_order(items, {"tests/a.py": 1.0, "tests/b.py": 90.0, "tests/c.py": 2.0})
    order = [i.nodeid for i in items]
    assert order == ["tests/c.py::one", "tests/a.py::one", "tests/b.py::measured"]


def test_a_block_run_alone_waits_for_running_tests_and_holds_back_new_ones(tmp_path, monkeypatch):
    """Another worker's running test (its shared lock) keeps the block waiting; while the block
    runs no test can start (the turnstile) nor run (the lock); afterwards both are free."""
    turnstile, lock = tmp_path / "turnstile", tmp_path / "lock"
    monkeypatch.setattr(xdist_worker, "_lock_paths", lambda config: (turnstile, lock))
    entered, inside, leave = threading.Event(), threading.Event(), threading.Event()

    def test_with_a_block() -> None:
        with xdist_worker._locked(None, exclusive=False):
            entered.set()
            with xdist_worker._alone(None):
                inside.set()
                leave.wait(30)

    with open(lock, "a") as other:  # another worker's test, running
        fcntl.flock(other, fcntl.LOCK_SH)
        runner = threading.Thread(target=test_with_a_block)
        runner.start()
        assert entered.wait(30)
        with open(turnstile, "a") as probe:  # the block has the turnstile: no test starts...
            deadline = time.monotonic() + 30
            while _free(probe, fcntl.LOCK_EX) and time.monotonic() < deadline:
                pass
            assert not _free(probe, fcntl.LOCK_EX)
        assert not inside.is_set()  # ...and it waits for the running one
        fcntl.flock(other, fcntl.LOCK_UN)
        assert inside.wait(30)
        with open(lock, "a") as probe:
            assert not _free(probe, fcntl.LOCK_SH)  # nobody else runs meanwhile
        leave.set()
        runner.join(30)
    with open(turnstile, "a") as t, open(lock, "a") as lk:
        assert _free(t, fcntl.LOCK_EX) and _free(lk, fcntl.LOCK_EX)


def _free(f, how: int) -> bool:
    try:
        fcntl.flock(f, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(f, fcntl.LOCK_UN)
    return True
