"""Benchmark: one snapshot tick over 2,000 entries x 25 open positions (50,000 positions).

Runs on SQLite (a temporary file database) and on PostgreSQL (a scratch database it creates and
drops), each in its own process because Django reads DATABASE_URL once at start-up. For each it
times the bulk tick (cohorts.snapshots.take_snapshot) and a naive tick that queries each entry's
positions one by one, and prints both against the targets:

    bulk tick <= 4 s on SQLite, <= 2 s on PostgreSQL; naive / bulk >= 20x

Usage: uv run python bench/snapshot.py [--entries 2000] [--positions 25] [--only sqlite|postgres]
       [--pg-url postgres://postgres@127.0.0.1:5432/arena_bench_snapshot]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"sqlite": 4.0, "postgres": 2.0}
MIN_RATIO = 20.0
N_MARKETS = 500


def child(backend: str, entries: int, per_entry: int) -> dict:
    """Runs inside the per-backend process: build the data, time both ticks, return figures."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
    import django

    django.setup()
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from agents.models import Competitor
    from cohorts.models import Position, Snapshot
    from cohorts.services import open_cohort
    from markets.models import Market

    t = time.perf_counter()
    week = datetime(2026, 11, 15, tzinfo=UTC)
    markets = Market.objects.bulk_create(
        Market(
            source="demo",
            external_id=f"bench-{i}",
            question=f"Bench market {i}?",
            outcomes=["Yes", "No"],
            # Half the markets quote both sides, half only Yes (No = 1 - Yes).
            last_prices={"Yes": f"0.{10 + i % 80}", "No": f"0.{90 - i % 80:02d}"}
            if i % 2
            else {"Yes": f"0.{10 + i % 80}"},
        )
        for i in range(N_MARKETS)
    )
    competitors = Competitor.objects.bulk_create(
        Competitor(slug=f"bench-{i}", display_name=f"Bench {i}", kind="baseline", strategy="cash")
        for i in range(entries)
    )
    cohort, _ = open_cohort(week, competitors=competitors, at=week)
    entry_ids = list(cohort.entries.order_by("pk").values_list("pk", flat=True))
    positions = []
    for n, entry_id in enumerate(entry_ids):
        for k in range(per_entry):
            market = markets[(n * 7 + k * 13) % N_MARKETS]
            positions.append(
                Position(
                    entry_id=entry_id,
                    market=market,
                    outcome="Yes" if (n + k) % 3 else "No",
                    shares=Decimal("123.456789"),
                    cost_basis=Decimal("61.73"),
                    realized_pnl=Decimal("1.25") if k % 5 == 0 else Decimal(0),
                    opened_at=week,
                )
            )
    Position.objects.bulk_create(positions, batch_size=5000)
    setup_s = time.perf_counter() - t
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")

    from cohorts.snapshots import take_snapshot

    at = datetime(2026, 11, 16, 12, 0, tzinfo=UTC)
    bulk = []
    for i in range(3):  # three ticks in three buckets: inserts
        t = time.perf_counter()
        written = take_snapshot(at + timedelta(minutes=10 * i))
        bulk.append(time.perf_counter() - t)
        assert written == entries, written
    t = time.perf_counter()
    take_snapshot(at + timedelta(minutes=21))  # same bucket as the third: the update path
    rerun = time.perf_counter() - t

    t = time.perf_counter()
    naive_tick(at + timedelta(minutes=30))
    naive = time.perf_counter() - t

    # Both ticks must agree on every entry's value, or the comparison means nothing.
    fast = dict(
        Snapshot.objects.filter(ts=at + timedelta(minutes=20)).values_list("entry_id", "total")
    )
    slow = dict(
        Snapshot.objects.filter(ts=at + timedelta(minutes=30)).values_list("entry_id", "total")
    )
    assert fast == slow and len(fast) == entries
    return {
        "backend": backend,
        "entries": entries,
        "positions": len(positions),
        "setup_s": setup_s,
        "bulk_s": bulk,
        "rerun_s": rerun,
        "naive_s": naive,
    }


