"""The load test proper (bench/load.sh sets the environment and builds the data first).

Starts gunicorn (arena.wsgi) on loopback, then measures with wrk, each run bounded by --duration:

    home       /                        >= 700 req/s, p99 <= 70 ms
    cohort     the oldest cohort page   >= 300 req/s, p99 <= 150 ms
    api        /api/leaderboard         >= 1,000 req/s
    heavy+X    X while one client loops the heaviest page (picked by timing the candidates)
                                        >= 300 req/s, p99 <= 150 ms
    tick+X     X while snapshot ticks run every --tick-interval s (bench/load_tick.py)
                                        p99 within 20% of X's own run
Zero errors everywhere (connect/read/write/timeouts and non-2xx). Prints a table and exits 1
when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# wrk calls done() once at the end: one JSON line we can parse (latencies in microseconds).
WRK_REPORT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,'
    .. '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


@dataclass
class Result:
    name: str
    url: str
    rps: float
    p50: float
    p99: float
    errors: int
    min_rps: float | None = None
    max_p99: float | None = None
    note: str = ""

    def verdict(self) -> str:
        problems = []
        if self.errors:
            problems.append(f"{self.errors} errors")
        if self.min_rps is not None and self.rps < self.min_rps:
            problems.append(f"< {self.min_rps:.0f} req/s")
        if self.max_p99 is not None and self.p99 > self.max_p99:
            problems.append(f"p99 > {self.max_p99:.0f} ms")
        return "MISSED: " + ", ".join(problems) if problems else "ok"

    def target(self) -> str:
        parts = []
        if self.min_rps is not None:
            parts.append(f">= {self.min_rps:.0f} req/s")
        if self.max_p99 is not None:
            parts.append(f"p99 <= {self.max_p99:.0f} ms")
        return ", ".join(parts + ["0 errors"])


# The heavy-page client changes its query string on every request: a client (or bot) looping
# a page is not obliged to hit a cache, so this is the worst case for any page cache.
CACHE_BUSTER = """
local n = 0
request = function()
  n = n + 1
  local sep = string.find(wrk.path, "?", 1, true) and "&" or "?"
  return wrk.format("GET", wrk.path .. sep .. "bust=" .. n)
