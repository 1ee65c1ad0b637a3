"""Page benchmark: server time of the leaderboard, a cohort page and the series endpoint.

    uv run python bench/pages.py                      # SQLite file under /tmp (built once)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_pages uv run python bench/pages.py
    ... --rebuild        drop the bench data and build it again
    ... --requests 50    requests per URL (the median is reported)

The database: 20 weekly live cohorts x 12 entries; each cohort is snapshotted every 10 minutes
from its start until the end of week 20 (a cohort opened later has a shorter history), which is
about 2.5 million Snapshot rows. Plus a few decisions, trades and positions per entry, 500
markets and a score run, so the pages have their usual content.

Server time is measured in-process with Django's test Client (URL routing, middleware, views,
queries, template rendering; no network), after 3 warm-up requests. The home page's overview
chart is cached until the next snapshot lands (at most 10 minutes), so `home` is the usual
request and `home-cold` the first request after a snapshot (cache cleared before each). Targets (PostgreSQL):
`/` <= 150 ms, cohort page <= 150 ms, series ALL <= 200 ms with a payload <= 150 KB.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
os.environ.setdefault("DATABASE_URL", "sqlite:////tmp/arena-bench-pages.sqlite3")
# Production-like settings: no debug query log, no HTTPS redirect for the in-process client.
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production-use-0123456789")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402

from agents.models import Competitor, Decision, Forecast  # noqa: E402
from cohorts.models import Cohort, Entry, Position, Snapshot, Trade, Universe  # noqa: E402
from markets.models import Market  # noqa: E402
from scoring.models import LeaderboardRow, ScoreRun  # noqa: E402

COHORTS = 20
COMPETITORS = 12
WEEKS = 20
STEP = timedelta(minutes=10)
START = datetime(2026, 1, 4, tzinfo=UTC)  # a Sunday
LABEL = "bench-pages"
TARGETS = {"home": 150.0, "cohort": 150.0, "series": 200.0}
PAYLOAD_TARGET = 150 * 1024


def built() -> bool:
    return Cohort.objects.filter(label=LABEL).count() == COHORTS


def wipe() -> None:
    cohorts = Cohort.objects.filter(label=LABEL)
    ScoreRun.objects.filter(engine_version=LABEL).delete()
    Trade.objects.filter(entry__cohort__in=cohorts).delete()
    Forecast.objects.filter(entry__cohort__in=cohorts).delete()
    Decision.objects.filter(entry__cohort__in=cohorts).delete()
    Position.objects.filter(entry__cohort__in=cohorts).delete()
    Snapshot.objects.filter(entry__cohort__in=cohorts).delete()
    Universe.objects.filter(cohort__in=cohorts).delete()
    Entry.objects.filter(cohort__in=cohorts).delete()
    cohorts.delete()
    Competitor.objects.filter(slug__startswith="bench-").delete()
    Market.objects.filter(external_id__startswith="bench-").delete()


def build() -> None:
    rng = random.Random(7)
    t0 = time.perf_counter()
    with transaction.atomic():
        markets = Market.objects.bulk_create(
            Market(
                source=Market.Source.DEMO, external_id=f"bench-{i}",
                question=f"Bench market {i}: will it happen?", outcomes=["Yes", "No"],
                last_prices={"Yes": "0.40", "No": "0.60"}, volume=Decimal(10_000 - i),
                last_synced_at=START,
            )
            for i in range(500)
        )  # fmt: skip
        comps = Competitor.objects.bulk_create(
            Competitor(slug=f"bench-{i}", display_name=f"Bench model {i}", kind="llm")
            for i in range(COMPETITORS)
        )
        cohorts = Cohort.objects.bulk_create(
            Cohort(kind="live", week_start=START + timedelta(weeks=i), label=LABEL)
            for i in range(COHORTS)
        )
        Universe.objects.bulk_create(
            Universe(
                cohort=c, week=1, frozen_at=c.week_start, content_hash="0" * 64,
                markets=[{"market_id": m.pk, "question": m.question, "prices": m.last_prices}
                         for m in markets[:100]],
            )
            for c in cohorts
        )  # fmt: skip
        entries = Entry.objects.bulk_create(
            Entry(cohort=c, competitor=k, cash=Decimal("9000.00")) for c in cohorts for k in comps
        )
        _decisions_and_trades(entries, markets, rng)
        _score_run(comps, cohorts, rng)
    t1 = time.perf_counter()
    n = _snapshots(entries, rng)
    t2 = time.perf_counter()
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE cohorts_snapshot")
            cur.execute("ANALYZE")
    print(f"built: {n:,} snapshots in {t2 - t1:.1f}s (other rows {t1 - t0:.1f}s)")


def _decisions_and_trades(entries, markets, rng) -> None:
    decisions, positions = [], []
    for e in entries:
        for week in range(1, 6):
            at = e.cohort.week_start + timedelta(weeks=week - 1, minutes=5)
            decisions.append(
                Decision(
                    entry=e, week=week, status="done", claimed_at=at, decided_at=at, action="BET",
                    reasoning="Bench reasoning " * 20, system_prompt="s" * 2000,
                    user_prompt="u" * 20000,
                )
            )  # fmt: skip
    Decision.objects.bulk_create(decisions, batch_size=500)
    for d in decisions:
        m = markets[rng.randrange(len(markets))]
        positions.append(
            Position(entry=d.entry, market=m, outcome="Yes", shares=Decimal("250"),
                     cost_basis=Decimal("100.00"), opened_at=d.claimed_at, status="exited")
        )  # fmt: skip
    Position.objects.bulk_create(positions, batch_size=500)
    Trade.objects.bulk_create(
        (
            Trade(entry=d.entry, decision=d, position=p, side="BUY", amount=Decimal("100.00"),
                  shares=Decimal("250"), price=Decimal("0.4"), executed_at=d.claimed_at)
            for d, p in zip(decisions, positions)
        ),
        batch_size=500,
    )  # fmt: skip


def _score_run(comps, cohorts, rng) -> None:
    end = START + timedelta(weeks=WEEKS)
    run = ScoreRun.objects.create(
        scope="live", status="done", as_of=end, started_at=end, finished_at=end,
        methodology_version="1", methodology_hash="0" * 64, engine_version=LABEL,
        n_forecasts=5000, n_resolved=2000,
    )  # fmt: skip
    rows = []
    for cohort in [None, *cohorts]:
        for rank, k in enumerate(comps, start=1):
            b = rng.uniform(0.1, 0.3)
            rows.append(
                LeaderboardRow(
                    run=run, cohort=cohort, competitor=k, rank=rank, n_forecasts=400,
                    n_resolved=200, brier=b, brier_lo=b - 0.02, brier_hi=b + 0.02,
                    log_score=0.6, skill_vs_market=0.01, return_pct=rng.uniform(-10, 10),
                    pnl=Decimal("12.34"), provisional=True, required_n=350,
                    details={"calibration": [
                        {"lo": i / 10, "hi": (i + 1) / 10, "n": 20, "mean_p": i / 10 + 0.05,
                         "freq": i / 10 + 0.04} for i in range(10)]},
                )
            )  # fmt: skip
    LeaderboardRow.objects.bulk_create(rows)


def _snapshot_rows(entries, rng):
    end = START + timedelta(weeks=WEEKS)
    for e in entries:
        ts, value = e.cohort.week_start, 10_000.0
        while ts < end:
            value += rng.gauss(0, 4)
            yield (e.pk, ts, "9000.00", f"{value - 9000:.2f}", f"{value:.2f}", "0.00",
                   f"{value - 10000:.2f}")  # fmt: skip
            ts += STEP


def _snapshots(entries, rng) -> int:
    cols = "entry_id, ts, cash, positions_value, total, realized_pnl, unrealized_pnl"
    table = Snapshot._meta.db_table
    n = 0
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        with (
            connection.connection.cursor() as raw,
            raw.copy(f"COPY {table} ({cols}) FROM STDIN") as copy,
        ):
            for row in _snapshot_rows(entries, rng):
                copy.write_row(row)
                n += 1
        return n
    rows = _snapshot_rows(entries, rng)
    adapt = connection.ops.adapt_datetimefield_value
    with transaction.atomic(), connection.cursor() as cur:
        while True:
            chunk = []
            for row in rows:
                chunk.append((row[0], adapt(row[1]), *row[2:]))
                if len(chunk) == 50_000:
                    break
            if not chunk:
                break
            cur.executemany(
                f"INSERT INTO {table} ({cols}) VALUES (%s, %s, %s, %s, %s, %s, %s)", chunk
            )
            n += len(chunk)
    return n


def measure(
    client: Client, url: str, requests: int, cold: bool = False
) -> tuple[float, float, int]:
    for _ in range(3):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(requests):
        if cold:
            cache.clear()  # the overview chart is cached per snapshot bucket: time the miss
        t = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), max(times), len(response.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.rebuild or not built():
        wipe()
        build()
    oldest = Cohort.objects.filter(label=LABEL).order_by("week_start").first()
    n_snap = Snapshot.objects.filter(entry__cohort=oldest).count()
    print(
        f"database: {connection.vendor}; {Snapshot.objects.count():,} snapshots in total; "
        f"cohort {oldest.pk} has {n_snap:,} ({n_snap // COMPETITORS:,} per entry)"
    )
    client = Client()
    cases = [
        ("home", "/"),
        ("home-cold", "/"),
        ("cohort", f"/cohorts/{oldest.pk}/"),
        ("series", f"/api/cohorts/{oldest.pk}/series?range=ALL"),
        ("series-1W", f"/api/cohorts/{oldest.pk}/series?range=1W"),
        ("entry", f"/cohorts/{oldest.pk}/entries/bench-0/"),
    ]
    print(f"{'page':<10} {'median ms':>10} {'max ms':>8} {'bytes':>9}  target")
    failed = False
    for name, url in cases:
        median, worst, size = measure(client, url, args.requests, cold=name.endswith("-cold"))
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            ok = median <= target and (name != "series" or size <= PAYLOAD_TARGET)
            failed |= not ok
            extra = f", payload <= {PAYLOAD_TARGET // 1024} KB" if name == "series" else ""
            verdict = f"<= {target:.0f} ms{extra}: {'ok' if ok else 'MISSED'}"
        print(f"{name:<10} {median:>10.1f} {worst:>8.1f} {size:>9,}  {verdict}")
    if failed and connection.vendor == "postgresql":
        sys.exit(1)


if __name__ == "__main__":
    main()
