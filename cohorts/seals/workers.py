"""`arena verify` on both cores: the cohorts are independent (each has its own chains), so they
are checked in worker processes, each with its own database connection, and their reports are
merged in cohort order, which gives the same report as checking them one after another.

Reading and hashing the records is the whole cost (hundreds of megabytes of prompts and model
calls for a season of live cohorts): in one process the database's time and Python's alternate,
with two workers they overlap. Workers are forked (they inherit the loaded code and, for an
export, the parsed document) and used only where a fork can see the same data: not inside a
transaction (the tests') and not on an in-memory SQLite database.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, connections

T = TypeVar("T")
R = TypeVar("R")
MIN_ITEMS = 2  # fewer parts (cohorts, logs) than this are not worth starting processes for
# Below this many decision records, starting processes and connections costs more than it saves
# (a demo of 300 records checks in 2 s in one process, 3 s in two at load 8).
MIN_RECORDS = 600

# The work a forked worker runs, and what it shares with its parent (the parsed export).
_TASK: Callable[[Any], Any] | None = None


def workers_for(n_items: int, database: bool = True, records: int | None = None) -> int:
    """How many processes to check `n_items` parts holding `records` decision records in (1:
    here, in this process); `database`: the workers read the database (an export's do not)."""
    wanted = getattr(settings, "ARENA_VERIFY_WORKERS", None) or os.environ.get(
        "ARENA_VERIFY_WORKERS"
    )
    wanted = int(wanted) if wanted else min(2, os.cpu_count() or 1)
    if wanted <= 1 or n_items < MIN_ITEMS or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if records is not None and records < MIN_RECORDS:
        return 1
    if not database:
        return min(wanted, n_items)
    if connection.in_atomic_block:
        return 1  # a forked connection would not see this transaction's rows
    if connection.vendor == "sqlite" and getattr(connection, "is_in_memory_db", lambda: True)():
        return 1
    return min(wanted, n_items)


def _run(item: Any) -> Any:
    assert _TASK is not None
    return _TASK(item)


def in_workers(
    task: Callable[[T], R], items: Sequence[T], workers: int, database: bool = True
) -> list[R]:
    """task(item) for each item, in `workers` forked processes; results in the items' order.
    Workers end without finalisers (multiprocessing's os._exit), so a connection they inherit
    but never use is left alone."""
    global _TASK
    if workers <= 1:
        return [task(item) for item in items]
    if database:
        connections.close_all()  # each worker opens its own; a shared socket would garble both
    _TASK = task
    # Inherited objects out of the collector's sight: a worker's collection would otherwise
    # touch every page of its parent's heap and copy it (a parsed export is gigabytes).
    gc.freeze()
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            return list(pool.map(_run, items))
    finally:
        gc.unfreeze()
        _TASK = None
