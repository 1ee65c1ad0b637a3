"""Page benchmark: server time of every public route, with the page cache off and on.

    uv run python bench/pages.py                      # SQLite file under /tmp (built once)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_pages uv run python bench/pages.py
    ... --rebuild        drop the bench data and build it again
    ... --weeks 40       three times the history (7.4M snapshots; use another database)
    ... --requests 50    requests per URL
    ... --save a.json / --against a.json    keep figures / print this run's against a saved one
    ... --only home,market    some routes (names as printed)
    ... --routes         only check that every route is measured or skipped with a reason

The database: 20 weekly live cohorts x 12 entries; each cohort is snapshotted every 10 minutes
from its start until the end of week WEEKS (a cohort opened later has a shorter history):
about 2.5 million Snapshot rows at 20 weeks, 7.4 million at 40. Plus a few decisions, trades and
positions per entry, 500 markets and a score run, so the pages have their usual content; the
busiest market (BUSY) has what a busy real market has (quotes every 15 minutes, forecasts,
open positions of 48 entries, trades) and one market (OLD) resolved in the first week. The
snapshots are written with COPY, around the services, so the build then runs the chart series'
backfill (cohorts.series.write.rebuild_all, what migration 0004 and `arena rebuild-series` do) and
prints how long it took.

Every route of the site is a case (cases_for), or is listed in SKIPPED with why; a route that
is neither fails the run before anything is measured.

Measured in-process with Django's test Client (URL routing, middleware, views, queries,
template rendering; no network), after 3 warm-up requests:
- wall: the median wall time of one request;
- CPU: this process's CPU time per request (the best batch of 10) plus the PostgreSQL
  backend's (read from /proc, same machine; the mean over the run). On a shared machine wall
  time follows the load; CPU time much less, so the targets are judged on it, and the load
  average is printed with the figures;
- floors: the page's CPU over the static floor's (a static file served through the same
  stack), timed request by request beside the page's own, so both see the same machine.
Cache off: every request renders (the page cache is the one read-side cache, see
docs/deploy.md "Caching"). `+write` times a page right after a committed write (every version
token replaced before each request, untimed: whatever any layer keeps per version is cold);
`+tick` right after a snapshot tick (a committed tick before every request, untimed, run by a
process of its own as a Celery worker runs it: TickProcess; the ticks' rows are deleted and
the series rewound at the end); the tick itself is timed too. `+idle`, the reference for
`+tick`: a pause as long as a tick before every request, and nothing else. Cache on:
hits, after the warm-up filled the cache.

Targets (PostgreSQL, cache off, CPU per request, cold; issue 44): every page <= 10 ms, every
JSON route and `/` <= 5 ms, set on a machine whose floor was
0.14 ms and judged in floors (10 ms = 71 floors), as this machine's speed is not that one's;
at three times the history within 1.3 x of these (--against). Cache on: `/` at least 0.5 x
the static floor's throughput (at most 2 floors).

Like a gunicorn worker (gunicorn.conf.py), the bench freezes what it has loaded out of the
garbage collector's sight before it measures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
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

from django.conf import settings  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from agents.models import Competitor  # noqa: E402
from cohorts.models import Cohort, Decision, Entry, Forecast, Position, Snapshot, Trade, Universe  # noqa: E402
from cohorts.series import write as series  # noqa: E402
from cohorts.settlement import settle_pending  # noqa: E402
from cohorts.snapshots import take_snapshot  # noqa: E402
from core.versions import scores_changed, values_changed  # noqa: E402
from markets.models import Market, PricePoint  # noqa: E402
from scoring.models import LeaderboardRow, ScoreRun  # noqa: E402
from scoring.services import store_board_slices  # noqa: E402
from scoring.stored import (  # noqa: E402
    CohortRef,
    DmPair,
    DmTables,
    Methodology,
    RunDetails,
    TournamentTable,
    TournamentTake,
)

COHORTS = 20
COMPETITORS = 12
STEP = timedelta(minutes=10)
START = datetime(2026, 1, 4, tzinfo=UTC)  # a Sunday
LABEL = "bench-pages"
BUDGET_PAGE = 10.0  # ms of app + database CPU, cold, a page (issue 44)
BUDGET_JSON = 5.0  # a JSON route, and `/`
TICKED = ("home", "cohort", "series")  # and right after a snapshot tick
# The ms budgets were set on a machine whose static floor read 0.14 ms (docs/deploy.md): in
# floors, what a page may cost on any machine is the budget over that floor (10 ms = 71).
REFERENCE_FLOOR_MS = 0.14
HIT_FLOOR = 0.5  # `/` served from the page cache: at least this share of the static floor
HISTORY_RATIO = 1.3  # at three times the history, within this of the figure at one
FLOOR_URL = "/static/arena/site.css"  # its content-hashed name once collected (main)
BATCH = 10  # requests per CPU-time batch
WEEKS = int(os.environ.get("BENCH_WEEKS", "20"))


def built() -> bool:
    if Cohort.objects.filter(label=LABEL).count() != COHORTS:
        return False
    # Not "the newest snapshot is the history's last": a run in progress has ticked past it
    # (its rows are deleted at its end), and reading that as "not built" made a second run
    # wipe the data under the first. A longer history (another --weeks) reaches days further.
    end = START + timedelta(weeks=WEEKS)
    ours = Snapshot.objects.filter(entry__cohort__label=LABEL)
    return (
        ours.filter(ts=end - STEP).exists()
        and not ours.filter(ts__gte=end + timedelta(days=2)).exists()
    )


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
        # Polymarket's, as a live site's are: `/` of a live scope with no Polymarket market
        # synced reads the sync's job runs and says to sync markets first.
        markets = Market.objects.bulk_create(
            Market(
                source=Market.Source.POLYMARKET, external_id=f"bench-{i}",
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
    series.rebuild_all()
    t3 = time.perf_counter()
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    print(
        f"built: {n:,} snapshots in {t2 - t1:.1f}s (other rows {t1 - t0:.1f}s); chart series "
        f"backfill of {len(entries)} entries in {t3 - t2:.1f}s"
    )


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
        n_forecasts=5000, n_resolved=2000, details=run_details(comps, cohorts, rng),
    )  # fmt: skip
    store_board_slices(run, run.stored_details)  # as compute_scores does
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


def run_details(comps, cohorts, rng) -> dict:
    """A run's details of the size and shape the engine stores (scoring/stored.RunDetails):
    for every group (all cohorts, and each cohort) its headline, its paired tests of every
    pair of competitors in Brier and log loss, and its tournament table; about 200 kB here,
    what pages must not parse once per leaderboard row."""
    groups = ["all", *(str(c.pk) for c in cohorts)]
    slugs = [k.slug for k in comps]

    def pairs() -> list[DmPair]:
        return [
            DmPair(a, b, 200, rng.uniform(-0.02, 0.02), rng.uniform(-3, 3), rng.random(), 0.05,
                   rng.choice(["no difference", "better", "worse"]))
            for i, a in enumerate(slugs) for b in slugs[i + 1:]
        ]  # fmt: skip

    return RunDetails(
        headline_rule="brier_skill_vs_market once a group has resolved forecasts with prices",
        headline_by_cohort=dict.fromkeys(groups, "brier_skill_vs_market"),
        notes=[f"bench note {i}: a rule a reader should know about" for i in range(10)],
        dm={g: DmTables(pairs(), pairs(), 200) for g in groups},
        tournament={
            g: TournamentTable(
                200,
                [
                    TournamentTake(k, 200, rng.random(), 1.0, rng.random(), 1 / len(slugs))
                    for k in slugs
                ],
            )
            for g in groups
        },  # fmt: skip
        cohorts=[CohortRef(c.pk, c.week_start.isoformat(), c.label, "1") for c in cohorts],
        methodology=Methodology("1", "0" * 64),
    ).to_json()


def ensure_run_details() -> None:
    """A bench database built before its run had details, or its groups' board slices, gets
    them (the pages read them)."""
    run = ScoreRun.objects.filter(engine_version=LABEL).first()
    if run is not None and not run.details:
        comps = list(Competitor.objects.filter(slug__startswith="bench-").order_by("pk"))
        cohorts = list(Cohort.objects.filter(label=LABEL).order_by("week_start"))
        run.details = run_details(comps, cohorts, random.Random(7))
        run.save(update_fields=["details"])
    if run is not None and not run.board_slices.exists():
        store_board_slices(run, run.stored_details)


# The busiest market: what a market every cohort trades looks like after WEEKS weeks, so the
# market page is timed on the page a real busy market has (an empty one is 2.8 kB and reads
# nothing). Quotes every 15 minutes (the `sync-markets` beat, both outcomes); a forecast by
# every entry in each of its weekly decisions; an open position held by every entry of the
# HOLDER_COHORTS newest cohorts, bought over three weeks; a round trip (buy, then sell) by
# every entry of the older cohorts.
BUSY = "bench-0"
OLD = "bench-499"  # resolved in the first week: the long tail's old market, with its history
QUOTE_STEP = timedelta(minutes=15)
HOLDER_COHORTS = 4


def busy_built() -> bool:
    return PricePoint.objects.filter(market__external_id=BUSY).exists()


def build_busy_market() -> None:
    """Adds the busy and the old market's rows to a bench database (one built before they
    existed gets them without rebuilding its snapshots)."""
    rng = random.Random(11)
    t0 = time.perf_counter()
    end = START + timedelta(weeks=WEEKS)
    with transaction.atomic():
        busy = Market.objects.get(external_id=BUSY)
        old = Market.objects.get(external_id=OLD)
        PricePoint.objects.filter(market__in=[busy, old]).delete()
        Forecast.objects.filter(market__in=[busy, old]).delete()
        Trade.objects.filter(position__market__in=[busy, old]).delete()
        Position.objects.filter(market__in=[busy, old]).delete()
        n_quotes = _quotes(busy, START, end, QUOTE_STEP, rng)
        n_quotes += _quotes(old, START - timedelta(weeks=2), START + timedelta(days=6),
                            timedelta(hours=1), rng)  # fmt: skip
        busy.open_time, busy.last_priced_at = START - timedelta(weeks=1), end - QUOTE_STEP
        busy.last_synced_at = end - QUOTE_STEP
        busy.save(update_fields=["open_time", "last_priced_at", "last_synced_at"])
        old.status, old.resolved_outcome = Market.Status.RESOLVED, "No"
        old.resolved_at = old.closed_time = START + timedelta(days=6)
        old.last_priced_at = START + timedelta(days=6)
        old.save(update_fields=["status", "resolved_outcome", "resolved_at", "closed_time",
                                "last_priced_at"])  # fmt: skip
        cohorts = list(Cohort.objects.filter(label=LABEL).order_by("week_start"))
        holders = {c.pk for c in cohorts[-HOLDER_COHORTS:]}
        decisions = list(
            Decision.objects.filter(entry__cohort__label=LABEL)
            .select_related("entry").order_by("entry_id", "week")
        )  # fmt: skip
        forecasts, positions, trades = [], [], []
        by_entry: dict[int, list[Decision]] = {}
        for d in decisions:
            by_entry.setdefault(d.entry_id, []).append(d)
            price = rng.uniform(0.3, 0.6)
            forecasts.append(
                Forecast(decision=d, entry=d.entry, market=busy, outcome="Yes",
                         probability=min(0.99, max(0.01, price + rng.gauss(0, 0.1))),
                         market_price=price, source="bet", created_at=d.decided_at)
            )  # fmt: skip
            if d.entry.cohort_id == cohorts[0].pk and d.week == 1:
                forecasts.append(
                    Forecast(decision=d, entry=d.entry, market=old, outcome="Yes",
                             probability=rng.uniform(0.1, 0.6), market_price=0.3,
                             source="bet", created_at=d.decided_at)
                )  # fmt: skip
        Forecast.objects.bulk_create(forecasts, batch_size=1000)
        for ds in by_entry.values():
            entry = ds[0].entry
            held = entry.cohort_id in holders
            p = Position(entry=entry, market=busy, outcome=rng.choice(["Yes", "No"]),
                         shares=Decimal(0), cost_basis=Decimal(0), opened_at=ds[0].claimed_at,
                         status="open" if held else "exited",
                         closed_at=None if held else ds[1].claimed_at)  # fmt: skip
            legs = [("BUY", d) for d in ds[:3]] if held else [("BUY", ds[0]), ("SELL", ds[1])]
            for side, d in legs:
                price = Decimal(f"{rng.uniform(0.3, 0.6):.4f}")
                amount = Decimal(rng.randrange(50, 400))
                shares = (amount / price).quantize(Decimal("0.000001"))
                if side == "BUY":
                    p.shares += shares
                    p.cost_basis += amount
                trades.append(Trade(entry=entry, decision=d, position=p, side=side,
                                    amount=amount, shares=shares, price=price,
                                    executed_at=d.claimed_at))  # fmt: skip
            if not held:
                p.shares = Decimal(0)
            positions.append(p)
        Position.objects.bulk_create(positions, batch_size=500)
        Trade.objects.bulk_create(trades, batch_size=500)
    print(
        f"busy market {busy.pk}: {n_quotes:,} quotes (with the old market {old.pk}'s), "
        f"{len(forecasts):,} forecasts, {sum(p.status == 'open' for p in positions)} open "
        f"positions, {len(trades)} trades, in {time.perf_counter() - t0:.1f}s"
    )


def _quotes(market, since, until, step, rng) -> int:
    rows, ts, yes = [], since, 0.45
    while ts < until:
        yes = min(0.97, max(0.03, yes + rng.gauss(0, 0.01)))
        rows.append(PricePoint(market=market, outcome="Yes", ts=ts, price=Decimal(f"{yes:.6f}")))
        rows.append(PricePoint(market=market, outcome="No", ts=ts, price=Decimal(f"{1 - yes:.6f}")))
        ts += step
    PricePoint.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


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


_BACKEND_PID: dict[int, int] = {}  # id(connection.connection) -> its server process


def _backend_cpu() -> float:
    """CPU seconds used so far by this connection's database server process (PostgreSQL on
    this machine), 0 elsewhere. The process id is asked once per connection: asking on every
    read would put a query of the bench's own into every measured request."""
    if connection.vendor != "postgresql":
        return 0.0
    connection.ensure_connection()
    key = id(connection.connection)
    if key not in _BACKEND_PID:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            _BACKEND_PID[key] = cur.fetchone()[0]
    try:
        stat = Path(f"/proc/{_BACKEND_PID[key]}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class QueryCount:
    """Queries sent while it is installed (connection.execute_wrapper)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)


@dataclass
class Figure:
    name: str
    url: str
    wall: float  # ms, median
    app: float  # ms of CPU per request, this process
    db: float  # ms of CPU per request, the database backend
    size: int
    floor: float | None = None  # ms of CPU of the static floor timed beside it (measure)

    @property
    def cpu(self) -> float:
        return self.app + self.db

    def floors(self, run_floor: float) -> float:
        """The page's CPU in static floors: its paired floor's, else the run's."""
        return self.cpu / (self.floor or run_floor)


def _consume(response) -> int:
    """The body's length, reading it (a static file streams: reading it is part of serving)."""
    if response.streaming:
        size = sum(len(chunk) for chunk in response.streaming_content)
        response.close()
        return size
    return len(response.content)


def measure(
    client: Client, name: str, url: str, requests: int, before=None, floor_url: str | None = None
) -> Figure:
    """`before()` runs ahead of every timed request, untimed (its CPU is left out too).

    With `floor_url`, each batch of the page's requests follows a batch of the static floor's,
    and the figure keeps the floor's best batch: this machine's speed drifts by 2 x within
    minutes, so a floor measured once per run is no yardstick for a page timed a minute later.
    Not request by request: a static file served right after a page (or a write) reads up to
    twice its cost, on caches the page has just filled with its own data.

    App CPU is the best of batches of BATCH requests: other processes on a shared machine only
    ever add to it (cache misses, migrations between cores), so the least is the closest to the
    page's own cost. The database backend's CPU is read in 10 ms clock ticks, so it is the
    mean over the whole run, counting only the requests that sent it a query: a clock tick
    that falls in a request which sent none (a page cache hit, the static floor) is some other
    work of the server's, and at 1 ms a request one tick in 30 would read as a third of it."""
    for _ in range(3):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        _consume(response)
    walls, batches, floors, db = [], [], [], 0.0
    for start in range(0, requests, BATCH):
        n = min(BATCH, requests - start)
        if floor_url is not None:
            _consume(client.get(floor_url))  # the first after a page is not the floor's cost
            floor0 = time.process_time()
            for _ in range(n):
                _consume(client.get(floor_url))
            floors.append((time.process_time() - floor0) * 1000 / n)
        app = 0.0
        for _ in range(n):
            if before is not None:
                before()
            db0, sent = _backend_cpu(), QueryCount()
            app0, t = time.process_time(), time.perf_counter()
            with connection.execute_wrapper(sent):
                response = client.get(url)
                size = _consume(response)
            walls.append((time.perf_counter() - t) * 1000)
            app += time.process_time() - app0
            if sent.n:
                db += _backend_cpu() - db0
        batches.append(app * 1000 / n)
    assert response.status_code == 200, (url, response.status_code)
    paired = min(floors) if floor_url is not None else None
    return Figure(
        name, url, statistics.median(walls), min(batches), db * 1000 / requests, size, paired
    )


class Ticker:
    """Snapshot ticks after the bench data's end, one per call, each committed as the real task
    commits it (so the values token moves and pages recompute what depends on values, as they
    would right after a real tick). close() deletes the rows they added and rewinds the series
    to where they were, so the data set stays as built. With settle=True each tick settles
    what lags first, as the `snapshot` task does."""

    def __init__(self, settle: bool = False):
        self.start = self.at = Snapshot.objects.order_by("-ts").values_list("ts", flat=True)[0]
        self.settle = settle
        self.times: list[float] = []
        self.rows = 0

    def __call__(self) -> None:
        # Ticks come ten minutes apart, and PostgreSQL's autovacuum (on by default, checking
        # every minute) clears the previous tick's dead row versions in between. This server
        # may run without it, so the bench clears them itself, untimed: the page then reads what
        # it would right after a tick in production (that tick's dead rows, not every earlier
        # tick's of the run).
        vacuum()
        self.at += STEP
        t = time.perf_counter()
        if self.settle:
            settle_pending(self.at)
        self.rows += take_snapshot(self.at)
        self.times.append((time.perf_counter() - t) * 1000)

    def close(self) -> None:
        if self.at == self.start:
            return
        ticked = Snapshot.objects.filter(ts__gt=self.start)
        entries = list(ticked.values_list("entry_id", flat=True).distinct())
        ticked.delete()
        series.rebuild_entries(entries, since=self.start + STEP)  # replaces the values token
        self.at = self.start
        vacuum()


class TickProcess:
    """A Ticker in a process of its own, as in production a Celery worker ticks while gunicorn
    workers serve pages: a tick run in the serving process would leave the page timed after it
    the tick's memory to fault back in and its garbage to collect (measured: a page after an
    in-process tick took 1.5-2 ms more CPU than after a token write; after 80 ms of unrelated
    numpy work in the same process, three times its CPU)."""

    def __init__(self, settle: bool = False):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_tick_worker, args=(child, settle), daemon=True)
        self._process.start()
        self.times: list[float] = []
        self.rows = 0

    def __call__(self) -> None:
        self._pipe.send("tick")
        self.times.append(self._pipe.recv())

    def close(self) -> None:
        self._pipe.send("close")
        self.rows = self._pipe.recv()
        self._process.join(timeout=60)


