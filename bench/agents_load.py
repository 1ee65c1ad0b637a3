"""Outside agents over real HTTP (issue 39): one agent's GET week / POST decision latency and the
server's CPU at a 100- and a 500-market universe, then N agents submitting within one minute.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_agents \\
        uv run python bench/agents_load.py [--agents 200] [--spread 60] [--sizes 100 500]

Starts its own gunicorn (2 workers x 4 threads, as deployed) on a free 127.0.0.1 port. The
database named by DATABASE_URL is migrated and EMPTIED (flush) before each phase: give it a
database of its own. Every agent is signed (Ed25519), so signature checks are in the figures.
Prints the figures and the machine's load average; stops everything it started.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(method: str, url: str, token: str, body: bytes | None = None,
         headers: dict | None = None) -> tuple[int, dict, float]:  # fmt: skip
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Authorization": f"Bearer {token}", **(headers or {})})  # fmt: skip
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, data = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, data = exc.code, exc.read()
    except OSError as exc:
        return 0, {"error": str(exc)}, time.perf_counter() - started
    return status, json.loads(data or b"{}"), time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """utime + stime of the gunicorn master and its workers (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat.parent.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def seed(n_markets: int, n_agents: int) -> list[dict]:
    """Markets, outside agents with keys and tokens, a live cohort whose week 1 froze a minute
    ago."""
    from datetime import timedelta

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    from django.core.management import call_command

    from agents import tokens
    from agents.models import AgentToken, Competitor
    from cohorts.models import Cohort
    from cohorts.services import open_cohort, week_start_for
    from cohorts.universe import freeze_universe
    from core import clock
    from tests.agents.helpers import make_markets

    call_command("flush", interactive=False, verbosity=0)
    make_markets(n_markets)
    agents, competitors = [], []
    for i in range(n_agents):
        key = Ed25519PrivateKey.generate()
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        competitor = Competitor.objects.create(
            slug=f"agent-{i:03d}", display_name=f"Agent {i:03d}", kind=Competitor.Kind.OUTSIDE,
            team="Bench", agent_version="1", public_key=base64.b64encode(public).decode(),
        )  # fmt: skip
        competitors.append(competitor)
        agents.append({"slug": competitor.slug, "key": key,
                       "token": tokens.issue(competitor, rate_per_minute=1000).token})  # fmt: skip
    now = clock.now()
    start = week_start_for(now)
    cohort, _ = open_cohort(start, kind=Cohort.Kind.LIVE, competitors=competitors, at=start)
    universe = freeze_universe(cohort, 1, now - timedelta(minutes=1))
    assert len(universe.markets) == n_markets, len(universe.markets)
    assert AgentToken.objects.count() == n_agents
    return agents


def submit(base: str, agent: dict, week: dict) -> tuple[int, float]:
    forecasts = [{"market_id": str(m), "outcome": "Yes", "probability": 0.5}
                 for m in week["forecast_sample"]]  # fmt: skip
    answer = {"action": "HOLD", "forecasts": forecasts, "reasoning": "bench"}
    body = json.dumps({"cohort": week["cohort"], "week": week["week"], "answer": answer}).encode()
    signed = (b"arena-agent-decision/v1\n"
              + f"{agent['slug']}\n{week['cohort']}\n{week['week']}\n".encode() + body)  # fmt: skip
    headers = {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4()),
               "Arena-Signature": base64.b64encode(agent["key"].sign(signed)).decode()}  # fmt: skip
    status, _, seconds = call("POST", base + "/api/agent/v1/decision", agent["token"], body,
                              headers)  # fmt: skip
    return status, seconds


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return f"median {statistics.median(values) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"


