"""Benchmark: one weekly decision round at scale on PostgreSQL + Redis and real Celery workers.

    DATABASE_URL=postgres://.../arena_bench REDIS_URL=redis://127.0.0.1:6379/6 \\
        uv run python bench/decision_round.py --reset --workers 2
    ... --workers 4                                  # four worker units
    ... --workers 1 --pool prefork --concurrency 4   # a variant: four single-slot processes
    ... --workers 4 --provider-limit 16              # the provider answers 429 above 16 calls
    ... --competitors 5 --markets 50 --latency 1,2   # a quick check of the plumbing

What is real: PostgreSQL (the database in DATABASE_URL, dropped and re-created with --reset), the
Redis broker (REDIS_URL; its database should be the bench's own, since the queue is purged first),
`celery worker` subprocesses started as deploy/systemd/arena-worker.service starts them (pool and
concurrency from the command line, default the unit's threads x 16), the task beat sends for the
weekly round (cohorts.tasks.decide: freeze the universe, one run_decision message per entry) and
the project's simulated model endpoint (simulations/simllm.py) serving HTTP on 127.0.0.1 with
every call taking a uniform draw in --latency seconds (default 20-60 s, a slow hosted model).

Seeded: --competitors simulated competitors (cycling over the simulated characters), --markets
open markets synced "now", and this week's live cohort, opened on the wall clock; the universe is
frozen before the round (the prompt is measured on it). The round is sent with one
`cohorts.tasks.decide` message, exactly as beat sends it at Sunday 00:05 and every 15 minutes.

Measured: wall time from sending the round to the last decision finished, decisions by outcome,
per-call latency (server side and the client's recorded latency), the most model calls in
flight at once at the simulated server, each task's database time (its queries and their ms,
through Django's execute_wrapper installed in the workers by this module, imported there with
`--include`), the prompt's tokens, worker slot occupancy (busy slot-seconds / (slots x wall))
and queue wait (a message sent to a task started), PostgreSQL connections at peak, and the
makespan the measured latencies predict for the slots (list scheduling): if that equals the wall
time, the slots bound the round. The report is printed and appended as JSON to
$ARENA_VAR_DIR/decision_round.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE_ENV = "BENCH_ROUND_PROBE"  # set in the workers: where each task's record is appended
FINAL = ("done", "failed", "skipped")
CATCH_UP_SECONDS = 15 * 60  # beat's decide schedule: 00:05, then every 15 minutes


# --- the probe, installed in each worker process (celery --include bench.decision_round) ------


def _install_probe(path: str) -> None:
    """Record, per task, its start and end (wall), its process and thread, and the SQL it ran
    (count and ms), appending one JSON line per task to `path`."""
    from celery import signals
    from django.db import connection

    local = threading.local()

    def timer(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            stats = getattr(local, "stats", None)
            if stats is not None:
                stats["queries"] += 1
                stats["db_ms"] += (time.perf_counter() - t0) * 1000

    @signals.task_prerun.connect(weak=False)
    def _start(task_id=None, task=None, args=None, **kw):
        local.stats = {"queries": 0, "db_ms": 0.0}
        local.wrapper = connection.execute_wrapper(timer)
        local.wrapper.__enter__()
        local.started = time.time()

    @signals.task_postrun.connect(weak=False)
    def _end(task_id=None, task=None, args=None, retval=None, state=None, **kw):
        wrapper = getattr(local, "wrapper", None)
        if wrapper is None:
            return
        wrapper.__exit__(None, None, None)
        record = {
            "task": task.name if task is not None else "",
            "args": list(args or [])[:2],
            "pid": os.getpid(),
            "thread": threading.get_ident(),
            "start": local.started,
            "end": time.time(),
            "state": state,
            "result": retval if isinstance(retval, (str, int)) else repr(retval)[:80],
            **local.stats,
        }
        local.wrapper = local.stats = None
        with open(path, "a") as fh:
            fh.write(json.dumps(record) + "\n")


if os.environ.get(PROBE_ENV):
    _install_probe(os.environ[PROBE_ENV])


# --- the bench (the parent process) -----------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--competitors", type=int, default=50)
    p.add_argument("--markets", type=int, default=500)
    p.add_argument("--latency", default="20,60", help="LOW,HIGH seconds per model call")
    p.add_argument("--workers", type=int, default=2, help="celery worker processes (units)")
    p.add_argument("--pool", default="threads", choices=["threads", "prefork", "gevent"])
    p.add_argument("--concurrency", type=int, default=16, help="slots per worker unit")
    p.add_argument(
        "--provider-limit",
        type=int,
        default=0,
        help="the simulated provider answers 429 above this many calls in flight (0: no limit)",
    )
    p.add_argument(
        "--provider-retry-after",
        type=int,
        default=0,
        help="seconds the provider's 429 asks the client to wait (0: no Retry-After header)",
    )
    p.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    p.add_argument("--reset", action="store_true", help="drop and re-create DATABASE_URL's db")
    p.add_argument("--label", default="")
    args = p.parse_args()
    try:
        low, high = (float(x) for x in args.latency.split(","))
    except ValueError:
        p.error(f"--latency must be LOW,HIGH seconds, not {args.latency!r}")
    if not 0 <= low <= high:
        p.error("--latency needs 0 <= LOW <= HIGH")
    args.band = (low, high)
    if min(args.competitors, args.markets, args.workers, args.concurrency) < 1:
        p.error("--competitors, --markets, --workers and --concurrency must be at least 1")
    return args


def configure_env(args: argparse.Namespace) -> Path:
    db = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("REDIS_URL", "")
    if not db.startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database the bench may fill")
    if not broker.startswith("redis"):
        raise SystemExit("set REDIS_URL to a Redis database of the bench's own (the broker)")
    var = Path(os.environ.get("ARENA_VAR_DIR") or ROOT / "var") / "decision_round"
    var.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        {
            "ARENA_VAR_DIR": str(var),
            "CELERY_BROKER_URL": broker,
            "DJANGO_SETTINGS_MODULE": "arena.settings",
            "ARENA_MARKETS_PER_PROMPT": str(args.markets),
            "ARENA_LINEUP_ON_MIGRATE": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
    )
    return var


def reset_database() -> None:
    import dj_database_url
    import psycopg

    cfg = dj_database_url.parse(os.environ["DATABASE_URL"])
    name = cfg["NAME"]
    conninfo = {
        "host": cfg.get("HOST") or "127.0.0.1",
        "port": cfg.get("PORT") or 5432,
        "user": cfg.get("USER") or "postgres",
        "password": cfg.get("PASSWORD") or None,
        "dbname": "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**conninfo) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


class CountingServer:
    """The simulated endpoint, with what the bench watches: calls in flight (now and at most),
    each call's server-side time and status, and an optional provider concurrency limit."""

    def __init__(self, band: tuple[float, float], limit: int, retry_after: int = 0) -> None:
        from simulations.simllm import SimulatedLLMServer, _Handler

        outer = self

        class _Handler429(_Handler):
            def send_response(self, code, message=None):
                super().send_response(code, message)
                if code == 429 and retry_after:
                    self.send_header("Retry-After", str(retry_after))

        class _Server(SimulatedLLMServer):
            def bind(self):
                super().bind()
                self._httpd.RequestHandlerClass = _Handler429  # type: ignore[union-attr]
                return self

            def chat(self, body):
                with outer.lock:
                    if outer.limit and outer.in_flight >= outer.limit:
                        outer.calls.append((time.time(), 0.0, 429))
                        return 429, {"error": {"message": "rate limited", "code": 429}}
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                t0 = time.time()
                try:
                    status, payload = super().chat(body)
                finally:
                    with outer.lock:
                        outer.in_flight -= 1
                outer.calls.append((t0, time.time() - t0, status))
                return status, payload

        self.lock = threading.Lock()
        self.limit = limit
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls: list[tuple[float, float, int]] = []
        self.server = _Server(latency_seconds=band).start()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def stop(self) -> None:
        self.server.stop()