def _tick_worker(pipe, settle: bool) -> None:
    connection.close()  # its own connection, not a copy of the parent's
    ticker = Ticker(settle)
    try:
        while pipe.recv() == "tick":
            ticker()
            pipe.send(ticker.times[-1])
    finally:
        ticker.close()
        pipe.send(ticker.rows)


# The tables a tick rewrites. Each tick (and each rewind) leaves dead row versions behind; a
# server with autovacuum off (this machine's) would otherwise read more of them every run.
CHURNED = ("cohorts_serieshead", "cohorts_serieschunk", "cohorts_scopeserieshead",
           "cohorts_scopeserieschunk", "cohorts_snapshot")  # fmt: skip


def vacuum() -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cur:
        for table in CHURNED:
            cur.execute(f"VACUUM ANALYZE {table}")


def analyze() -> None:
    """The planner's statistics and the visibility map of every table, as autovacuum would
    leave them after a bulk build: without statistics PostgreSQL plans the busy market's tens of
    thousands of quotes as a few dozen rows (a sort spilled to disk instead of an index scan);
    without the visibility map (a server with autovacuum off never sets it) every index-only
    scan visits the heap too (the busy market's two whole-history quote reads took 1.7 x as
    long). A few seconds once, then next to nothing."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE")


def written() -> None:
    """A committed write, as far as readers can tell: every version token replaced."""
    scores_changed()
    values_changed()


def idle(seconds: float):
    """Before each request, nothing but a pause as long as a tick: the reference for +tick.
    On this machine a page served after any pause of that length costs more CPU than one
    served back to back (caches and clocks cool), whatever happened in the pause."""
    return lambda: time.sleep(seconds)


def target(f: Figure) -> float | None:
    """The ms budget of issue 44 (every route cheap when cold): 5 ms for the JSON routes and
    `/` (what visitors' scripts and the home page ask most), 10 ms for every other page."""
    if f.name.endswith("+idle"):
        return None  # a reference, not a case the budgets name
    return BUDGET_JSON if f.name.split("+")[0] == "home" or is_json(f.url) else BUDGET_PAGE


def is_json(url: str) -> bool:
    return url.startswith("/api/")


# Routes the bench does not time, each with why. Every other route of the site must be among
# the cases (check_coverage fails the run otherwise), so a new route cannot go unmeasured.
SKIPPED = {
    "admin/": "staff only, behind a login; never cached for visitors",
    "healthz": "a probe of the worker heartbeat, not a page",
    "exports/<slug:what>.<slug:fmt>": "streamed downloads of whole tables, bounded separately, never page-cached",
    "api/agent/v1/": "needs an agent's signed token (bench/agents_load.py measures it)",
}


def site_routes() -> list[str]:
    """Every route of the root URLconf, as its full pattern string."""
    from django.urls import URLResolver, get_resolver

    def walk(patterns, prefix: str):
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, route)
            else:
                yield route

    return list(walk(get_resolver().url_patterns, ""))


