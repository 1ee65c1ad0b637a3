"""Benchmark: a full `compute_scores` over 100,000 resolved forecasts by 12 competitors.

    uv run python bench/scoring_full.py                  # scratch SQLite database in a temp dir
    uv run python bench/scoring_full.py --forecasts 200000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench uv run python bench/scoring_full.py

The data is synthesized with bulk_create in a throwaway database: 8 live cohorts x 12 entries x
5 weekly decisions, each decision stating a probability for the same sampled markets of its
cohort's week (like the forecast sample), ~10 BUY trades per decision with positions and
settlements, a latest snapshot per entry, and a short price history per market (for closing
prices and the tournament). Everything is resolved, so every forecast is scored.

Target (issue 5): the whole run, including the 2,000-resample paired market bootstrap and the
edge statistics (DM matrices, information tests, CLV block bootstrap, champion's clothes,
tournament), <= 10 s.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_S = 10.0
COMPETITORS = 12
COHORTS = 8
WEEKS = 5
TRADES_PER_DECISION = 10
FIRST_WEEK = datetime(2025, 1, 5, tzinfo=UTC)  # a Sunday


def _setup(db: str | None) -> bool:
    """Point Django at a scratch database and migrate it; True when it already holds data."""
    var_dir = tempfile.mkdtemp(prefix="arena-bench-scoring-")
    os.environ["ARENA_VAR_DIR"] = var_dir
    reuse = bool(db) and Path(db).exists()
    db = db or f"{var_dir}/bench.sqlite3"
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{Path(db).resolve()}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    return reuse


def _synthesize(n_forecasts: int, seed: int = 7) -> dict:
    import numpy as np
    from scipy.special import expit, logit

    from agents.models import Competitor
    from cohorts.models import (
        Cohort,
        Decision,
        Entry,
        Forecast,
        Position,
        Settlement,
        Snapshot,
        Trade,
    )
    from markets.models import Market, PricePoint

    rng = np.random.default_rng(seed)
    per_decision = max(1, n_forecasts // (COHORTS * COMPETITORS * WEEKS))
    markets_per_cohort = per_decision * 3  # each week samples a third of the cohort's markets
    comps = Competitor.objects.bulk_create(
        Competitor(slug=f"bench-{i}", display_name=f"Bench {i}", kind="baseline", strategy="random")
        for i in range(COMPETITORS)
    )
    noise = np.linspace(0.2, 2.0, COMPETITORS)  # competitor i's log-odds noise around the truth
    counts = {"forecasts": 0, "trades": 0, "markets": 0, "price_points": 0}
    for c in range(COHORTS):
        week_start = FIRST_WEEK + timedelta(weeks=7 * c)
        close = week_start + timedelta(weeks=WEEKS + 1)
        cohort = Cohort.objects.create(kind="live", week_start=week_start, decision_weeks=WEEKS)
        truth = rng.uniform(0.03, 0.97, markets_per_cohort)
        outcome = rng.random(markets_per_cohort) < truth
        markets = Market.objects.bulk_create(
            Market(
                source="demo",
                external_id=f"bench-{c}-{k}",
                question=f"Q {c}-{k}?",
                kind="binary",
                outcomes=["Yes", "No"],
                status="resolved",
                resolved_outcome="Yes" if outcome[k] else "No",
                resolved_by="demo",
                open_time=week_start,
                close_time=close,
                closed_time=close,
                resolved_at=close,
                last_prices={"Yes": f"{truth[k]:.3f}"},
            )  # fmt: skip
            for k in range(markets_per_cohort)
        )
        counts["markets"] += len(markets)
        # Market path: noisy at first, converging on the truth by the close (6 points a market).
        steps = np.linspace(1.0, 0.1, 6)
        path = expit(logit(truth)[:, None] + rng.normal(0, 1, (markets_per_cohort, 6)) * steps)
        path = np.clip(np.round(path, 3), 0.01, 0.99)
        PricePoint.objects.bulk_create(
            (
                PricePoint(
                    market=m,
                    outcome="Yes",
                    ts=week_start + timedelta(days=7 * j + 1),
                    price=Decimal(f"{path[k, j]:.3f}"),
                )  # fmt: skip
                for k, m in enumerate(markets)
                for j in range(6)
            ),
            batch_size=5000,
        )
        counts["price_points"] += markets_per_cohort * 6
        entries = Entry.objects.bulk_create(
            Entry(cohort=cohort, competitor=comp, cash=Decimal("10000.00")) for comp in comps
        )
        decisions = Decision.objects.bulk_create(
            Decision(
                entry=e,
                week=w + 1,
                status="done",
                claimed_at=week_start + timedelta(weeks=w),
                decided_at=week_start + timedelta(weeks=w, minutes=5),
                cash_before=Decimal("10000.00"),
                tokens_in=20000,
                tokens_out=800,
                cost_usd=Decimal("0.012"),
            )  # fmt: skip
            for e in entries
            for w in range(WEEKS)
        )
        samples = [
            rng.choice(markets_per_cohort, per_decision, replace=False) for _ in range(WEEKS)
        ]
        forecasts, positions, trade_specs = [], [], []
        for d in decisions:
            ci = comps.index(next(x for x in comps if x.pk == d.entry.competitor_id))
            sample = samples[d.week - 1]
            shown = path[sample, d.week - 1]
            p = np.clip(expit(logit(truth[sample]) + rng.normal(0, noise[ci], sample.size)), 0, 1)
            for k, prob, price in zip(sample, p, shown):
                forecasts.append(
                    Forecast(
                        decision=d,
                        entry=d.entry,
                        market=markets[k],
                        outcome="Yes",
                        probability=float(prob),
                        market_price=float(price),
                        created_at=d.decided_at,
                    )  # fmt: skip
                )
            for j in np.argsort(-np.abs(p - shown))[:TRADES_PER_DECISION]:
                k = sample[j]
                side = "Yes" if p[j] > shown[j] else "No"
                price = shown[j] if side == "Yes" else round(1 - shown[j], 3)
                shares = Decimal(50) / Decimal(f"{price:.3f}")
                positions.append(
                    Position(entry=d.entry, market=markets[k], outcome=side,
                             shares=shares.quantize(Decimal("0.000001")), cost_basis=Decimal(50),
                             status="settled", opened_at=d.decided_at, closed_at=close)
                )  # fmt: skip
                trade_specs.append((d, price, shares, (side == "Yes") == outcome[k]))
        Forecast.objects.bulk_create(forecasts, batch_size=5000)
        counts["forecasts"] += len(forecasts)
        positions = Position.objects.bulk_create(positions, batch_size=2000)
        Trade.objects.bulk_create(
            (
                Trade(
                    entry_id=pos.entry_id,
                    decision=d,
                    position=pos,
                    side="BUY",
                    amount=Decimal(50),
                    shares=pos.shares,
                    price=Decimal(f"{price:.3f}"),
                    executed_at=d.decided_at,
                )  # fmt: skip
                for pos, (d, price, _s, _won) in zip(positions, trade_specs)
            ),
            batch_size=2000,
        )
        Settlement.objects.bulk_create(
            (
                Settlement(
                    position=pos,
                    market_id=pos.market_id,
                    kind="won" if won else "lost",
                    outcome="",
                    shares=pos.shares,
                    cost_basis=Decimal(50),
                    payout=pos.shares.quantize(Decimal("0.01")) if won else Decimal(0),
                    settled_at=close,
                )  # fmt: skip
                for pos, (_d, _p, _s, won) in zip(positions, trade_specs)
            ),
            batch_size=2000,
        )
        counts["trades"] += len(positions)
        Snapshot.objects.bulk_create(
            Snapshot(
                entry=e,
                ts=close,
                cash=Decimal("10000.00"),
                positions_value=Decimal(0),
                total=Decimal("10000.00"),
                realized_pnl=Decimal(0),
                unrealized_pnl=Decimal(0),
            )  # fmt: skip
            for e in entries
        )
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--forecasts", type=int, default=100_000)
    parser.add_argument("--db", help="keep the SQLite file here and reuse it on the next run")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the run")
    args = parser.parse_args()
    reuse = _setup(args.db)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scoring.load import load_scope
    from scoring.questions import build_items
    from scoring.services import compute_scores

    if reuse:
        print(f"reusing {args.db}")
    else:
        t0 = time.perf_counter()
        counts = _synthesize(args.forecasts)
        print(f"synthesized in {time.perf_counter() - t0:.1f}s: {counts} ({connection.vendor})")

    t0 = time.perf_counter()
    data = load_scope("live", datetime(2030, 1, 1, tzinfo=UTC))
    build_items(data)
    load_s = time.perf_counter() - t0

    t0, cpu0 = time.perf_counter(), time.process_time()
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    with CaptureQueriesContext(connection) as queries:
        if profiler:
            profiler.enable()
        run = compute_scores("live", as_of=datetime(2030, 1, 1, tzinfo=UTC))
        if profiler:
            profiler.disable()
    total_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
    status = "OK" if total_s <= TARGET_S else "OVER TARGET"
    print(
        f"compute_scores: {total_s:.2f}s wall, {cpu_s:.2f}s CPU (target <= {TARGET_S:.0f}s) "
        f"{status}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
        f"of which loading ~{load_s:.2f}s; {len(queries.captured_queries)} queries; "
        f"run {run.pk} {run.status}: {run.n_resolved} resolved forecasts, "
        f"{run.rows.count()} rows, {COMPETITORS} competitors, {COHORTS} cohorts"
    )
    best = run.rows.filter(cohort=None).order_by("rank").first()
    print(
        f"rank 1: {best.competitor.slug} brier {best.brier:.4f} "
        f"[{best.brier_lo:.4f}, {best.brier_hi:.4f}] skill {best.skill_vs_market:+.4f} "
        f"edge {best.details.get('edge_label')}"
    )


if __name__ == "__main__":
    main()
