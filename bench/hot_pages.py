"""Hot pages rendered on write: over a rehearsal, how many hot-page requests a visitor rendered.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_hot \\
        uv run python bench/hot_pages.py [--weeks 1] [--rate 5040] [--visitors 4] [--pause 0.05]

Runs `arena rehearse --weeks N` (its own gunicorn, Celery worker, beat and stand-ins on an
accelerated clock, every write of a live week: ticks every 10 arena minutes, decision rounds,
resolutions, seals and score runs; the database must be migrated and hold no live cohorts) and
meanwhile V visitor threads read the hot pages (web/prerender.py: /, /api/leaderboard, /api/overview,
/markets/ and each running cohort's page) one after another, anonymously, with a pause between
two requests. Then it reads the web's access log, where every request says what the page cache
answered (cache=hit|stale|miss), and prints per page: requests, hits, stale answers and misses
(a visitor rendered). Each page's first request is the warm-up. Target: no miss after it. The
pages a worker renders on write do not appear in the access log (rendered in the worker).

A write in a worker reserves each hot page's render for the worker's round before its new
tokens are published (web/prerender.py), so a visitor renders a hot page only after a write made
in a web process (an outside agent's submission, a staff correction), which reserves nothing,
or when the round comes later than the reservation lasts (5 s). The report says the rate and the
writes' pace with the figures.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXED = ("/", "/api/leaderboard", "/api/overview", "/markets/")
LINE = re.compile(r"path=(\S+) .*?status=(\d{3}).*?(?:cache=(\w+))?(?: msg=|$)")


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except OSError:
        return 0, b""


def _base_url(web_log: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        if web_log.exists():
            found = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", web_log.read_text())
            if found:
                return found.group(1)
        time.sleep(0.2)
    raise SystemExit(f"no 'Listening at' line in {web_log}")


class Visitors:
    def __init__(self, base: str, n: int, pause: float) -> None:
        self.base, self.n, self.pause = base, n, pause
        self.stop = threading.Event()
        self.cohorts: list[str] = []
        self.sent = 0

    def _refresh_cohorts(self) -> None:
        status, body = _get(f"{self.base}/api/cohorts/?limit=50")
        if status == 200:
            rows = json.loads(body).get("cohorts", [])
            self.cohorts = [f"/cohorts/{c['id']}/" for c in rows
                            if c.get("status") != "completed"][:8]  # fmt: skip

    def _visit(self, offset: int) -> None:
        i = offset
        while not self.stop.is_set():
            paths = [*FIXED, *self.cohorts]
            _get(self.base + paths[i % len(paths)])
            self.sent += 1
            i += 1
            self.stop.wait(self.pause)

    def run(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._visit, args=(k,), daemon=True)
                   for k in range(self.n)]  # fmt: skip

        def cohorts() -> None:
            while not self.stop.is_set():
                self._refresh_cohorts()
                self.stop.wait(2.0)

        threads.append(threading.Thread(target=cohorts, daemon=True))
        for t in threads:
            t.start()
        return threads


def _tally(web_log: Path) -> dict[str, collections.Counter]:
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    seen: set[str] = set()
    for line in web_log.read_text(errors="replace").splitlines():
        found = LINE.search(line)
        if not found or "method=GET" not in line:
            continue
        path, status, state = found.group(1), found.group(2), found.group(3) or "none"
        hot = path in FIXED or re.fullmatch(r"/cohorts/\d+/", path)
        if not hot:
            continue
        if path not in seen:  # the warm-up
            seen.add(path)
            continue
        per[path][state if status == "200" else f"status {status}"] += 1
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=1)
    parser.add_argument("--rate", type=float, default=5040.0, help="the rehearsal's clock rate")
    parser.add_argument("--visitors", type=int, default=4)
    parser.add_argument("--pause", type=float, default=0.05, help="seconds between requests")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "arena", "rehearse", "--weeks",
         str(args.weeks), "--rate", str(args.rate)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    directory = None
    for line in proc.stdout:
        sys.stdout.write(line)
        found = re.search(r"logs in (\S+)", line)
        if found:
            directory = Path(found.group(1))
            break
    if directory is None:
        raise SystemExit("the rehearsal did not start")
    web_log = directory / "web.log"
    base = _base_url(web_log, time.monotonic() + 120)
    visitors = Visitors(base, args.visitors, args.pause)
    visitors.run()
    for line in proc.stdout:
        sys.stdout.write(line)
    proc.wait()
    visitors.stop.set()
    per = _tally(web_log)
    total: collections.Counter = collections.Counter()
    tick = 600 / args.rate
    print(f"\nhot pages over the rehearsal at rate {args.rate:g} (a tick every {tick:.2f} s of "
          f"wall; {visitors.sent} visitor requests, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}):")  # fmt: skip
    print(f"{'page':28} {'requests':>8} {'hit':>6} {'stale':>6} {'miss':>6} {'other':>6}")
    for path in sorted(per, key=lambda p: (p not in FIXED, p)):
        c = per[path]
        total.update(c)
        other = sum(n for k, n in c.items() if k not in ("hit", "stale", "miss"))
        print(f"{path:28} {sum(c.values()):8} {c['hit']:6} {c['stale']:6} {c['miss']:6} {other:6}")
    n = sum(total.values())
    share = total["miss"] / n if n else 0.0
    print(f"{'all':28} {n:8} {total['hit']:6} {total['stale']:6} {total['miss']:6}"
          f"   rendered by a visitor: {share:.2%}")  # fmt: skip
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
