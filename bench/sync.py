"""Benchmark: sync 5,000 markets (50 keyset pages) from the fake Gamma server into an empty
database, then re-sync with changed prices.

Targets (issue 2, SQLite on a 2-core machine): first sync <= 5 s, re-sync <= 3 s, and the number
of SQL statements per page independent of the number of markets per page.

    uv run python bench/sync.py                      # a throwaway SQLite file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench uv run python bench/sync.py

On PostgreSQL the run uses a scratch database test_<name> (created, then dropped), never the
database named in the URL. The fake server runs in this process, so the timings include its
JSON encoding but no network latency.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRATCH = Path(tempfile.mkdtemp(prefix="arena-bench-"))
os.environ.setdefault("DATABASE_URL", f"sqlite:///{SCRATCH / 'bench.sqlite3'}")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from markets.gamma import GammaClient  # noqa: E402
from markets.models import Market, PricePoint  # noqa: E402
from markets.services import sync_markets  # noqa: E402
from tests.fakes.gamma_server import FakeGamma, bulk_markets  # noqa: E402

N_MARKETS = 5_000
TARGET_FIRST = 5.0
TARGET_RESYNC = 3.0


class SqlMeter:
    """Counts statements and the time spent in them (an execute wrapper, so no SQL text is
    formatted or kept: cheap enough to leave on while timing)."""

    def __init__(self):
        self.count = 0
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started
            self.count += 1


def timed_sync(gamma: FakeGamma, page_size: int = 100) -> dict:
    client = GammaClient(gamma.url, timeout=30, retries=0, page_size=page_size)
    meter = SqlMeter()
    per_page: list[int] = []
    last = [0]

    def on_page(_n: int) -> None:
        per_page.append(meter.count - last[0])
        last[0] = meter.count

    with connection.execute_wrapper(meter):
        started, cpu_started = time.perf_counter(), time.process_time()
        report = sync_markets(N_MARKETS, client=client, on_page=on_page)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "report": report,
        "seconds": seconds,
        # CPU of this process (client, database driver and the in-process fake server): the
        # figure to read when other jobs share the machine and stretch the wall clock.
        "cpu": cpu,
        "sql_seconds": meter.seconds,
        "queries": meter.count,
        # The first page also carries the sync's opening COUNT; pages after it are typical.
        "per_page": sorted(set(per_page[1:])) or per_page,
    }


def line(label: str, run: dict, target: float | None) -> bool:
    r = run["report"]
    ok = target is None or run["seconds"] <= target
    verdict = "" if target is None else f"  target <= {target:.0f} s: {'OK' if ok else 'MISSED'}"
    print(
        f"{label:<28} {r.stored} markets, {r.pages} pages, {r.price_points} price points in "
        f"{run['seconds']:.2f} s (CPU {run['cpu']:.2f} s, SQL {run['sql_seconds']:.2f} s, "
        f"{run['queries']} statements, "
        f"per page {run['per_page']}){verdict}"
    )
    return ok


def main() -> int:
    # As in production (DEBUG=0): with DEBUG on, Django formats and keeps every statement.
    settings.DEBUG = False
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        db.setdefault("TEST", {})["NAME"] = str(
            SCRATCH / "bench-test.sqlite3"
        )  # a file, not :memory:
    creation = connection.creation
    old_name = creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
        print(
            f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
        )
        with FakeGamma(bulk_markets(N_MARKETS)) as gamma:
            ok = line("first sync (empty db)", timed_sync(gamma), TARGET_FIRST)
            gamma.markets = bulk_markets(N_MARKETS, shift=0.01)
            ok &= line("re-sync, prices changed", timed_sync(gamma), TARGET_RESYNC)
            assert Market.objects.count() == N_MARKETS
            assert PricePoint.objects.count() == N_MARKETS * 2 * 2
            print("statements per page by markets per page (must not grow with page size):")
            for size in (25, 100):
                gamma.markets = bulk_markets(N_MARKETS, shift=0.001 * size)
                line(f"  re-sync at {size}/page", timed_sync(gamma, page_size=size), None)
    finally:
        creation.destroy_test_db(old_name, verbosity=0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
