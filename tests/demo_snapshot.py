"""A demo built once per test run, then copied into each test that asks for the same one.

`run_demo` takes 3-10 s on SQLite and 15-35 s on PostgreSQL (it plays every week through the
real decision path), and about forty tests start from one of a handful of demos. The first test
that asks for a demo builds it with `run_demo` and the database is read out table by table
(PostgreSQL's COPY, SQLite's rows); the later ones get the same rows back after a flush, with the
sequences moved past them, plus the files the build left in VAR_DIR (the seal signing key, whose
public half the sealed rows name) and the same DemoReport. Under xdist the snapshot is also
written to a file the run's workers share (tests/xdist_worker.py names the folder): the first
worker to ask builds it under a lock, the others wait for it and read it back instead of
building the same demo again on their own database. Works inside a test's transaction
(`db`: the copy is rolled back with the test) and outside it (`transactional_db`, live-server
tests: the copy is committed, and the test's own flush removes it).

What a copy cannot share, it resets: the page cache (its version tokens describe the rows it
last saw), the cached signing key and the content-type cache.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection, transaction

from cohorts.seals import sign as seal_sign


@dataclass
class _Snapshot:
    vendor: str
    tables: dict[str, Any]  # table -> COPY bytes (PostgreSQL) or (columns, rows) (SQLite)
    key: bytes | None  # the signing key file's content (None: the key came from the env)
    report: Any


_SNAPSHOTS: dict[tuple, _Snapshot] = {}
# The folder the run's xdist workers share (set by tests/xdist_worker.py); unset: no sharing.
SHARED_ENV = "ARENA_TEST_SHARED_DIR"


def _tables() -> list[str]:
    return sorted(connection.introspection.django_table_names(only_existing=True))


def _key_file() -> bytes | None:
    path = seal_sign.key_path()
    return None if seal_sign.key_from_env() or not path.exists() else path.read_bytes()


def _read() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with connection.cursor() as cursor:
        for table in _tables():
            quoted = connection.ops.quote_name(table)
            if connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY {quoted} TO STDOUT (FORMAT BINARY)") as cp:
                    out[table] = b"".join(bytes(chunk) for chunk in cp)
            else:
                cursor.execute(f"SELECT * FROM {quoted}")
                columns = [c[0] for c in cursor.description]
                out[table] = (columns, cursor.fetchall())
    return out


def _write(tables: dict[str, Any]) -> None:
    # Every table emptied (the arena's flush lifts SQLite's guard on the sealing tables; no
    # post_migrate, whose seeded rows would collide with the copy's), then the copy's rows.
    if connection.in_atomic_block:
        # Rows this transaction wrote still owe their deferred foreign-key checks, and
        # PostgreSQL refuses to TRUNCATE a table with such events pending: run them now.
        connection.check_constraints()
    call_command("flush", interactive=False, verbosity=0, inhibit_post_migrate=True)
    with transaction.atomic(), connection.cursor() as cursor:
        for table, data in tables.items():
            quoted = connection.ops.quote_name(table)
            if connection.vendor == "postgresql":
                if data:
                    with cursor.cursor.copy(f"COPY {quoted} FROM STDIN (FORMAT BINARY)") as cp:
                        cp.write(data)
                continue
            columns, rows = data
            if rows:
                names = ", ".join(connection.ops.quote_name(c) for c in columns)
                marks = ", ".join(["%s"] * len(columns))
                cursor.executemany(f"INSERT INTO {quoted} ({names}) VALUES ({marks})", rows)
        # The next row each table makes follows the copied ones (SQLite's AUTOINCREMENT
        # follows by itself).
        for sql in connection.ops.sequence_reset_sql(no_style(), apps.get_models()):
            cursor.execute(sql)


def _restore_key(content: bytes | None) -> None:
    # The copied seals were signed with the build's key: the same key file, wherever this
    # test's VAR_DIR is (its content as the product wrote it, mode 0600).
    if content is None:
        return
    path = seal_sign.key_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.write_bytes(content)
    path.chmod(0o600)


@contextmanager
def _shared(key: tuple) -> Iterator[Path | None]:
    """The file the run's workers keep this snapshot in, held under an exclusive lock (one
    worker builds, the others wait for the file); None when no folder is shared."""
    folder = os.environ.get(SHARED_ENV)
    if not folder:
        yield None
        return
    path = Path(folder) / "demo-snapshots" / hashlib.sha256(repr(key).encode()).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def demo(**params: Any) -> Any:
    """`run_demo(**params)`'s database (and report) in this test, built once per run."""
    from agents.models import Competitor
    from simulations.demo import run_demo

    # The same build from the same start: the lineup a test set up before it counts.
    lineup = tuple(Competitor.objects.order_by("slug").values_list("slug", "kind", "active"))
    key = (connection.vendor, tuple(sorted(params.items())), settings.ARENA_LLM_API_KEY, lineup)
    snap = _SNAPSHOTS.get(key)
    if snap is None:
        with _shared(key) as path:
            if path is not None and path.exists():
                snap = _SNAPSHOTS[key] = pickle.loads(path.read_bytes())
            else:
                report = run_demo(**params)
                snap = _Snapshot(connection.vendor, _read(), _key_file(), copy.deepcopy(report))
                _SNAPSHOTS[key] = snap
                if path is not None:
                    part = path.with_suffix(".part")
                    part.write_bytes(pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL))
                    part.replace(path)  # whole or absent, whatever stops this worker
                return report
    _write(snap.tables)
    _restore_key(snap.key)
    seal_sign.forget_key()
    ContentType.objects.clear_cache()
    cache.clear()
    return copy.deepcopy(snap.report)

