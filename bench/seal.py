"""Benchmark: sealing a 12-entry week, and `arena verify` over 20 cohorts (cohorts/seals/sealing.py).

    uv run python bench/seal.py                       # SQLite in a temp dir
    DATABASE_URL=postgres://.../arena_bench uv run python bench/seal.py --cohorts 20

The records are the size of live ones: a universe of --markets (500) markets frozen by the real
freeze_universe, the real system and user prompts for it, two model calls per LLM entry whose
request bodies carry those prompts (as OpenRouter requests do) and whose raw responses hold a
decision with 20 forecasts, 20 forecasts and one BUY (trade + ledger row) per entry. The rows are
bulk-inserted (running 1,200 decisions through the pipeline would measure the pipeline); sealing
and verifying then run the real code over them.

With --scores, the 20 forecast markets are then resolved through the resolution service (their
settlements and events included), the live scope is scored once (the run's record goes into the
event log, so the database verify checks its published rows too), and `arena verify --scores`
(every scope's exports rebuilt and the latest run recomputed from them) is timed as well.

Targets: sealing one 12-entry week <= 1 s; verifying 20 cohorts x --weeks (5) weeks x 12 entries
<= 10 s. Each figure is also given as a ratio to a floor measured in the same run on the same
rows: reading them (the five queries seal and verify make) and hashing their canonical bytes, so
a slow machine or a loaded one shows up in the floor too. Note the load average printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEAL_TARGET_S = 1.0
VERIFY_TARGET_S = 10.0
START = datetime(2026, 1, 4, tzinfo=UTC)
N_LLM, N_BASELINE = 7, 5


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cohorts", type=int, default=20)
    p.add_argument("--weeks", type=int, default=5)
    p.add_argument("--markets", type=int, default=500)
    p.add_argument("--profile", action="store_true", help="print where verify spends its time")
    p.add_argument(
        "--scores",
        action="store_true",
        help="also resolve the forecast markets, score the scope and time `arena verify --scores`",
    )
    return p.parse_args()


def configure_env() -> str:
    var_dir = tempfile.mkdtemp(prefix="arena-bench-seal-")
    os.environ["ARENA_VAR_DIR"] = var_dir
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{var_dir}/bench.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "arena.settings"
    return var_dir


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def seed_markets(n: int):
    from markets.models import Market

    Market.objects.bulk_create(
        Market(
            external_id=f"bench-seal-{i}",
            question=f"Will the announcement #{i} be made before the deadline?",
            description="Resolves Yes if the named source announces it before the close date. " * 3,
            outcomes=["Yes", "No"],
            last_prices={"Yes": str(Decimal(3 + (i * 37) % 94) / 100)},
            volume=Decimal(10_000_000 - i * 1000),
            close_time=START + timedelta(days=200 + i % 90),
        )
        for i in range(n)
    )


def competitors():
    from agents.models import Competitor

    made = [
        Competitor.objects.create(
            slug=f"bench-llm-{i}", display_name=f"LLM {i}", kind="llm", model_id=f"bench/m{i}"
        )
        for i in range(N_LLM)
    ]
    made += [
        Competitor.objects.create(
            slug=f"bench-base-{i}", display_name=f"Base {i}", kind="baseline", strategy="random"
        )
        for i in range(N_BASELINE)
    ]
    return made


def model_text(universe) -> str:
    forecasts = [{"market_id": str(m), "probability": 0.37} for m in universe.forecast_sample]
    bet = {"market_id": str(universe.markets[0]["market_id"]), "outcome": "Yes", "amount": 100}
    body = {"action": "BET", "bets": [bet], "forecasts": forecasts, "reasoning": "x" * 1500}
    return json.dumps(body)


def build_week(cohort, week: int, entries, template) -> None:
    """One decided week: universe, 12 decisions, their calls, forecasts, trades and ledger."""
    from cohorts.models import (
        Decision,
        Forecast,
        LedgerEntry,
        LLMCall,
        Position,
        Trade,
        Universe,
    )

    at = cohort.week_start + timedelta(weeks=week - 1, minutes=5)
    u = Universe.objects.create(
        cohort=cohort,
        week=week,
        frozen_at=at,
        content_hash=template["universe"].content_hash,
        markets=template["universe"].markets,
        forecast_sample=template["universe"].forecast_sample,
    )
    decisions = Decision.objects.bulk_create(
        Decision(
            entry=e,
            week=week,
            status="done",
            claimed_at=at,
            finished_at=at,
            decided_at=at,
            action="BET",
            reasoning="x" * 1500,
            parsed=template["parsed"],
            universe=u,
            universe_hash=u.content_hash,
            prompt_version="v1",
            prompt_sha256="0" * 64,
            system_prompt=template["system"],
            user_prompt=template["user"],
            forecast_sample=u.forecast_sample,
            cash_before=Decimal("10000.00"),
            tokens_in=30000,
            tokens_out=2000,
            cost_usd=Decimal("0.051234"),
            latency_ms=12000,
        )
        for e in entries
    )
    calls = []
    for d, e in zip(decisions, entries):
        n_calls = 2 if e.competitor.kind == "llm" else 1
        for attempt in range(1, n_calls + 1):
            calls.append(
                LLMCall(
                    decision=d,
                    attempt=attempt,
                    url="https://openrouter.ai/api/v1/chat/completions",
                    request=template["request"],
                    raw_response=template["raw"],
                    http_status=200,
                    prompt_tokens=30000,
                    completion_tokens=2000,
                    cost_usd=Decimal("0.025617"),
                    latency_ms=6000,
                    served_model="bench/model",
                    started_at=at,
                )
            )
    LLMCall.objects.bulk_create(calls)
    sample = u.forecast_sample[:20]
    Forecast.objects.bulk_create(
        Forecast(
            decision=d,
            entry=e,
            market_id=m,
            outcome="Yes",
            probability=0.37,
            market_price=0.41,
            source="sample",
            created_at=at,
        )
        for d, e in zip(decisions, entries)
        for m in sample
    )
    market_id = u.markets[week % len(u.markets)]["market_id"]
    positions = Position.objects.bulk_create(
        Position(
            entry=e,
            market_id=market_id,
            outcome="Yes",
            shares=Decimal("243.902439"),
            cost_basis=Decimal("100.00"),
            opened_at=at,
        )
        for e in entries
    )
    trades = Trade.objects.bulk_create(
        Trade(
            entry=e,
            decision=d,
            position=p,
            side="BUY",
            amount=Decimal("100.00"),
            shares=Decimal("243.902439"),
            price=Decimal("0.410000"),
            quote={"price": "0.410000", "source": "decision"},
            executed_at=at,
        )
        for d, e, p in zip(decisions, entries, positions)
    )
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            entry=e,
            kind="buy",
            amount=Decimal("-100.00"),
            trade=t,
            memo=f"buy Yes in market {market_id}",
            created_at=at,
        )
        for e, t in zip(entries, trades)
    )


def main() -> None:
    args = parse_args()
    var_dir = configure_env()
    try:
        _bench(args)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


def _bench(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    from django.db.models import Sum

    from agents import prompts
    from cohorts.models import Cohort, Decision, Entry, LedgerEntry
    from cohorts.seals import sealing as seals
    from cohorts.seals.verify import export_chunks, verify_database, verify_export
    from cohorts.universe import freeze_universe

    t0 = time.perf_counter()
    seed_markets(args.markets)
    lineup = competitors()
    template_cohort = Cohort.objects.create(kind="replay", week_start=START - timedelta(weeks=60))
    from markets.models import Market

    top = Market.objects.filter(external_id__startswith="bench-seal-").order_by("-volume")
    universe = freeze_universe(template_cohort, 1, START, markets=list(top[: args.markets]))
    user = prompts.user_prompt(
        universe=universe, week=1, weeks=5, at=START, cash=Decimal("10000.00"), positions=[]
    )
    system = prompts.system_prompt()
    raw = json.dumps({"choices": [{"message": {"content": model_text(universe)}}]})
    template = {
        "universe": universe,
        "user": user,
        "system": system,
        "raw": raw,
        "parsed": json.loads(model_text(universe)),
        "request": {
            "model": "bench/model",
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": 16000,
        },
    }
    cohorts = []
    for c in range(args.cohorts):
        cohort = Cohort.objects.create(kind="live", week_start=START + timedelta(weeks=c))
        entries = Entry.objects.bulk_create(
            Entry(cohort=cohort, competitor=comp, cash=Decimal("10000.00")) for comp in lineup
        )
        for e, comp in zip(entries, lineup):
            e.competitor = comp
        # The opening deposits, and each entry's cash the sum of its ledger (what open_cohort
        # and the trades would leave; verify checks it).
        LedgerEntry.objects.bulk_create(
            LedgerEntry(entry=e, kind="deposit", amount=e.cash, created_at=cohort.week_start)
            for e in entries
        )
        for week in range(1, args.weeks + 1):
            build_week(cohort, week, entries, template)
        for e in entries:
            total = e.ledger.aggregate(total=Sum("amount"))["total"]
            Entry.objects.filter(pk=e.pk).update(cash=total)
        cohorts.append(cohort)
    # The template's universe only lent its markets: gone, so the resolutions below are not
    # read against a replay cohort holding live markets.
    template_cohort.delete()
    build_s = time.perf_counter() - t0
    per_record = len(seals.canonical(template["request"])) * 2 + len(user) + len(system)

    # --- sealing: every week once; each 12-entry week timed on its own ----------------------
    seal_times, read_floor, hash_floor = [], [], []
    for cohort in cohorts:
        for week in range(1, args.weeks + 1):
            ids = list(
                Decision.objects.filter(entry__cohort=cohort, week=week).values_list(
                    "id", flat=True
                )
            )
            t = time.perf_counter()
            rows = seals.DecisionRows(ids)
            read_floor.append(time.perf_counter() - t)
            entries = {
                e["id"]: e for e in cohort.entries.values("id", "competitor_id", "replicate")
            }
            records = [
                rows.record(cohort.pk, week, entries[rows.decisions[i]["entry_id"]], i) for i in ids
            ]
            data = [seals.canonical(r) for r in records]
            t = time.perf_counter()
            for blob in data:
                seals.sha256_hex(blob)
            hash_floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            seal = seals.seal_week(cohort.pk, week)
            seal_times.append(time.perf_counter() - t)
            assert seal is not None and seal.count == len(lineup)
    seal_med = statistics.median(seal_times)
    floor_med = statistics.median(read_floor) + statistics.median(hash_floor)
    scored = _score(template) if args.scores else None

    # --- verify: every cohort, from the database --------------------------------------------
    load_before_verify = load_average()
    t = time.perf_counter()
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        report = profiler.runcall(verify_database)
        verify_s = time.perf_counter() - t
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    else:
        report = verify_database()
        verify_s = time.perf_counter() - t
    assert report.ok, report.problems[:1]
    t = time.perf_counter()
    all_ids = list(Decision.objects.filter(entry__cohort__in=cohorts).values_list("id", flat=True))
    seals.DecisionRows(all_ids)
    verify_floor = time.perf_counter() - t + sum(hash_floor)

    # --- verify the export: build it (from the database), then check it alone ---------------
    t = time.perf_counter()
    text = "".join(export_chunks())
    export_build_s = time.perf_counter() - t
    t = time.perf_counter()
    doc = json.loads(text)
    export_report = verify_export(doc)
    export_verify_s = time.perf_counter() - t
    assert export_report.ok, export_report.problems[:1]
    t = time.perf_counter()
    import hashlib

    for cohort_doc in doc["cohorts"]:  # the export's floor: hash each record's canonical bytes
        for week_doc in cohort_doc["weeks"]:
            for d in week_doc["digests"]:
                hashlib.sha256(seals.canonical(d["record"])).hexdigest()
    export_floor = time.perf_counter() - t

    n_weeks = args.cohorts * args.weeks
    print(f"bench/seal.py  ({os.environ['DATABASE_URL'].split(':')[0]})")
    print(
        f"data: {args.cohorts} cohorts x {args.weeks} weeks x {len(lineup)} entries "
        f"({n_weeks * len(lineup)} decisions), {args.markets}-market universe, "
        f"~{per_record / 1000:.0f} kB of prompt text per LLM decision; built in {build_s:.1f} s"
    )
    print(
        f"seal one 12-entry week: median {seal_med * 1000:.0f} ms, max {max(seal_times) * 1000:.0f} ms "
        f"over {len(seal_times)} weeks (target <= {SEAL_TARGET_S:.0f} s: "
        f"{'PASS' if seal_med <= SEAL_TARGET_S else 'FAIL'}); "
        f"floor (read rows + hash bytes) {floor_med * 1000:.0f} ms, ratio {seal_med / floor_med:.1f}x"
    )
    print(
        f"verify {args.cohorts} cohorts from the database: {verify_s:.2f} s "
        f"(target <= {VERIFY_TARGET_S:.0f} s: {'PASS' if verify_s <= VERIFY_TARGET_S else 'FAIL'}); "
        f"floor (read every row + hash) {verify_floor:.2f} s, ratio {verify_s / verify_floor:.1f}x; "
        f"{report.summary()}"
    )
    print(
        f"export: built in {export_build_s:.2f} s ({len(text) / 1e6:.0f} MB); verified alone in "
        f"{export_verify_s:.2f} s (parse + check); floor (canonical bytes + hash of every "
        f"record) {export_floor:.2f} s, ratio {export_verify_s / export_floor:.1f}x"
    )
    if scored is not None:
        _bench_scores(scored)
    print(f"load average: {load_before_verify} before verify, {load_average()} at the end")


def _score(template) -> dict:
    """Resolve the forecast markets (the real service: settlements and events too) and score."""
    from markets.models import Market
    from markets.resolution import record_resolution
    from scoring.services import compute_scores

    t = time.perf_counter()
    for n, market_id in enumerate(template["universe"].forecast_sample[:20]):
        record_resolution(
            market_id,
            status=Market.Status.RESOLVED,
            outcome="Yes" if n % 3 else "No",
            by=Market.ResolvedBy.ADMIN,
            reason="bench",
            rescore=False,
        )
    resolve_s = time.perf_counter() - t
    t = time.perf_counter()
    run = compute_scores("live")
    return {"run": run, "resolve_s": resolve_s, "score_s": time.perf_counter() - t}


def _bench_scores(scored: dict) -> None:
    """`arena verify --scores` (exports of every scope built from the database, then the latest
    run recomputed), its floor (the rows the exports read, and hashing the run's published rows),
    and the score run's part of the database verify."""
    from io import StringIO

    from django.core.management import call_command

    from cohorts.models import Forecast, Trade
    from scoring.models import LeaderboardRow
    from scoring.services_seal import ROW_FIELDS, published_parts, record_hash, row_record

    run = scored["run"]
    t = time.perf_counter()
    out = StringIO()
    call_command("arena", "verify", "--scores", stdout=out, stderr=StringIO())
    scores_s = time.perf_counter() - t
    assert "\nok: " in "\n" + out.getvalue(), out.getvalue()
    t = time.perf_counter()
    len(Forecast.objects.filter(entry__cohort__kind="live").values_list(
        "id", "decision_id", "entry_id", "market_id", "outcome", "probability", "market_price",
        "created_at", "market__status", "market__resolved_outcome", "market__resolved_at",
    ))  # fmt: skip
    len(Trade.objects.filter(entry__cohort__kind="live").values_list(
        "id", "entry_id", "side", "amount", "price", "executed_at", "position__market_id",
    ))  # fmt: skip
    rows = list(LeaderboardRow.objects.filter(run=run).values(*ROW_FIELDS))
    for row in rows:
        record_hash(row_record(row))
    floor = time.perf_counter() - t
    t = time.perf_counter()
    published_parts([run.pk])
    seal_check_s = time.perf_counter() - t
    print(
        f"scores: resolved 20 markets in {scored['resolve_s']:.2f} s, scored the live scope in "
        f"{scored['score_s']:.2f} s (run {run.pk}, {len(rows)} rows, {run.n_forecasts} forecasts)"
    )
    print(
        f"verify --scores: {scores_s:.2f} s ({out.getvalue().strip().splitlines()[-1][:90]}); floor (read the "
        f"forecast, trade and score rows + hash the run's rows) {floor:.2f} s, ratio "
        f"{scores_s / floor:.1f}x; the run's published-rows digest from the database "
        f"{seal_check_s * 1000:.0f} ms (inside the database verify above)"
    )


if __name__ == "__main__":
    main()