def naive_tick(at) -> None:
    """The shape the bulk tick replaces: per entry, load its positions and upsert its row."""
    from collections import defaultdict  # noqa: F401  (kept symmetrical with the bulk code)
    from decimal import Decimal

    from django.db.models import Sum

    from cohorts.models import Entry, Position, Snapshot
    from cohorts.snapshots import bucket_for
    from markets.pricing import outcome_price

    ts = bucket_for(at)
    for entry in Entry.objects.filter(cohort__status__in=["active", "tracking"]):
        value = cost = Decimal(0)
        for p in entry.positions.filter(status=Position.Status.OPEN).select_related("market"):
            price = outcome_price(p.market, None, p.outcome)
            value += p.cost_basis if price is None else p.shares * price
            cost += p.cost_basis
        value = value.quantize(Decimal("0.01"))
        realized = entry.positions.aggregate(s=Sum("realized_pnl"))["s"] or Decimal(0)
        Snapshot.objects.update_or_create(
            entry=entry,
            ts=ts,
            defaults={
                "cash": entry.cash,
                "positions_value": value,
                "total": entry.cash + value,
                "realized_pnl": realized,
                "unrealized_pnl": value - cost,
            },
        )


def run_backend(backend: str, args) -> dict | None:
    env = dict(os.environ)
    tmp = tempfile.mkdtemp(prefix="arena-bench-")
    env["ARENA_VAR_DIR"] = tmp
    env["LOG_LEVEL"] = "WARNING"
    if backend == "sqlite":
        env["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
    else:
        if not _pg_recreate(args.pg_url):
            return None
        env["DATABASE_URL"] = args.pg_url
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", backend, "--entries", str(args.entries), "--positions", str(args.positions)],
            env=env, cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            print(f"{backend}: benchmark failed\n{out.stderr[-3000:]}")
            return None
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        if backend == "postgres":
            _pg_drop(args.pg_url)


def _admin_conn(url: str):
    import psycopg

    base, _, _name = url.rpartition("/")
    return psycopg.connect(f"{base}/postgres", autocommit=True)


def _pg_recreate(url: str) -> bool:
    name = url.rpartition("/")[2]
    try:
        with _admin_conn(url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:
        print(f"postgres: skipped, cannot create {name}: {exc}")
        return False
    return True


def _pg_drop(url: str) -> None:
    name = url.rpartition("/")[2]
    with _admin_conn(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(r: dict) -> bool:
    target = TARGETS[r["backend"]]
    tick = statistics.median(r["bulk_s"])
    ratio = r["naive_s"] / tick
    ok = tick <= target and ratio >= MIN_RATIO
    print(
        f"\n{r['backend']}: {r['entries']} entries x {r['positions'] // r['entries']} positions = {r['positions']} open positions (setup {r['setup_s']:.1f} s)"
    )
    print(
        f"  bulk tick   median {tick:.3f} s  (runs {', '.join(f'{x:.3f}' for x in r['bulk_s'])}; rerun same bucket {r['rerun_s']:.3f} s)  target <= {target:.1f} s  {'OK' if tick <= target else 'MISSED'}"
    )
    print(f"  naive tick  {r['naive_s']:.3f} s")
    print(
        f"  ratio       {ratio:.1f}x  target >= {MIN_RATIO:.0f}x  {'OK' if ratio >= MIN_RATIO else 'MISSED'}"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--positions", type=int, default=25, help="open positions per entry")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument(
        "--pg-url", default="postgres://postgres@127.0.0.1:5432/arena_bench_snapshot"
    )
    parser.add_argument("--child", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.entries, args.positions)))
        return 0
    ok = True
    for backend in [args.only] if args.only else ["sqlite", "postgres"]:
        result = run_backend(backend, args)
        ok = (result is not None and report(result)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
