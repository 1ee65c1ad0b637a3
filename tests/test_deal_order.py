"""The order xdist deals the suite in (tests/xdist_worker.py): longest modules first, a module's
tests together and in their order, modules with a test that runs alone last."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tests import xdist_worker


@dataclass
class Item:
    nodeid: str
    marks: set[str] = field(default_factory=set)

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