def latency(base: str, pid: int, n_markets: int) -> None:
    agents = seed(n_markets, 10)
    gets, posts = [], []
    cpu0 = cpu_seconds(pid)
    for _ in range(3):
        for agent in agents:
            status, week, seconds = call("GET", base + "/api/agent/v1/week", agent["token"])
            assert status == 200, (status, week)
            gets.append(seconds)
    cpu_get = (cpu_seconds(pid) - cpu0) / len(gets)
    size = len(json.dumps(week))
    cpu0 = cpu_seconds(pid)
    for agent in agents:
        status, seconds = submit(base, agent, week)
        assert status == 201, status
        posts.append(seconds)
    cpu_post = (cpu_seconds(pid) - cpu0) / len(posts)
    print(f"{n_markets} markets: GET week ({size // 1024} KiB) {ms(gets)}, server CPU "
          f"{cpu_get * 1000:.0f} ms a request; POST decision {ms(posts)}, server CPU "
          f"{cpu_post * 1000:.0f} ms a request (n={len(gets)} / {len(posts)})")  # fmt: skip


def crowd(base: str, n_agents: int, spread: float, n_markets: int) -> None:
    from cohorts.models import AgentSubmission, Decision

    agents = seed(n_markets, n_agents)
    rng = random.Random(7)
    starts = sorted(rng.uniform(0, spread) for _ in agents)
    results: list[tuple[int, int, float, float]] = []
    lock = threading.Lock()
    t0 = time.monotonic()

    def one(i: int) -> None:
        delay = t0 + starts[i] - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # each agent arrives at its own moment within the minute
        status_get, week, get_s = call("GET", base + "/api/agent/v1/week", agents[i]["token"])
        status_post, post_s = submit(base, agents[i], week) if status_get == 200 else (0, 0.0)
        with lock:
            results.append((status_get, status_post, get_s, post_s))

    with ThreadPoolExecutor(64) as pool:
        list(pool.map(one, range(n_agents)))
    wall = time.monotonic() - t0
    statuses = sorted({(g, p) for g, p, _, _ in results})
    five = sum(g >= 500 or p >= 500 for g, p, _, _ in results)
    decisions = Decision.objects.filter(entry__competitor__kind="outside", week=1)
    per_entry = decisions.values("entry").distinct().count()
    print(f"{n_agents} agents within {spread:.0f} s ({n_markets} markets): done in {wall:.1f} s; "
          f"statuses (GET, POST) {statuses}; 5xx {five}; decisions {decisions.count()} for "
          f"{per_entry} entries; submissions {AgentSubmission.objects.count()}; "
          f"GET {ms([r[2] for r in results])}; POST {ms([r[3] for r in results])}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--spread", type=float, default=60)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 500])
    args = parser.parse_args()
    var = tempfile.mkdtemp(prefix="arena-bench-agents-")
    os.environ.update(ARENA_VAR_DIR=var, DJANGO_SETTINGS_MODULE="arena.settings",
                      ARENA_MARKETS_PER_PROMPT=str(max(args.sizes + [100])),
                      ARENA_LINEUP_ON_MIGRATE="0", DEBUG="0", SECRET_KEY=uuid.uuid4().hex * 2,
                      ALLOWED_HOSTS="127.0.0.1,localhost", SECURE_SSL_REDIRECT="0",
                      CELERY_BROKER_URL="memory://", LOG_LEVEL="WARNING")  # fmt: skip
    import django

    django.setup()
    from django.core.management import call_command

    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    print(f"migrated in {time.monotonic() - started:.0f} s")
    port = free_port()
    log = open(Path(var) / "gunicorn.log", "w")  # noqa: SIM115 (closed at the end)
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "arena.wsgi:application", "--bind",
                            f"127.0.0.1:{port}", "--workers", "2", "--threads", "4"], cwd=ROOT,
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/api/openapi.json", timeout=2).close()
                break
            except OSError:
                time.sleep(0.2)
        from django.db import connection

        print(f"engine {connection.vendor}; gunicorn 2 workers x 4 threads; "
              f"{os.cpu_count()} cores")  # fmt: skip
        for size in args.sizes:
            latency(base, web.pid, size)
        crowd(base, args.agents, args.spread, 100)
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(15)
        log.close()
        print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
