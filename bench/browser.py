"""What a visitor's browser gets: the public pages of the default demo in headless Chromium.

    .venv/bin/python bench/browser.py                 # build the demo once, serve it, measure
    .venv/bin/python bench/browser.py --url http://127.0.0.1:8000   # a site already running
    .venv/bin/python bench/browser.py --json out.json --rounds 3

Without --url it builds the default demo into its own folder (ARENA_VAR_DIR, default
/tmp/arena-browser-bench; built once, reused) and serves it with `arena up --no-worker
--no-beat`, the README's main command: DEBUG on, static files through whitenoise, so the figures
are what `./run up` gives. For each page, at 1,400 and 390 px wide, a first visit (a new
browser profile: empty cache) and a repeat visit (the same profile, the page loaded again):

    transferred  bytes on the wire (encoded: after gzip or brotli), all requests, and the
                 static files' share (a repeat visit should take them from the cache)
    dcl          DOMContentLoaded, ms from navigation start
    chart        the page's first chart on screen (charts.js marks `arena:first-chart`), ms
    lcp          largest contentful paint, ms

Each figure is the median of --rounds rounds. Targets (idle 2-core machine): a chart page
transfers <= 500 kB on a first visit and <= 30 kB of static files on a repeat visit; its first
chart is drawn and its LCP happens within 1,000 ms on a first visit. Exits 1 when one is missed
(say what the load average was: on a busy machine the times are not the site's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("ARENA_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
WIDTHS = (1400, 390)
FIRST_BYTES, REPEAT_STATIC_BYTES, FIRST_CHART_MS, LCP_MS = 500_000, 30_000, 1000.0, 1000.0

PROBE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const chart = performance.getEntriesByName("arena:first-chart")[0];
  return new Promise((resolve) => {
    let lcp = null;
    new PerformanceObserver((list) => {
      const entries = list.getEntries();
      lcp = entries[entries.length - 1].startTime;
    }).observe({ type: "largest-contentful-paint", buffered: true });
    setTimeout(() => resolve({
      dcl: nav ? nav.domContentLoadedEventEnd : null,
      chart: chart ? chart.startTime : null,
      lcp: lcp,
      charts: document.querySelectorAll("[data-chart-kind]").length,
    }), 50);
  });
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(var_dir: Path) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, ARENA_VAR_DIR=str(var_dir), LOG_LEVEL="WARNING")
    env.pop("DATABASE_URL", None)  # the demo's own SQLite in its folder
    arena = [sys.executable, str(ROOT / "manage.py"), "arena"]
    if not (var_dir / "demo-built").exists():
        print("building the default demo (once) ...", file=sys.stderr)
        subprocess.run([*arena, "demo"], env=env, check=True, cwd=ROOT)
        (var_dir / "demo-built").touch()
    port = free_port()
    proc = subprocess.Popen(
        [*arena, "up", "--no-worker", "--no-beat", "--port", str(port)],
        env=env, cwd=ROOT, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/", timeout=5) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit("the site did not answer within 180 s")


def pages(url: str) -> dict[str, str]:
    """The public pages to measure, found from the home page's own links."""
    with urllib.request.urlopen(url + "/", timeout=30) as r:
        home = r.read().decode()

    def first(pattern: str) -> str | None:
        m = re.search(pattern, home)
        return m.group(1) if m else None

    found = {
        "home": "/",
        "competitor": first(r'href="(/competitors/[\w-]+/(?:\?scope=\w+)?)"'),
        "markets": "/markets/",
        "methodology": "/methodology/",
    }
    for name, listing, pattern in (
        ("cohort", "/cohorts/", r'href="(/cohorts/\d+/)"'),
        ("market", "/markets/", r'href="(/markets/\d+/)"'),
    ):
        with urllib.request.urlopen(url + listing, timeout=30) as r:
            m = re.search(pattern, r.read().decode())
        found[name] = m.group(1) if m else None
    return {k: v for k, v in found.items() if v}


