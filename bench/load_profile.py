"""Where does one request's time go? Queries (count, SQL time, the slowest), template and the rest.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_load \
        uv run python bench/load_profile.py / /cohorts/1/ /api/leaderboard

In-process (Django's test Client, production-like settings as in bench/pages.py), after warm-up
requests; the median of --requests runs. With --cprofile, the top functions by cumulative time
of one more request. Used by bench/load.sh to explain a page that misses its target.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pages  # noqa: E402,F401  (Django set up with the bench's production-like settings)
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.signals import template_rendered  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402


def profile(client: Client, url: str, requests: int) -> dict:
    for _ in range(3):
        assert client.get(url).status_code == 200, url
    walls, sqls, counts = [], [], []
    slowest: list[tuple[float, str]] = []
    for _ in range(requests):
        with CaptureQueriesContext(connection) as ctx:
            t = time.perf_counter()
            response = client.get(url)
            walls.append((time.perf_counter() - t) * 1000)
        times = [(float(q["time"]) * 1000, q["sql"]) for q in ctx.captured_queries]
        sqls.append(sum(ms for ms, _ in times))
        counts.append(len(times))
        slowest = sorted(times, reverse=True)[:3]
    return {
        "url": url,
        "wall_ms": statistics.median(walls),
        "sql_ms": statistics.median(sqls),
        "queries": max(counts),
        "bytes": len(response.content),
        "slowest": slowest,
    }


def cprofile(client: Client, url: str, top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    client.get(url)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--cprofile", action="store_true")
    args = parser.parse_args()
    client = Client()
    # Templates render lazily; the test signal is only sent when instrumented, so count it here.
    template_rendered.connect(lambda **kw: None)
    print(f"{'url':<42} {'wall ms':>8} {'sql ms':>7} {'queries':>7} {'bytes':>8}")
    for url in args.urls:
        r = profile(client, url, args.requests)
        print(f"{url:<42} {r['wall_ms']:>8.1f} {r['sql_ms']:>7.1f} {r['queries']:>7} "
              f"{r['bytes']:>8,}")  # fmt: skip
        for ms, sql in r["slowest"]:
            print(f"    {ms:7.1f} ms  {' '.join(sql.split())[:150]}")
        if args.cprofile:
            print(cprofile(client, url))


if __name__ == "__main__":
    main()