def seed(args: argparse.Namespace, base_url: str):
    from agents.models import Competitor
    from cohorts.services import open_cohort
    from core import clock
    from markets.models import Market
    from simulations.simmodels import CHARACTERS

    now = clock.now()
    words = ["inflation", "election", "court", "storm", "launch", "merger", "final", "summit"]
    Market.objects.bulk_create(
        Market(
            external_id=f"round-{i}",
            question=f"Will the {words[i % 8]} #{i} outcome be announced before the deadline?",
            description=(
                f"This market resolves to Yes if the {words[i % 8]} #{i} outcome is officially "
                "announced by the named source before the close date; otherwise it resolves No."
            ),
            outcomes=["Yes", "No"],
            last_prices={"Yes": str(Decimal(3 + (i * 37) % 94) / 100)},
            volume=Decimal(10_000_000 - i * 1000),
            close_time=now + timedelta(days=2 + i % 120),
            last_synced_at=now,
        )
        for i in range(args.markets)
    )
    models = list(CHARACTERS)
    competitors = [
        Competitor.objects.create(
            slug=f"round-{i:03d}",
            display_name=f"Round {i:03d}",
            kind=Competitor.Kind.LLM,
            family="Simulated",
            provider="simulated",
            model_id=models[i % len(models)],
            params={"temperature": 0, "max_tokens": 32000},
            base_url=base_url,
            simulated=True,
        )
        for i in range(args.competitors)
    ]
    cohort, _ = open_cohort(competitors=competitors, at=now)
    return cohort


