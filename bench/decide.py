"""Benchmark: one weekly decision round, 7 LLM entries + 5 baselines, 500-market universe.

    uv run python bench/decide.py                 # real Celery worker (threads pool)
    uv run python bench/decide.py --mode threads  # the task function on a thread pool, in-process
    DATABASE_URL=postgres://... uv run python bench/decide.py --broker redis://127.0.0.1:6379/14

The LLM entries talk to the fake OpenRouter server (tests/fakes/openai_server.py) on 127.0.0.1,
which answers every request after --delay seconds (2 s) with a valid decision. Everything else
is real: decide() freezes the universe and enqueues one Celery task per entry; a worker process
runs them in parallel against a throwaway database.

Targets: the whole round <= 6 s wall (entries in parallel, not 7 x 2 s in sequence); prompt
building <= 50 ms per entry. Tokens per prompt are estimated as characters / 4 (no tokenizer is
installed; that rule is the usual estimate for English text with BPE tokenizers, and numbers
and ids make the real count somewhat higher).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUND_TARGET_S = 6.0
PROMPT_TARGET_MS = 50.0
KEY_ENV = "BENCH_LLM_KEY"
WEEK_START = datetime(2026, 11, 22, tzinfo=UTC)
AT = WEEK_START + timedelta(minutes=5)
FAMILIES = ["GPT", "Gemini", "Grok", "Claude", "DeepSeek", "Kimi", "Qwen"]
STRATEGIES = ["market", "cash", "random", "favorite", "longshot-fader"]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["celery", "threads"], default="celery")
    p.add_argument("--markets", type=int, default=500)
    p.add_argument("--delay", type=float, default=2.0, help="fake model latency, seconds")
    p.add_argument(
        "--broker", default="", help="Celery broker URL (default: filesystem in a temp dir)"
    )
    return p.parse_args()


def configure_env(args: argparse.Namespace) -> str:
    var_dir = tempfile.mkdtemp(prefix="arena-bench-")
    os.environ["ARENA_VAR_DIR"] = var_dir
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{var_dir}/bench.sqlite3")
    if args.broker:
        os.environ["CELERY_BROKER_URL"] = args.broker
    os.environ[KEY_ENV] = "sk-bench"
    os.environ["DJANGO_SETTINGS_MODULE"] = "arena.settings"
    os.environ["ARENA_MARKETS_PER_PROMPT"] = str(args.markets)
    return var_dir


def seed_data(n_markets: int, base_url: str):
    from agents.models import Competitor
    from cohorts.services import open_cohort
    from markets.models import Market

    words = [
        "inflation",
        "election",
        "court",
        "storm",
        "launch",
        "merger",
        "final",
        "summit",
        "record",
        "treaty",
    ]
    Market.objects.bulk_create(
        Market(
            external_id=f"bench-{i}",
            question=f"Will the {words[i % 10]} #{i} outcome be announced before the deadline?",
            description=(
                f"This market resolves to Yes if the {words[i % 10]} #{i} outcome is officially "
                "announced by the named source before the close date; otherwise it resolves No. "
                "Ambiguities are settled by the resolution source's first official statement."
            ),
            outcomes=["Yes", "No"],
            last_prices={"Yes": str(Decimal(3 + (i * 37) % 94) / 100)},
            volume=Decimal(10_000_000 - i * 1000),
            close_time=AT + timedelta(days=1 + i % 120),
        )
        for i in range(n_markets)
    )
    competitors = [
        Competitor.objects.create(
            slug=f"bench-{family.lower()}",
            display_name=f"Bench {family}",
            kind=Competitor.Kind.LLM,
            family=family,
            model_id=f"bench/{family.lower()}",
            params={"temperature": 0, "max_tokens": 8000},
            base_url=base_url,
            api_key_env=KEY_ENV,
        )
        for family in FAMILIES
    ]
    competitors += [
        Competitor.objects.create(
            slug=f"bench-{s}", display_name=s, kind=Competitor.Kind.BASELINE, strategy=s
        )
        for s in STRATEGIES
    ]
    cohort, _ = open_cohort(WEEK_START, competitors=competitors, at=WEEK_START)
    return cohort


def model_answer(universe) -> str:
    first = universe.markets[0]["market_id"]
    bets = [{"market_id": str(first), "outcome": "Yes", "amount": 100, "probability": 0.7}]
    forecasts = [
        {"market_id": str(m), "probability": 0.5} for m in universe.forecast_sample if m != first
    ]
    return json.dumps({"action": "BET", "bets": bets, "forecasts": forecasts, "reasoning": "bench"})


def measure_prompts(cohort, universe) -> dict:
    from agents import prompts
    from cohorts.universe import position_views

    entries = list(cohort.entries.select_related("competitor").order_by("id"))
    t0 = time.perf_counter()
    prompts.universe_text(universe)  # first entry pays for rendering the shared block
    cold_ms = (time.perf_counter() - t0) * 1000
    per_entry = []
    for entry in entries:
        t0 = time.perf_counter()
        positions = position_views(entry, universe)
        text = prompts.system_prompt() + prompts.user_prompt(
            universe=universe, week=1, weeks=5, at=AT, cash=entry.cash, positions=positions
        )
        prompts.decision_context(universe, positions)
        per_entry.append((time.perf_counter() - t0) * 1000)
    return {
        "cold_universe_ms": cold_ms,
        "per_entry_ms": per_entry,
        "chars": len(text),
        "tokens": prompts.estimate_tokens(text),
        "universe_tokens": prompts.estimate_tokens(prompts.universe_text(universe)),
    }


def start_worker(concurrency: int) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "celery", "-A", "arena", "worker", "--pool", "threads",
        "--concurrency", str(concurrency), "--without-gossip", "--without-mingle",
        "--without-heartbeat", "--loglevel", "INFO",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready = threading.Event()

    def pump():
        for line in proc.stdout:
            if " ready." in line:
                ready.set()
            if "ERROR" in line or "Traceback" in line:
                sys.stderr.write("worker: " + line)

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60):
        proc.terminate()
        raise SystemExit("the Celery worker did not become ready within 60 s")
    return proc


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_round(args, cohort) -> float:
    from cohorts.decisions.run import decide, run_decision
    from cohorts.models import Decision
    from cohorts.tasks import enqueue_decisions

    n_entries = cohort.entries.count()
    t0 = time.perf_counter()
    if args.mode == "threads":
        entry_ids = list(cohort.entries.values_list("id", flat=True))
        with ThreadPoolExecutor(max_workers=n_entries) as pool:
            list(pool.map(lambda e: run_decision(e, 1, AT), entry_ids))
    else:
        decide(cohort=cohort, week=1, at=AT, sync=False, enqueue=enqueue_decisions)
        deadline = time.perf_counter() + 120
        while time.perf_counter() < deadline:
            finished = Decision.objects.filter(entry__cohort=cohort).exclude(status="claimed")
            if finished.count() >= n_entries:
                break
            time.sleep(0.05)
        else:
            raise SystemExit("the round did not finish within 120 s")
    return time.perf_counter() - t0


def main() -> None:
    args = parse_args()
    var_dir = configure_env(args)
    try:
        _bench(args)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


def _bench(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from cohorts.universe import freeze_universe
    from tests.fakes.openai_server import FakeOpenAIServer, success

    call_command("migrate", interactive=False, verbosity=0)
    with FakeOpenAIServer() as server:
        from django.conf import settings

        settings.ARENA_LLM_ENDPOINTS = f"{server.base_url}|{KEY_ENV}"  # the operator allows it
        cohort = seed_data(args.markets, server.base_url)
        t0 = time.perf_counter()
        universe = freeze_universe(cohort, 1, AT)
        freeze_ms = (time.perf_counter() - t0) * 1000
        text = model_answer(universe)
        server.default_responder = lambda request: success(text, delay=args.delay)
        prompt = measure_prompts(cohort, universe)

        worker = start_worker(concurrency=12) if args.mode == "celery" else None
        try:
            wall = run_round(args, cohort)
        finally:
            if worker is not None:
                stop_worker(worker)
        requests = len(server.chat_requests)
    report(args, cohort, universe, freeze_ms, prompt, wall, requests)


def report(args, cohort, universe, freeze_ms, prompt, wall, requests) -> None:
    from collections import Counter

    from django.db import connection

    from cohorts.models import Decision

    statuses = Counter(
        Decision.objects.filter(entry__cohort=cohort).values_list("status", flat=True)
    )
    worst = max(prompt["per_entry_ms"])
    mean = sum(prompt["per_entry_ms"]) / len(prompt["per_entry_ms"])
    ok = lambda good: "OK" if good else "MISSED"  # noqa: E731
    print(
        f"decision round benchmark ({args.mode}, {connection.vendor}, fake model delay {args.delay:g} s)"
    )
    print(f"  entries: {cohort.entries.count()} (7 LLM + 5 baselines); model requests: {requests}")
    print(f"  decisions: {dict(statuses)}")
    print(f"  universe: {len(universe.markets)} markets, frozen in {freeze_ms:.0f} ms")
    print(
        f"  round wall time: {wall:.2f} s (target <= {ROUND_TARGET_S:g} s) {ok(wall <= ROUND_TARGET_S)}"
    )
    print(
        f"  prompt build per entry: mean {mean:.1f} ms, worst {worst:.1f} ms "
        f"(target <= {PROMPT_TARGET_MS:g} ms) {ok(worst <= PROMPT_TARGET_MS)}; "
        f"shared universe block rendered once in {prompt['cold_universe_ms']:.1f} ms"
    )
    print(
        f"  prompt size for {len(universe.markets)} markets: {prompt['chars']:,} chars, "
        f"~{prompt['tokens']:,} tokens (chars/4), of which the universe ~{prompt['universe_tokens']:,}"
    )


if __name__ == "__main__":
    main()
