"""The load test proper (bench/load.sh sets the environment and builds the data first).

Starts gunicorn (arena.wsgi) on loopback, first with the page cache off, then on, and measures
with wrk (each run bounded by --duration). Every figure is printed with its ratio to the floor:
a static file served by the same server in the same run (whitenoise, no database).

    floor          /static/arena/site.css
  page cache off (every request renders):
    off:home       /                      >= 0.12 x floor, p99 <= 100 ms
    off:cohort     the oldest cohort page >= 0.05 x floor, p99 <= 100 ms
    off:series     its series ALL         p99 <= 100 ms
    off:api        /api/leaderboard       p99 <= 100 ms
  page cache on:
    on:home, on:cohort, on:api            p99 <= 100 ms (hits)
    on:same        / through a wrk script that builds each request (the same path every
                   time): the baseline for on:utm, since building requests costs wrk itself
    on:utm         / with a new ?utm_source= on every request: unknown parameters share the
                   cached page, so >= 0.8 x on:same
    heavy+X        X while one client loops the heaviest page, rendering it every time (a
                   session cookie steps around the cache, as anyone can; its query strings are
                   new on every request and in every run)      p99 <= 150 ms
    tick+X         X during snapshot ticks (bench/load_tick.py), one every --tick-interval s
                   (600 = the real cadence) over --tick-duration s, the first after a third of
                   it; between two runs of X without ticks as long (quiet+X, before and
                   after, so a drift of the machine's load shows)
                                                    p99 within 20% of the quiet runs' mean
Zero errors everywhere (connect/read/write/timeouts and non-2xx). CPU per request (the gunicorn
workers' and the PostgreSQL backends' CPU time over the run, divided by the requests) is printed
too: on a shared machine it moves far less than req/s does. Exits 1 when a target is missed.
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
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR_URL = "/static/arena/site.css"
TICKS = os.sysconf("SC_CLK_TCK")

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

# A new query string on every request, never the same in two runs (the run id leads).
SAME_REQUEST = """
request = function()
  return wrk.format("GET", wrk.path)