def check_coverage(cases: list[tuple[str, str]]) -> list[str]:
    """The routes neither measured by a case nor skipped with a reason (empty: all covered)."""
    from urllib.parse import urlsplit

    from django.urls import resolve

    measured = {resolve(urlsplit(url).path).route for _, url in cases}
    return [
        r for r in site_routes()
        if r not in measured and not any(r.startswith(prefix) for prefix in SKIPPED)
    ]  # fmt: skip


def cases_for(oldest: Cohort) -> list[tuple[str, str]]:
    """One URL per public route (and a few per route where the long tail differs: market list
    pages beyond the first, a search, an old market, a series' short range)."""
    from web.method import method_files

    busy = Market.objects.get(external_id=BUSY)
    old = Market.objects.get(external_id=OLD)
    decision = Decision.objects.filter(entry__cohort=oldest, entry__competitor__slug="bench-0")
    decision = decision.order_by("week").first()
    doc = next(f["html"] for f in method_files().values() if f["html"])
    last_page = -(-Market.objects.count() // 50)  # web.selectors.MARKET_PAGE_SIZE
    return [
        ("home", "/"),
        ("cohorts", "/cohorts/"),
        ("cohort", f"/cohorts/{oldest.pk}/"),
        ("entry", f"/cohorts/{oldest.pk}/entries/bench-0/"),
        ("competitors", "/competitors/"),
        ("competitor", "/competitors/bench-0/"),
        ("markets", "/markets/"),
        ("markets-last", f"/markets/?page={last_page}"),
        ("markets-q", "/markets/?q=market+42"),
        ("market", f"/markets/{busy.pk}/"),
        ("market-old", f"/markets/{old.pk}/"),
        ("decision", f"/decisions/{decision.pk}/"),
        ("methodology", "/methodology/"),
        ("spec", "/methodology/spec.md"),
        ("about", "/about/"),
        ("enter", "/enter/"),
        ("exports", "/exports/"),
        ("method", "/method/"),
        ("method-doc", doc),
        ("openapi", "/api/openapi.json"),
        ("api-cohorts", "/api/cohorts/"),
        ("api-cohort", f"/api/cohorts/{oldest.pk}"),
        ("series", f"/api/cohorts/{oldest.pk}/series?range=ALL"),
        ("series-1W", f"/api/cohorts/{oldest.pk}/series?range=1W"),
        ("api-decision", f"/api/decisions/{decision.pk}"),
        ("leaderboard", "/api/leaderboard"),
        ("overview", "/api/overview?scope=live&range=1M"),
        ("api-markets", "/api/markets"),
        ("api-market", f"/api/markets/{busy.pk}"),
        ("api-prices", f"/api/markets/{busy.pk}/prices?range=ALL"),
        ("api-seals", "/api/seals"),
    ]


def run(
    client: Client, requests: int, oldest: Cohort, only: set[str] | None = None, ticks=True
) -> tuple[list[Figure], list[Figure], float]:
    cases = [(n, u) for n, u in cases_for(oldest) if not only or n in only]
    floor = measure(client, "floor", FLOOR_URL, requests)
    off, on = [floor], []
    with override_settings(ARENA_PAGE_CACHE=False):
        for name, url in cases:
            off.append(measure(client, name, url, requests, floor_url=FLOOR_URL))
        for name, url in cases:
            at = next(i for i, f in enumerate(off) if f.name == name) + 1
            off.insert(at, measure(client, f"{name}+write", url, requests, written, FLOOR_URL))
        ticker = TickProcess()
        try:
            for name, url in cases:
                if ticks and name in TICKED:
                    at = next(i for i, f in enumerate(off) if f.name.startswith(name)) + 2
                    off.insert(
                        at, measure(client, f"{name}+tick", url, requests, ticker, FLOOR_URL)
                    )
                    pause = statistics.median(ticker.times) / 1000
                    off.insert(
                        at + 1,
                        measure(client, f"{name}+idle", url, requests, idle(pause), FLOOR_URL),
                    )
        finally:
            ticker.close()
    with override_settings(ARENA_PAGE_CACHE=True):
        cache.clear()
        for name, url in cases:
            on.append(measure(client, name, url, requests, floor_url=FLOOR_URL))
    return off, on, statistics.median(ticker.times) if ticker.times else 0.0


def profile(client: Client, oldest: Cohort, name: str, requests: int) -> None:
    """cProfile of `requests` cold renders of one page (every version token replaced before
    each, untimed), the 40 costliest functions by cumulative and by own time."""
    import cProfile
    import pstats

    url = dict(cases_for(oldest))[name]
    with override_settings(ARENA_PAGE_CACHE=False):
        for _ in range(3):
            client.get(url)
        prof = cProfile.Profile()
        for _ in range(requests):
            written()
            prof.enable()
            client.get(url)
            prof.disable()
    prof.dump_stats(f"/tmp/bench-pages-{name}.prof")  # for pstats / snakeviz
    stats = pstats.Stats(prof).strip_dirs()
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)