def visit(page, cdp, target: str) -> dict:
    sizes: dict[str, int] = {}
    urls: dict[str, str] = {}
    cdp.on("Network.responseReceived", lambda e: urls.__setitem__(e["requestId"], e["response"]["url"]))
    cdp.on("Network.loadingFinished",
           lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])))  # fmt: skip
    page.goto(target, wait_until="load")
    # No chart drawn within 15 s: reported as missing, not raised.
    with contextlib.suppress(Exception):
        page.wait_for_function(
            "() => !document.querySelector('[data-chart-kind]') || "
            "performance.getEntriesByName('arena:first-chart').length", timeout=15000
        )
    probe = page.evaluate(PROBE)
    static = sum(n for rid, n in sizes.items() if "/static/" in urls.get(rid, ""))
    return {**probe, "bytes": sum(sizes.values()), "static_bytes": static}


def measure(url: str, rounds: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for name, path in pages(url).items():
            for width in WIDTHS:
                samples: dict[str, list[dict]] = {"first": [], "repeat": []}
                for _ in range(rounds):
                    context = browser.new_context(viewport={"width": width, "height": 900})
                    for kind in ("first", "repeat"):
                        page = context.new_page()
                        cdp = context.new_cdp_session(page)
                        cdp.send("Network.enable")
                        samples[kind].append(visit(page, cdp, url + path))
                        page.close()
                    context.close()
                for kind, got in samples.items():
                    row = {"page": name, "path": path, "width": width, "visit": kind}
                    for key in ("bytes", "static_bytes", "dcl", "chart", "lcp"):
                        values = [g[key] for g in got if g[key] is not None]
                        row[key] = statistics.median(values) if values else None
                    row["has_chart"] = bool(got[0]["charts"])
                    rows.append(row)
        browser.close()
    return rows


def misses(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if not r["has_chart"]:
            continue
        where = f"{r['page']} at {r['width']} px, {r['visit']} visit"
        if r["visit"] == "first":
            if r["bytes"] > FIRST_BYTES:
                out.append(f"{where}: {r['bytes']} bytes > {FIRST_BYTES}")
            if r["chart"] is None or r["chart"] > FIRST_CHART_MS:
                out.append(f"{where}: first chart at {r['chart']} ms > {FIRST_CHART_MS}")
            if r["lcp"] is None or r["lcp"] > LCP_MS:
                out.append(f"{where}: LCP {r['lcp']} ms > {LCP_MS}")
        elif r["static_bytes"] > REPEAT_STATIC_BYTES:
            out.append(f"{where}: {r['static_bytes']} static bytes > {REPEAT_STATIC_BYTES}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running site (default: build the demo and serve it)")
    ap.add_argument("--var-dir", default=os.environ.get("ARENA_VAR_DIR", "/tmp/arena-browser-bench"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    proc = None
    url = args.url
    if url is None:
        var = Path(args.var_dir)
        var.mkdir(parents=True, exist_ok=True)
        proc, url = serve(var)
    try:
        load = os.getloadavg()
        rows = measure(url.rstrip("/"), args.rounds)
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    print(f"load average at start: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    print(f"{'page':12} {'width':>5} {'visit':6} {'kB':>7} {'static kB':>9} {'DCL ms':>7} "
          f"{'chart ms':>8} {'LCP ms':>7}")  # fmt: skip
    for r in rows:
        def ms(v):
            return "-" if v is None else f"{v:.0f}"

        print(f"{r['page']:12} {r['width']:>5} {r['visit']:6} {r['bytes'] / 1000:>7.1f} "
              f"{r['static_bytes'] / 1000:>9.1f} {ms(r['dcl']):>7} {ms(r['chart']):>8} "
              f"{ms(r['lcp']):>7}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "rows": rows}, indent=2))
    missed = misses(rows)
    for line in missed:
        print("MISSED", line)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