end
"""


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.base = f"http://127.0.0.1:{args.port}"
        self.script = Path(tempfile.mkdtemp()) / "report.lua"
        self.script.write_text(WRK_REPORT)
        self.busting = self.script.with_name("busting.lua")
        self.busting.write_text(CACHE_BUSTER + WRK_REPORT)

    def wrk(self, url: str, *, connections: int | None = None, threads: int = 2,
            duration: float | None = None) -> dict:  # fmt: skip
        connections = connections or self.args.connections
        duration = duration or self.args.duration
        out = subprocess.run(
            ["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{duration:.0f}s",
             "--timeout", "5s", "-s", str(self.script), self.base + url],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        data = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
        data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
        data["errors"] = sum(data[k] for k in ("connect", "read", "write", "status", "timeout"))
        return data

    def measure(self, name: str, url: str, **targets) -> Result:
        self.warm(url)
        d = self.wrk(url)
        return Result(name, url, d["rps"], d["p50_us"] / 1000, d["p99_us"] / 1000, d["errors"],
                      **targets)  # fmt: skip

    def warm(self, url: str, n: int = 5) -> float:
        """GET url n times; returns the fastest time in ms (fails on a non-200)."""
        best = float("inf")
        for _ in range(n):
            t = time.perf_counter()
            with urllib.request.urlopen(self.base + url, timeout=30) as response:
                response.read()
                assert response.status == 200, (url, response.status)
            best = min(best, (time.perf_counter() - t) * 1000)
        return best

    def background(self, args: list[str]) -> subprocess.Popen:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_gunicorn(args: argparse.Namespace) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "gunicorn", "arena.wsgi", "--workers", str(args.workers),
           "--threads", str(args.threads), "--bind", f"127.0.0.1:{args.port}",
           "--log-level", "warning", "--backlog", "2048"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{args.port}/healthz", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit("gunicorn exited at start")
            time.sleep(0.2)
    stop(proc)
    sys.exit("gunicorn did not answer within 60 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def heaviest(bench: Bench, candidates: list[str]) -> tuple[str, float]:
    """The slowest candidate to render (timed with a fresh query string, past any cache)."""
    timed = []
    for n, url in enumerate(candidates):
        busted = [f"{url}{'&' if '?' in url else '?'}bust=pick{n}x{i}" for i in range(3)]
        timed.append((min(bench.warm(b, 1) for b in busted), url))
    ms, url = max(timed)
    return url, ms


def under_heavy_loop(bench: Bench, heavy: str, name: str, url: str) -> Result:
    bench.warm(url)
    looper = bench.background(
        ["wrk", "-t1", "-c1", f"-d{bench.args.duration + 4:.0f}s", "--timeout", "10s",
         "-s", str(bench.busting), bench.base + heavy]
    )  # fmt: skip
    time.sleep(2)  # let the loop reach steady state before measuring
    try:
        d = bench.wrk(url)
    finally:
        out, _ = looper.communicate(timeout=bench.args.duration + 30)
    loop = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    loop_rps = loop["requests"] / (loop["duration_us"] / 1e6)
    note = f"the loop itself: {loop_rps:.1f} req/s, p50 {loop['p50_us'] / 1000:.0f} ms"
    return Result(name, url, d["rps"], d["p50_us"] / 1000, d["p99_us"] / 1000, d["errors"],
                  min_rps=300, max_p99=150, note=note)  # fmt: skip


def during_ticks(bench: Bench, name: str, url: str, baseline: Result) -> Result:
    ticker = bench.background(
        [sys.executable, str(ROOT / "bench" / "load_tick.py"),
         "--seconds", f"{bench.args.duration + 2:.0f}", "--interval", str(bench.args.tick_interval)]
    )  # fmt: skip
    first = ticker.stdout.readline().strip()  # "ready" once the ticker's start-up is done
    if first != "ready":
        raise SystemExit(f"ticker failed to start: {first}")
    try:
        d = bench.wrk(url)
    finally:
        out, _ = ticker.communicate(timeout=bench.args.duration + 120)
    note = (out.strip().splitlines() or ["ticker printed nothing"])[-1]
    return Result(name, url, d["rps"], d["p50_us"] / 1000, d["p99_us"] / 1000, d["errors"],
                  max_p99=baseline.p99 * 1.2, note=note)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cohort-url", required=True)
    parser.add_argument("--candidates", nargs="*", default=[], help="heavy page candidates")
    parser.add_argument("--port", type=int, default=8391)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--tick-interval", type=float, default=1.0, help="seconds between ticks")
    args = parser.parse_args()

    server = start_gunicorn(args)
    bench = Bench(args)
    results: list[Result] = []
    try:
        results.append(bench.measure("home", "/", min_rps=700, max_p99=70))
        results.append(bench.measure("cohort", args.cohort_url, min_rps=300, max_p99=150))
        results.append(bench.measure("api", "/api/leaderboard", min_rps=1000))
        heavy, heavy_ms = heaviest(bench, [args.cohort_url, *args.candidates])
        print(f"heaviest page: {heavy} ({heavy_ms:.0f} ms alone)", flush=True)
        results.append(under_heavy_loop(bench, heavy, "heavy+api", "/api/leaderboard"))
        results.append(under_heavy_loop(bench, heavy, "heavy+home", "/"))
        for name, url in (("home", "/"), ("api", "/api/leaderboard")):
            base = next(r for r in results if r.name == name)
            results.append(during_ticks(bench, f"tick+{name}", url, base))
    finally:
        stop(server)

    print(f"\ngunicorn {args.workers} workers x {args.threads} threads, wrk {args.connections} "
          f"connections, {args.duration:.0f} s per run, {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'run':<11} {'url':<34} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}  "
          "target -> verdict")  # fmt: skip
    for r in results:
        print(f"{r.name:<11} {r.url[:34]:<34} {r.rps:>8.0f} {r.p50:>7.1f} {r.p99:>7.1f} "
              f"{r.errors:>6}  {r.target()} -> {r.verdict()}")  # fmt: skip
        if r.note:
            print(f"{'':<11} {r.note}")
    sys.exit(1 if any(r.verdict() != "ok" for r in results) else 0)


if __name__ == "__main__":
    main()