def report(off: list[Figure], on: list[Figure], tick_ms: float, against: dict | None) -> bool:
    """Print the figures and judge the targets, in static floors: a page's CPU over its paired
    floor's, against the budget over the floor of the machine it was set on
    (REFERENCE_FLOOR_MS). The ms figures are printed beside, for this machine."""
    floor = off[0]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"floor: {floor.url} {floor.cpu:.2f} ms CPU per request (wall {floor.wall:.2f} ms); "
        f"each page's own floor is timed beside its requests; floors = page CPU / floor CPU "
        f"(budgets: ms / {REFERENCE_FLOOR_MS} ms); load average {load}"
    )
    print(f"snapshot tick (every live entry, series included): median {tick_ms:.0f} ms")
    ok = True
    for title, figures, judged in (
        ("page cache OFF", off[1:], True),
        ("page cache ON (hits)", on, False),
    ):
        print(f"\n{title}")
        print(f"{'page':<19} {'CPU ms':>7} {'(app+db)':>13} {'floor':>6} {'floors':>7} "
              f"{'wall ms':>8} {'bytes':>8}  target")  # fmt: skip
        for f in figures:
            verdict, floors = "", f.floors(floor.cpu)
            limit = target(f) if judged else None
            if not judged and f.name == "home" and f.cpu:
                good = floors <= 1 / HIT_FLOOR
                verdict = f"<= {1 / HIT_FLOOR:.0f} floors: {'ok' if good else 'MISSED'}"
                ok &= good
            if limit is not None and connection.vendor == "postgresql":
                budget = limit / REFERENCE_FLOOR_MS
                good = floors <= budget
                verdict = (f"<= {budget:.0f} floors: {'ok' if good else 'MISSED'} "
                           f"({limit:.0f} ms here: {'ok' if f.cpu <= limit else 'over'})")  # fmt: skip
                if against and f.name in against:
                    then = against[f.name]["floors"]
                    good_h = floors <= then * HISTORY_RATIO and floors <= budget * HISTORY_RATIO
                    verdict += (f"; {floors / then:.2f} x the saved run ({then:.0f} floors): "
                                f"{'ok' if good_h else 'MISSED'}")  # fmt: skip
                    good &= good_h
                ok &= good
            print(f"{f.name:<19} {f.cpu:>7.2f} {f'({f.app:.2f}+{f.db:.2f})':>13} "
                  f"{f.floor or floor.cpu:>6.2f} {floors:>7.1f} {f.wall:>8.2f} {f.size:>8,}  "
                  f"{verdict}")  # fmt: skip
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--weeks", type=int, default=20, help="weeks of history (default 20)")
    parser.add_argument("--save", help="write this run's cache-off CPU figures to a JSON file")
    parser.add_argument("--against", help="compare with figures saved by --save")
    parser.add_argument("--only", help="comma-separated page names (home,cohort,...)")
    parser.add_argument("--profile", help="cProfile cold renders of this page instead")
    parser.add_argument("--routes", action="store_true", help="only check every route is covered")
    # The +tick and +idle cases pause a tick's length before each request: on a loaded machine
    # they take most of a run's wall time.
    parser.add_argument("--no-ticks", action="store_true", help="skip the +tick and +idle cases")
    args = parser.parse_args()
    global WEEKS
    WEEKS = args.weeks
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    # Static files are served under content-hashed names only (arena/static_storage.py).
    global FLOOR_URL
    from django.templatetags.static import static

    FLOOR_URL = static("arena/site.css")
    if args.rebuild or not built():
        wipe()
        build()
    ensure_run_details()
    if args.rebuild or not busy_built():
        build_busy_market()
    analyze()
    vacuum()
    oldest = Cohort.objects.filter(label=LABEL).order_by("week_start").first()
    missing = check_coverage(cases_for(oldest))
    if missing:
        # A route nobody measures is a route whose cold cost nobody knows: add a case for it,
        # or a reason to SKIPPED.
        sys.exit(f"routes neither measured nor skipped with a reason: {', '.join(missing)}")
    print(
        f"every route measured but {len(SKIPPED)} skipped: "
        + "; ".join(f"{prefix} ({why})" for prefix, why in SKIPPED.items())
    )
    n_snap = Snapshot.objects.filter(entry__cohort=oldest).count()
    print(
        f"database: {connection.vendor}; {Snapshot.objects.count():,} snapshots in total; "
        f"cohort {oldest.pk} has {n_snap:,} ({n_snap // COMPETITORS:,} per entry); "
        f"cache: {settings.CACHES['default']['BACKEND'].rsplit('.', 1)[-1]}"
    )
    if args.routes:
        return
    if args.profile:
        profile(Client(), oldest, args.profile, args.requests)
        return
    only = set(args.only.split(",")) if args.only else None
    gc.collect()
    gc.freeze()
    off, on, tick_ms = run(Client(), args.requests, oldest, only, ticks=not args.no_ticks)
    against = json.loads(Path(args.against).read_text()) if args.against else None
    ok = report(off, on, tick_ms, against)
    if args.save:
        saved = {f.name: {"cpu": f.cpu, "floors": f.floors(off[0].cpu)} for f in off}
        Path(args.save).write_text(json.dumps(saved))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
