"""nginx's micro-cache at nginx's own floor: cached `/` through the shipped nginx config against a
static file nginx serves itself, read in turns in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_pages \\
        uv run python bench/nginx_floor.py [--duration 8] [--connections 16] [--rounds 3]

Starts gunicorn as deployed (DEBUG=0, 3 workers x 4 threads) on the database and Debian's nginx
with the shipped compose config in front of it (deploy/nginx-compose.conf, as the micro-cache
test runs it), plus a second server in the same nginx that serves one file from disk: the
floor, a file as large as the home page so both answers move the same bytes. wrk (Debian's)
reads the floor and `/` in turns, `--rounds` times each, after one warm-up request of `/`
(the render nginx then keeps for 5 s, refreshed in the background: `proxy_cache_use_stale
updating`). Prints each round's requests a second, the medians and the ratio. Target: cached
`/` at 0.8 x the floor or more. Any database with a migrated schema works (the bench's own:
bench/pages.py builds it); the figure is about nginx, not the page.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NGINX = "/usr/sbin/nginx"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nginx_conf(folder: Path, front: int, upstream: int, floor: int, files: Path) -> Path:
    site = (ROOT / "deploy" / "nginx-compose.conf").read_text()
    site = site.replace("server web:8000;", f"server 127.0.0.1:{upstream};")
    site = site.replace("listen 8080;", f"listen 127.0.0.1:{front};")
    cache = folder / "micro-cache"
    cache.mkdir()
    cache.chmod(0o777)  # nginx's workers drop root's rights
    site = site.replace("/var/cache/arena-nginx", str(cache))
    (folder / "site.conf").write_text(site)
    temp = {name: folder / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    conf = folder / "nginx.conf"
    conf.write_text(
        f"worker_processes 1; pid {folder / 'nginx.pid'}; error_log {folder / 'error.log'};\n"
        "events { worker_connections 1024; }\n"
        f"http {{ access_log off; client_body_temp_path {temp['body']}; "
        f"proxy_temp_path {temp['proxy']}; fastcgi_temp_path {temp['fastcgi']}; "
        f"uwsgi_temp_path {temp['uwsgi']}; scgi_temp_path {temp['scgi']}; "
        f"include {folder / 'site.conf'};\n"
        f"  server {{ listen 127.0.0.1:{floor}; root {files}; }} }}\n"
    )
    return conf


def _get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read(), response.headers.get("X-Micro-Cache", "")
    except OSError as exc:
        return 0, str(exc).encode(), ""


def _wrk(url: str, seconds: int, connections: int) -> float:
    done = subprocess.run(
        ["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds}s", url],
        capture_output=True, text=True, timeout=seconds + 30, check=True,
    )  # fmt: skip
    found = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    if not found:
        raise SystemExit(f"wrk printed no rate:\n{done.stdout}{done.stderr}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", done.stdout)
    if bad:
        raise SystemExit(f"{url}: {bad.group(1)} answers were not 2xx/3xx")
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=8, help="seconds of each wrk run")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for need in (NGINX, shutil.which("wrk")):
        if not need or not Path(need).exists():
            raise SystemExit("needs Debian's nginx and wrk: apt-get install nginx wrk")
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("set DATABASE_URL to a migrated database (bench/pages.py builds one)")

    folder = Path(tempfile.mkdtemp(prefix="arena-nginx-floor-"))
    folder.chmod(0o755)
    files = folder / "files"
    files.mkdir()
    upstream, front, floor = _free_port(), _free_port(), _free_port()
    env = dict(os.environ, DEBUG="0", SECRET_KEY=secrets.token_hex(32),
               ALLOWED_HOSTS="127.0.0.1,localhost", SECURE_SSL_REDIRECT="0",
               ARENA_VAR_DIR=str(folder / "var"), CELERY_BROKER_URL="memory://",
               LOG_LEVEL="WARNING")  # fmt: skip
    log = open(folder / "procs.log", "w")  # noqa: SIM115 (closed below)
    # As a deploy does: pages name static files by the manifest collectstatic writes.
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                   cwd=ROOT, env=env, check=True)  # fmt: skip
    procs = [subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "arena.wsgi:application", "--bind",
         f"127.0.0.1:{upstream}", "--workers", "3", "--threads", "4"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )]  # fmt: skip
    try:
        home = f"http://127.0.0.1:{front}/"
        deadline = time.monotonic() + 90
        conf = None
        while time.monotonic() < deadline:
            status, body, _ = _get(f"http://127.0.0.1:{upstream}/")
            if status == 200:
                break
            time.sleep(0.5)
        else:
            log.flush()
            raise SystemExit(f"gunicorn did not answer / within 90 s: {status} {body[:300]!r}\n"
                             + (folder / "procs.log").read_text()[-2000:])
        # The floor: a file as large as the page, served by nginx from disk.
        (files / "floor.html").write_bytes(b"x" * len(body))
        conf = _nginx_conf(folder, front, upstream, floor, files)
        procs.append(subprocess.Popen([NGINX, "-c", str(conf), "-p", str(folder), "-g",
                                       "daemon off;"], stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
        while _get(home)[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"nginx did not answer / (see {folder}/error.log)")
            time.sleep(0.2)
        status, _, cached = _get(home)
        print(f"/ is {len(body):,} bytes; nginx answers it {cached or 'without X-Micro-Cache'}")
        floors, pages = [], []
        for n in range(1, args.rounds + 1):
            floors.append(_wrk(f"http://127.0.0.1:{floor}/floor.html", args.duration,
                               args.connections))  # fmt: skip
            pages.append(_wrk(home, args.duration, args.connections))
            print(f"round {n}: floor {floors[-1]:,.0f} req/s, cached / {pages[-1]:,.0f} req/s "
                  f"({pages[-1] / floors[-1]:.2f} x)")  # fmt: skip
        ratio = statistics.median(pages) / statistics.median(floors)
        load = os.getloadavg()
        print(f"median: floor {statistics.median(floors):,.0f}, cached / "
              f"{statistics.median(pages):,.0f} req/s: {ratio:.2f} x the floor (target 0.8); "
              f"load average {load[0]:.1f} {load[1]:.1f}")  # fmt: skip
        if ratio < 0.8:
            sys.exit(1)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=15)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