end
"""

FRESH_QUERY = """
local n = 0
request = function()
  n = n + 1
  local sep = string.find(wrk.path, "?", 1, true) and "&" or "?"
  return wrk.format("GET", wrk.path .. sep .. "{param}={run}-" .. n)
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
    cpu_app: float = 0.0  # ms per request
    cpu_db: float = 0.0
    min_ratio: float | None = None
    max_p99: float | None = None
    note: str = ""
    floor: float = 0.0
    min_rps: float | None = None

    def ratio(self) -> float:
        return self.rps / self.floor if self.floor else 0.0

    def verdict(self) -> str:
        problems = []
        if self.errors:
            problems.append(f"{self.errors} errors")
        if self.min_ratio is not None and self.ratio() < self.min_ratio:
            problems.append(f"< {self.min_ratio:g} x floor")
        if self.min_rps is not None and self.rps < self.min_rps:
            problems.append(f"< {self.min_rps:.0f} req/s")
        if self.max_p99 is not None and self.p99 > self.max_p99:
            problems.append(f"p99 > {self.max_p99:.0f} ms")
        return "MISSED: " + ", ".join(problems) if problems else "ok"

    def target(self) -> str:
        parts = []
        if self.min_ratio is not None:
            parts.append(f">= {self.min_ratio:g} x floor")
        if self.min_rps is not None:
            parts.append(f">= {self.min_rps:.0f} req/s")
        if self.max_p99 is not None:
            parts.append(f"p99 <= {self.max_p99:.0f} ms")
        return ", ".join(parts + ["0 errors"])


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / TICKS


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.base = f"http://127.0.0.1:{args.port}"
        self.run_id = uuid.uuid4().hex[:8]
        folder = Path(tempfile.mkdtemp())
        self.script = folder / "report.lua"
        self.script.write_text(WRK_REPORT)
        self.server: subprocess.Popen | None = None

    def same_script(self) -> Path:
        path = self.script.with_name("same.lua")
        path.write_text(SAME_REQUEST + WRK_REPORT)
        return path

    def fresh_script(self, param: str) -> Path:
        path = self.script.with_name(f"fresh-{param}.lua")
        path.write_text(
            FRESH_QUERY.replace("{param}", param).replace("{run}", self.run_id) + WRK_REPORT
        )
        return path

    def app_pids(self) -> list[int]:
        if self.server is None:
            return []
        out = subprocess.run(["pgrep", "-g", str(self.server.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def db_pids(self) -> list[int]:
        out = subprocess.run(
            ["pgrep", "-f", f"postgres: .* {self.args.dbname} "], capture_output=True, text=True
        )
        return [int(p) for p in out.stdout.split()]

    def wrk(self, url: str, *, script: Path | None = None, connections: int | None = None,
            threads: int = 2, duration: float | None = None,
            headers: tuple[str, ...] = ()) -> dict:  # fmt: skip
        connections = connections or self.args.connections
        duration = duration or self.args.duration
        extra = [arg for h in headers for arg in ("-H", h)]
        app0, db0 = _cpu_seconds(self.app_pids()), _cpu_seconds(self.db_pids())
        out = subprocess.run(
            ["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{duration:.0f}s",
             "--timeout", "5s", "-s", str(script or self.script), *extra, self.base + url],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        app1, db1 = _cpu_seconds(self.app_pids()), _cpu_seconds(self.db_pids())
        data = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
        data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
        data["errors"] = sum(data[k] for k in ("connect", "read", "write", "status", "timeout"))
        n = max(data["requests"], 1)
        data["cpu_app"] = (app1 - app0) * 1000 / n
        data["cpu_db"] = (db1 - db0) * 1000 / n
        return data

    def result(self, name: str, url: str, d: dict, **targets) -> Result:
        return Result(name, url, d["rps"], d["p50_us"] / 1000, d["p99_us"] / 1000, d["errors"],
                      d["cpu_app"], d["cpu_db"], **targets)  # fmt: skip

    def measure(self, name: str, url: str, **targets) -> Result:
        self.warm(url)
        return self.result(name, url, self.wrk(url), **targets)

    def warm(self, url: str, n: int = 5, headers: dict | None = None) -> float:
        """GET url n times; returns the fastest time in ms (fails on a non-200)."""
        best = float("inf")
        for _ in range(n):
            t = time.perf_counter()
            request = urllib.request.Request(self.base + url, headers=headers or {})
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
                assert response.status == 200, (url, response.status)
            best = min(best, (time.perf_counter() - t) * 1000)
        return best

    def background(self, args: list[str]) -> subprocess.Popen:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def start(self, page_cache: bool) -> None:
        env = {**os.environ, "ARENA_PAGE_CACHE": "1" if page_cache else "0"}
        cmd = [sys.executable, "-m", "gunicorn", "arena.wsgi", "--workers", str(self.args.workers),
               "--threads", str(self.args.threads), "--bind", f"127.0.0.1:{self.args.port}",
               "--log-level", "warning", "--backlog", "2048"]  # fmt: skip
        self.server = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # Ready when the page it measures answers: /healthz answers 503 without a worker
            # heartbeat, and the bench runs no worker.
            try:
                with urllib.request.urlopen(f"{self.base}{self.args.cohort_url}", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                if self.server.poll() is not None:
                    sys.exit("gunicorn exited at start")
                time.sleep(0.2)
        self.stop()
        sys.exit("gunicorn did not answer within 60 s")

    def stop(self) -> None:
        proc, self.server = self.server, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


BYPASS = "Cookie: sessionid=bench-heavy-loop"  # any session cookie: the cache steps aside


def heaviest(bench: Bench, candidates: list[str]) -> tuple[str, float]:
    """The slowest candidate to render (timed past the cache)."""
    timed = [(bench.warm(url, 3, headers=dict([BYPASS.split(": ")])), url) for url in candidates]
    ms, url = max(timed)
    return url, ms


def under_heavy_loop(bench: Bench, heavy: str, name: str, url: str) -> Result:
    bench.warm(url)
    looper = bench.background(
        ["wrk", "-t1", "-c1", f"-d{bench.args.duration + 4:.0f}s", "--timeout", "10s",
         "-H", BYPASS, "-s", str(bench.fresh_script("bust")), bench.base + heavy]
    )  # fmt: skip
    time.sleep(2)  # let the loop reach steady state before measuring
    try:
        d = bench.wrk(url)
    finally:
        out, _ = looper.communicate(timeout=bench.args.duration + 30)
    loop = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    loop_rps = loop["requests"] / (loop["duration_us"] / 1e6)
    note = f"the loop itself: {loop_rps:.1f} req/s, p50 {loop['p50_us'] / 1000:.0f} ms"
    return bench.result(name, url, d, max_p99=150, note=note)


def during_ticks(bench: Bench, name: str, url: str) -> Result:
    args = bench.args
    ticker = bench.background(
        [sys.executable, str(ROOT / "bench" / "load_tick.py"),
         "--seconds", f"{args.tick_duration:.0f}", "--interval", str(args.tick_interval),
         "--delay", f"{args.tick_duration / 3:.0f}"]
    )  # fmt: skip
    first = ticker.stdout.readline().strip()  # "ready" once the ticker's start-up is done
    if first != "ready":
        raise SystemExit(f"ticker failed to start: {first}")
    try:
        d = bench.wrk(url, duration=args.tick_duration)
    finally:
        out, _ = ticker.communicate(timeout=args.tick_duration + 300)
    note = (out.strip().splitlines() or ["ticker printed nothing"])[-1]
    return bench.result(name, url, d, note=note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cohort-url", required=True)
    parser.add_argument("--series-url", required=True)
    parser.add_argument("--candidates", nargs="*", default=[], help="heavy page candidates")
    parser.add_argument("--dbname", required=True, help="for the PostgreSQL backends' CPU time")
    parser.add_argument("--port", type=int, default=8391)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--tick-interval", type=float, default=600, help="seconds between ticks")
    parser.add_argument("--tick-duration", type=float, default=45, help="seconds per tick run")
    parser.add_argument(
        "--phases", default="off,on,heavy,ticks", help="which runs (default: all of them)"
    )
    args = parser.parse_args()
    phases = set(args.phases.split(","))

    bench = Bench(args)
    results: list[Result] = []
    load = [os.getloadavg()[0]]
    try:
        bench.start(page_cache=False)
        floor = bench.measure("floor", FLOOR_URL)
        results.append(floor)
        if "off" in phases:
            results.append(bench.measure("off:home", "/", min_ratio=0.12, max_p99=100))
            results.append(
                bench.measure("off:cohort", args.cohort_url, min_ratio=0.05, max_p99=100)
            )
            results.append(bench.measure("off:series", args.series_url, max_p99=100))
            results.append(bench.measure("off:api", "/api/leaderboard", max_p99=100))
        bench.stop()
        load.append(os.getloadavg()[0])

        bench.start(page_cache=True)
        if "on" in phases:
            results.append(bench.measure("on:home", "/", max_p99=100))
            results.append(bench.measure("on:cohort", args.cohort_url, max_p99=100))
            results.append(bench.measure("on:api", "/api/leaderboard", max_p99=100))
            bench.warm("/")
            same = bench.result("on:same", "/", bench.wrk("/", script=bench.same_script()))
            results.append(same)
            utm = bench.wrk("/", script=bench.fresh_script("utm_source"))
            results.append(
                bench.result("on:utm", "/?utm_source=<new>", utm, min_rps=same.rps * 0.8)
            )
        if "heavy" in phases:
            heavy, heavy_ms = heaviest(bench, [args.cohort_url, *args.candidates])
            print(f"heaviest page: {heavy} ({heavy_ms:.0f} ms alone, rendered)", flush=True)
            results.append(under_heavy_loop(bench, heavy, "heavy+api", "/api/leaderboard"))
            results.append(under_heavy_loop(bench, heavy, "heavy+home", "/"))
        if "ticks" in phases:
            for name, url in (("home", "/"), ("cohort", args.cohort_url)):
                # The baseline: the same page, as long a run, without ticks, before and after.
                before = bench.result(
                    f"quiet+{name}", url, bench.wrk(url, duration=args.tick_duration)
                )
                ticked = during_ticks(bench, f"tick+{name}", url)
                after = bench.result(
                    f"quiet+{name}", url, bench.wrk(url, duration=args.tick_duration)
                )
                ticked.max_p99 = (before.p99 + after.p99) / 2 * 1.2
                results.extend([before, ticked, after])
        load.append(os.getloadavg()[0])
    finally:
        bench.stop()

    for r in results:
        r.floor = floor.rps
    print(f"\ngunicorn {args.workers} workers x {args.threads} threads, wrk {args.connections} "
          f"connections, {args.duration:.0f} s per run ({args.tick_duration:.0f} s for tick runs), "
          f"{os.cpu_count()} CPUs; load average (1 min) at start / cache switch / end: "
          f"{' / '.join(f'{x:.2f}' for x in load)}")  # fmt: skip
    print(f"floor: {floor.url} at {floor.rps:,.0f} req/s "
          f"(app {floor.cpu_app:.2f} + db {floor.cpu_db:.2f} ms CPU per request)")  # fmt: skip
    print(f"{'run':<11} {'url':<28} {'req/s':>7} {'x floor':>7} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'CPU ms app+db':>13} {'err':>4}  target -> verdict")  # fmt: skip
    for r in results:
        print(f"{r.name:<11} {r.url[:28]:<28} {r.rps:>7.0f} {r.ratio():>7.3f} {r.p50:>7.1f} "
              f"{r.p99:>7.1f} {r.cpu_app:>6.2f}+{r.cpu_db:<6.2f} {r.errors:>4}  "
              f"{r.target()} -> {r.verdict()}")  # fmt: skip
        if r.note:
            print(f"{'':<11} {r.note}")
    sys.exit(1 if any(r.verdict() != "ok" for r in results) else 0)


if __name__ == "__main__":
    main()