def prompt_size(cohort) -> dict:
    from agents import prompts
    from cohorts.services import cohort_week
    from cohorts.universe import freeze_universe, position_views
    from core import clock
    from simulations import prompt_view

    now = clock.now()
    week = cohort_week(cohort, now)
    t0 = time.perf_counter()
    universe = freeze_universe(cohort, week, now)
    freeze_ms = (time.perf_counter() - t0) * 1000
    entry = cohort.entries.order_by("id").first()
    user = prompts.user_prompt(
        universe=universe,
        week=week,
        weeks=cohort.decision_weeks,
        at=now,
        cash=entry.cash,
        positions=position_views(entry, universe),
    )
    system = prompts.system_prompt()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return {
        "week": week,
        "universe_markets": len(universe.markets),
        "freeze_ms": round(freeze_ms, 1),
        "chars": len(system) + len(user),
        "tokens_arena_estimate": prompts.estimate_tokens(system + user),
        "tokens_simulated_server": prompt_view.count_prompt_tokens(messages),
    }


def start_workers(args: argparse.Namespace, var: Path, probe: Path) -> list[subprocess.Popen]:
    env = dict(os.environ, **{PROBE_ENV: str(probe)})
    procs = []
    for n in range(args.workers):
        log = open(var / f"{args.label or 'round'}-worker-{n}.log", "w")  # noqa: SIM115 (lives as long as the worker)
        cmd = [
            sys.executable, "-m", "celery", "-A", "arena", "worker",
            "--pool", args.pool, "--concurrency", str(args.concurrency),
            "--loglevel", "INFO", "-n", f"round{n}@%h", "--include", "bench.decision_round",
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 120
    for n, proc in enumerate(procs):
        path = var / f"{args.label or 'round'}-worker-{n}.log"
        while "ready." not in path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_workers(procs)
                raise SystemExit(f"worker {n} did not start; see {path}")
            time.sleep(0.2)
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pg_connections() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return int(cur.fetchone()[0])


def run_round(args, cohort, server: CountingServer) -> dict:
    from cohorts.models import Decision
    from cohorts.tasks import decide

    n = cohort.entries.count()
    samples = {"pg_connections": 0, "in_flight": []}
    sent = time.time()
    decide.delay()  # the message beat sends
    # Beat sends it again every 15 minutes (the catch-up); a round that outlasts that gets the
    # entries still waiting in the queue sent a second time, as it would live.
    resent: list[float] = []
    deadline = time.monotonic() + args.timeout
    last_print = 0.0
    while True:
        if time.time() - sent >= CATCH_UP_SECONDS * (len(resent) + 1):
            decide.delay()
            resent.append(round(time.time() - sent, 1))
        statuses = Counter(
            Decision.objects.filter(entry__cohort=cohort).values_list("status", flat=True)
        )
        finished = sum(statuses[s] for s in FINAL)
        samples["pg_connections"] = max(samples["pg_connections"], pg_connections())
        samples["in_flight"].append((time.time() - sent, server.in_flight))
        if time.monotonic() - last_print > 30:
            last_print = time.monotonic()
            print(
                f"  t={time.time() - sent:5.0f}s finished {finished}/{n} in flight "
                f"{server.in_flight} load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        if finished >= n:
            break
        if time.monotonic() > deadline:
            print(f"  gave up after {args.timeout:g} s: {dict(statuses)}", flush=True)
            break
        time.sleep(0.5)
    last = Decision.objects.filter(entry__cohort=cohort).order_by("-finished_at").first()
    end = last.finished_at.timestamp() if last and last.finished_at else time.time()
    return {
        "sent": sent,
        "wall_s": end - sent,
        "statuses": dict(statuses),
        "catch_up_sends_s": resent,
        **samples,
    }


def wait_for_probe(probe: Path, n: int, seconds: float = 30) -> None:
    """The probe's line for a task is written after the task's commit: wait for all n."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if probe.read_text().count('"cohorts.tasks.run_decision"') >= n:
            return
        time.sleep(0.2)


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def dist(values: list[float]) -> dict:
    return {
        "n": len(values),
        "min": round(min(values), 2) if values else None,
        "p50": round(pct(values, 0.5), 2),
        "p90": round(pct(values, 0.9), 2),
        "max": round(max(values), 2) if values else None,
        "mean": round(statistics.fmean(values), 2) if values else None,
    }


def list_schedule(durations: list[float], slots: int) -> float:
    """The makespan of running `durations` in order on `slots` slots, each taking the next job
    as soon as it is free (what Celery's prefetch-1 workers do)."""
    free = [0.0] * min(slots, max(len(durations), 1))
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free) if durations else 0.0


def analyse(args, cohort, round_: dict, server: CountingServer, probe: Path, prompt: dict):
    from django.conf import settings

    from cohorts.models import Decision, LLMCall

    sent = round_["sent"]
    records = [json.loads(line) for line in probe.read_text().splitlines() if line.strip()]
    runs = [r for r in records if r["task"] == "cohorts.tasks.run_decision" and r["start"] >= sent]
    decide_runs = [r for r in records if r["task"] == "cohorts.tasks.decide" and r["start"] >= sent]
    slots = args.workers * args.concurrency
    wall = round_["wall_s"]
    busy = sum(r["end"] - r["start"] for r in runs)
    # The most tasks running at once, from the starts and ends.
    events = sorted([(r["start"], 1) for r in runs] + [(r["end"], -1) for r in runs])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    # run_decision messages are sent while the decide task commits: its start is the enqueue.
    enqueued = decide_runs[0]["start"] if decide_runs else sent
    decisions = Decision.objects.filter(entry__cohort=cohort)
    outcome = Counter()
    for d in decisions:
        if d.status == "done":
            outcome["held (forced)" if d.hold_reason else f"done {d.action or '-'}"] += 1
        else:
            outcome[d.status] += 1
    calls = LLMCall.objects.filter(decision__entry__cohort=cohort)
    # A task's time not spent waiting for the model: prompt building, parsing, the database and,
    # with many threads in one process, waiting for the interpreter lock.
    waited: Counter = Counter()
    for entry_id, ms in calls.values_list("decision__entry_id", "latency_ms"):
        waited[entry_id] += ms / 1000
    longest: dict[int, float] = {}  # per entry: its run that decided (a resent one is short)
    for r in runs:
        if r["args"]:
            longest[r["args"][0]] = max(longest.get(r["args"][0], 0.0), r["end"] - r["start"])
    overhead = [d - waited[entry_id] for entry_id, d in longest.items()]
    server_lat = [c[1] for c in server.calls if c[2] == 200]
    task_s = [r["end"] - r["start"] for r in runs]
    ordered = [r["end"] - r["start"] for r in sorted(runs, key=lambda r: r["start"])]
    report = {
        "label": args.label,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "competitors": args.competitors,
        "markets": args.markets,
        "latency_band_s": list(args.band),
        "workers": args.workers,
        "pool": args.pool,
        "concurrency": args.concurrency,
        "slots": slots,
        "provider_limit": args.provider_limit,
        "provider_retry_after": args.provider_retry_after,
        "llm_retry_policy": {
            name: getattr(settings, name)
            for name in ("ARENA_LLM_MAX_RETRIES", "ARENA_LLM_MAX_BACKOFF", "ARENA_LLM_TIMEOUT")
        },
        "wall_s": round(wall, 1),
        "catch_up_sends_s": round_["catch_up_sends_s"],
        "run_decision_tasks": len(runs),
        "decide_task_s": round(decide_runs[0]["end"] - decide_runs[0]["start"], 2)
        if decide_runs
        else None,
        "decisions": dict(outcome),
        "model_calls_server": Counter(str(c[2]) for c in server.calls),
        "model_calls_recorded": calls.count(),
        "call_latency_server_s": dist(server_lat),
        "call_latency_client_s": dist(
            [c / 1000 for c in calls.values_list("latency_ms", flat=True)]
        ),
        "prompt_tokens_recorded": dist(
            [float(t) for t in calls.values_list("prompt_tokens", flat=True) if t is not None]
        ),
        "max_in_flight_server": server.max_in_flight,
        "task_s": dist(task_s),
        "task_outside_model_s": dist(overhead),
        "queue_wait_s": dist([r["start"] - enqueued for r in runs]),
        "db_per_decision": {
            "queries": dist([float(r["queries"]) for r in runs]),
            "ms": dist([r["db_ms"] for r in runs]),
            "share_of_task_pct": round(100 * sum(r["db_ms"] for r in runs) / 1000 / busy, 2)
            if busy
            else None,
        },
        "decide_task_db": {
            "queries": decide_runs[0]["queries"],
            "ms": round(decide_runs[0]["db_ms"], 1),
        }
        if decide_runs
        else None,
        "slot_occupancy_pct": round(100 * busy / (slots * wall), 1) if wall else None,
        "max_tasks_running": peak,
        "predicted_makespan_s": round(list_schedule(ordered, slots), 1),
        "pg_connections_peak": round_["pg_connections"],
        "prompt": prompt,
    }
    return report


def print_report(r: dict) -> None:
    print(json.dumps(r, indent=1, default=str))
    lat = r["call_latency_server_s"]
    print(
        f"\n{r['competitors']} competitors x {r['markets']} markets, latency "
        f"{r['latency_band_s'][0]:g}-{r['latency_band_s'][1]:g} s, {r['workers']} worker(s) "
        f"{r['pool']} x {r['concurrency']} = {r['slots']} slots: round {r['wall_s']:.0f} s "
        f"(list-scheduling prediction {r['predicted_makespan_s']:.0f} s); decisions {r['decisions']}; "
        f"calls p50 {lat['p50']} s max {lat['max']} s; in flight at most {r['max_in_flight_server']}; "
        f"slots busy {r['slot_occupancy_pct']}%; DB per decision "
        f"{r['db_per_decision']['queries']['p50']:.0f} queries / {r['db_per_decision']['ms']['p50']:.0f} ms "
        f"(p50); prompt ~{r['prompt']['tokens_simulated_server']:,} tokens; "
        f"PostgreSQL connections at peak {r['pg_connections_peak']}; load {r['loadavg_end']}"
    )


def main() -> None:
    args = parse_args()
    var = configure_env(args)
    if args.reset:
        reset_database()
    import django

    django.setup()
    from django.core.management import call_command

    from arena.celery import app
    from cohorts.models import Cohort

    call_command("migrate", interactive=False, verbosity=0)
    if Cohort.objects.exists():
        raise SystemExit("the database already holds cohorts; run with --reset (it drops it)")
    app.control.purge()  # nothing left from an earlier run may be taken for this round's work
    probe = var / "probe.jsonl"
    probe.write_text("")
    server = CountingServer(args.band, args.provider_limit, args.provider_retry_after)
    procs: list[subprocess.Popen] = []
    try:
        from django.conf import settings

        cohort = seed(args, server.base_url)
        prompt = prompt_size(cohort)
        print(f"seeded; prompt {prompt}; load {os.getloadavg()}", flush=True)
        procs = start_workers(args, var, probe)
        assert settings.CELERY_BROKER_URL.startswith("redis")
        round_ = run_round(args, cohort, server)
        wait_for_probe(probe, cohort.entries.count())
    finally:
        stop_workers(procs)
        server.stop()
    report = analyse(args, cohort, round_, server, probe, prompt)
    print_report(report)
    with open(var / "decision_round.jsonl", "a") as fh:
        fh.write(json.dumps(report, default=str) + "\n")


if __name__ == "__main__":
    main()
