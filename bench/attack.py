"""Attack and fault run (issue 19): each case against real processes on loopback, with its result.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_attack uv run python bench/attack.py
    uv run python bench/attack.py            # SQLite under a temp folder (PostgreSQL cases skip)
    ... --report var/attack-report.md        # also write the report there

Starts its own gunicorn (DEBUG=0, as deployed) on a free 127.0.0.1 port, a private redis-server
for the cache, and for one case a Debian nginx with the shipped compose config; every request
loop is bounded in count and time, every target is 127.0.0.1, and everything it started is
stopped at the end. Prints one line per case - PASS/FAIL/SKIP, what was measured - then the
machine's load average. Figures are ratios to a floor measured in the same run where a speed is
involved. The database named by DATABASE_URL is migrated, EMPTIED and filled with a little bench
data: give it a database of its own.

The in-repo fault tests (stopped Redis, killed workers and score runs, dropped settlement
connections, staff reopen, upstream edge cases) remain the proofs; this run shows the attacks
from outside, as the original attack run did.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VAR = Path(tempfile.mkdtemp(prefix="arena-attack-"))
SECRET = "bench-attack-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
BASE_ENV = {
    "DJANGO_SETTINGS_MODULE": "arena.settings",
    "ARENA_VAR_DIR": str(VAR),
    "DATABASE_URL": os.environ.get("DATABASE_URL") or f"sqlite:///{VAR / 'attack.sqlite3'}",
    "CELERY_BROKER_URL": "memory://",
    "DEBUG": "0",
    "SECRET_KEY": SECRET,
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    "SECURE_SSL_REDIRECT": "0",
    "SECURE_COOKIES": "0",
    "LOG_LEVEL": "WARNING",
    "ARENA_LOGIN_MAX_FAILURES": "5",
    # docs/deploy.md's env file: one export computed at a time on the machine
    "ARENA_EXPORTS_MACHINE": "1",
}
os.environ.update(BASE_ENV)
IS_PG = BASE_ENV["DATABASE_URL"].startswith("postgres")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402


@dataclass
class Case:
    finding: str
    name: str
    result: str  # PASS / FAIL / SKIP
    detail: str


RESULTS: list[Case] = []
STARTED: list[subprocess.Popen] = []


def record(finding: str, name: str, ok: bool | None, detail: str) -> None:
    result = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
    RESULTS.append(Case(finding, name, result, detail))
    print(f"[{result}] {finding:>3} {name}: {detail}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], env: dict | None = None, log: str = "proc") -> subprocess.Popen:
    out = open(VAR / f"{log}.log", "w")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    STARTED.append(proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def get(url: str, method: str = "GET", data: bytes | None = None, headers=None, timeout=10):
    """(status, body, seconds); status 0 when no answer came."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return (
                response.status,
                response.read(),
                time.perf_counter() - t0,
                dict(response.headers),
            )
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), time.perf_counter() - t0, dict(exc.headers)
    except OSError:
        return 0, b"", time.perf_counter() - t0, {}


def wait_http(url: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if get(url, timeout=2)[0] == 200:
            return
        time.sleep(0.2)
    raise SystemExit(f"{url} never answered; see {VAR}")


def gunicorn(
    env: dict | None = None, workers: int = 3, log: str = "gunicorn"
) -> tuple[str, subprocess.Popen]:
    port = free_port()
    proc = start([sys.executable, "-m", "gunicorn", "arena.wsgi:application", "--bind",
                  f"127.0.0.1:{port}", "--workers", str(workers), "--threads", "4"], env, log)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/methodology/")
    return base, proc


def rate(url: str, seconds: float, threads: int = 4) -> float:
    """Requests per second of GET url over `seconds` from `threads` loopback clients."""
    stop_at = time.monotonic() + seconds
    counts = [0] * threads

    def loop(i: int) -> None:
        while time.monotonic() < stop_at:
            if get(url, timeout=5)[0] == 200:
                counts[i] += 1

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(loop, range(threads)))
    return sum(counts) / seconds


# --- setup --------------------------------------------------------------------------------


def seed() -> dict:
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from cohorts.models import Decision
    from markets.models import Market
    from tests.factories import make_cohort_with_entries, make_market

    call_command("migrate", interactive=False, verbosity=0)
    call_command("flush", interactive=False, verbosity=0)  # a bench database: start from empty
    call_command("collectstatic", interactive=False, verbosity=0)
    # Live markets, synced just now: a live cohort's universe takes nothing else.
    live = {"source": Market.Source.POLYMARKET, "last_synced_at": timezone.now()}
    for _ in range(30):
        make_market(**live)
    hostile = make_market(**live)
    Market.objects.filter(pk=hostile.pk).update(url="javascript:alert(document.domain)")
    _, entries = make_cohort_with_entries(2)
    prompt = "market line with a question and its prices\n" * 2400  # ~100 kB, as real prompts
    now = timezone.now()
    Decision.objects.bulk_create(
        Decision(entry=entries[0], week=100 + i, status="done", user_prompt=prompt,
                 system_prompt="You trade.", claimed_at=now - timedelta(minutes=i),
                 decided_at=now - timedelta(minutes=i))
        for i in range(200)
    )  # fmt: skip
    user = get_user_model()
    user.objects.filter(username="ops").delete()
    user.objects.create_user("ops", password="correct horse battery", is_staff=True)
    return {"hostile_market": hostile.pk}


# --- cases ----------------------------------------------------------------------------------


def case_cache_under_anonymous_posts(base: str) -> None:
    url = base + "/cohorts/"
    get(url)
    floor = rate(url, 3)
    stop_at = time.monotonic() + 3.5
    posts = [0]

    def poster() -> None:  # 10 anonymous POSTs per second, to several URLs
        while time.monotonic() < stop_at:
            for target in ("/", "/cohorts/", "/api/markets", "/admin/login/"):
                get(base + target, method="POST", data=b"x=1")
                posts[0] += 1
            time.sleep(0.4)

    t = threading.Thread(target=poster)
    t.start()
    under = rate(url, 3)
    t.join()
    hit = get(url)[3].get("X-Cache")
    record("1", "anonymous POST flood vs page cache",
           hit == "hit" and under > 0.5 * floor,
           f"{under:.0f} req/s during {posts[0]} POSTs vs {floor:.0f} floor "
           f"(ratio {under / floor:.2f}); X-Cache after: {hit}")  # fmt: skip


def case_redis_down() -> None:
    if not shutil.which("redis-server"):
        return record("2", "Redis down", None, "redis-server not installed")
    port = free_port()
    redis = start(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no"], log="redis")  # fmt: skip
    time.sleep(0.5)
    base, web = gunicorn({"REDIS_CACHE_URL": f"redis://127.0.0.1:{port}/1"}, log="gunicorn-redis")
    urls = ["/", "/markets/", "/cohorts/", "/api/markets", "/api/cohorts/", "/admin/login/"]
    before = [get(base + u)[0] for u in urls]
    stop(redis)
    during = [get(base + u)[0] for u in urls for _ in range(3)]
    login = LoginSession(base).post("correct horse battery")[0]  # signs in: 302 -> /admin/ 200
    stop(web)
    five = sum(c >= 500 for c in during)
    record("2", "Redis stopped under gunicorn", five == 0 and all(c == 200 for c in before),
           f"{len(during)} requests with Redis down: {five} 5xx (statuses {sorted(set(during))}); "
           f"admin sign-in {login}")  # fmt: skip


def case_db_kill(base: str) -> None:
    if not IS_PG:
        return record("3", "PostgreSQL connections killed", None, "needs a postgres DATABASE_URL")
    from django.db import connection

    pages = ["/cohorts/", "/api/markets?q=a", "/markets/?q=b", "/api/cohorts/"]
    for p in pages:
        get(base + p)
    codes = []
    for _ in range(3):
        with connection.cursor() as cur:
            cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                        "datname = current_database() AND pid <> pg_backend_pid()")  # fmt: skip
        codes += [get(base + p + ("&" if "?" in p else "?") + f"n={i}")[0] for i in range(5) for p in pages]  # fmt: skip
    bad = sum(c >= 500 for c in codes)
    record("3", "PostgreSQL connections killed (3 rounds)", bad == 0,
           f"{len(codes)} requests after the kills: {bad} 5xx")  # fmt: skip


def case_bad_input(base: str, market_id: int) -> None:
    urls = ["/markets/?q=%00", "/api/markets?q=%00", "/api/markets?limit=abc",
            "/api/markets?limit=-1", "/api/cohorts/?limit=999999", "/cohorts/1/?range=5Y",
            "/?sort=evil", "/markets/?page=abc", "/?range=5Y", f"/markets/{market_id}/?range=5Y",
            "/api/overview?scope=moon", "/api/overview?range=5Y",
            f"/api/markets/{market_id}/prices?range=5Y", "/api/seals?limit=abc",
            "/api/seals?kind=moon", "/api/leaderboard?cohort=abc"]  # fmt: skip
    urls += [f"/exports/{w}.{f}?until={d}" for w in ("decisions", "trades", "snapshots",
             "forecasts", "scores") for f in ("csv", "json") for d in ("9999-12-31", "0000-01-01")]  # fmt: skip
    urls += [f"/exports/seals.json?until={d}" for d in ("9999-12-31", "0000-01-01")]
    answers = [get(base + u) for u in urls]
    ok = all(a[0] == 400 and len(a[1].strip().splitlines()) == 1 for a in answers)
    record("6", "bad parameters (NUL, limits, ranges, scopes, 22 extreme export dates)", ok,
           f"{len(urls)} requests: statuses {sorted({a[0] for a in answers})}, "
           f"all one line: {all(len(a[1].strip().splitlines()) == 1 for a in answers)}")  # fmt: skip
    head = get(base + "/api/markets", method="HEAD")[0]
    anon = [get(base + u, m)[0] for u in ("/api/markets", "/markets/") for m in ("PUT", "TRACE")]
    record("14", "HEAD on the API; other methods", head == 200 and all(c in (403, 405) for c in anon),
           f"HEAD {head}; PUT/TRACE {anon}")  # fmt: skip


class LoginSession:
    """A browser's sign-in: the form (CSRF cookie and token) first, then the POST."""

    def __init__(self, base: str):
        import http.cookiejar
        import re

        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        with self.opener.open(base + "/admin/login/", timeout=10) as response:
            page = response.read().decode()
        self.token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)

    def post(self, password: str) -> tuple[int, float, str, dict]:
        body = urllib.parse.urlencode({"username": "ops", "password": password,
                                       "csrfmiddlewaretoken": self.token}).encode()  # fmt: skip
        request = urllib.request.Request(
            self.base + "/admin/login/?next=/admin/", data=body, method="POST"
        )
        t0 = time.perf_counter()
        try:
            with self.opener.open(request, timeout=30) as response:
                text, status, headers = response.read().decode(), response.status, response.headers
        except urllib.error.HTTPError as exc:
            text, status, headers = exc.read().decode(), exc.code, exc.headers
        return status, time.perf_counter() - t0, text, dict(headers)


def _login(base: str, password: str) -> tuple[int, float]:
    status, seconds, _, _ = LoginSession(base).post(password)
    return status, seconds


def case_login(base: str) -> None:
    from axes.models import AccessAttempt
    from django.db.models import Sum

    AccessAttempt.objects.all().delete()
    sessions = [LoginSession(base) for _ in range(16)]  # forms fetched first; then the burst
    with ThreadPoolExecutor(16) as pool:
        burst = list(pool.map(lambda i: sessions[i].post(f"guess{i}")[0], range(16)))
    checked = AccessAttempt.objects.aggregate(n=Sum("failures_since_start"))["n"] or 0
    right, _ = _login(base, "correct horse battery")
    record("5", "16 concurrent guesses, then the right password", checked == 5 and right == 429,
           f"{checked} guesses checked (allowance 5), {burst.count(429)} answered 429; "
           f"right password then: {right}")  # fmt: skip
    session = LoginSession(base)
    locked = [session.post("wrong")[1] for _ in range(8)]
    AccessAttempt.objects.all().delete()
    session = LoginSession(base)
    failing = [session.post("wrong")[1] for _ in range(4)]
    status, _, text, headers = session.post("wrong")  # the fifth failure locks
    AccessAttempt.objects.all().delete()
    ratio = statistics.median(locked) / statistics.median(failing)
    record("5", "locked reply: timing and wording", 0.5 < ratio < 2 and status == 429
           and "locked until" in text and "correct username and password" not in text
           and "Retry-After" in headers,
           f"median locked {statistics.median(locked) * 1000:.0f} ms vs failed "
           f"{statistics.median(failing) * 1000:.0f} ms (ratio {ratio:.2f}); 5th failure {status}, "
           f"says when it ends: {'locked until' in text}; Retry-After {headers.get('Retry-After')}")  # fmt: skip


def case_endpoint_exfiltration() -> None:
    from agents.endpoints import client_for
    from agents.models import Competitor

    port = free_port()
    got: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(4)
    listener.settimeout(0.5)
    comp = Competitor(slug="exfil", display_name="x", kind="llm", model_id="m",
                      base_url=f"http://127.0.0.1:{port}/v1", api_key_env="SECRET_KEY")  # fmt: skip
    client, why = client_for(comp)
    with contextlib.suppress(OSError):
        conn, _ = listener.accept()
        got.append(conn.recv(4096))
    listener.close()
    record(
        "4",
        "competitor endpoint = outside listener, key var = SECRET_KEY",
        client is None and not got,
        f"client refused: {why!r}; bytes received: {len(b''.join(got))}",
    )


def case_debug_secrets() -> None:
    secret_url = f"redis://:{SECRET[:20]}@127.0.0.1:9/1"
    base, web = gunicorn({"DEBUG": "1", "REDIS_CACHE_URL": secret_url, "ALLOWED_HOSTS": ""},
                         workers=1, log="gunicorn-debug")  # fmt: skip
    status, body, _, _ = get(base + "/", headers={"Host": "evil.example"})
    export = get(base + "/exports/trades.csv?until=9999-12-31")
    stop(web)
    leaked = SECRET[:20].encode() in body or SECRET[:20].encode() in export[1]
    record(
        "7",
        "DEBUG on: foreign Host header, export overflow",
        not leaked and export[0] == 400,
        f"foreign Host -> {status}, export -> {export[0]}; secret shown: {leaked}",
    )
    try:
        subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, check=True,
                       env={**os.environ, "DEBUG": "1", "ALLOWED_HOSTS": "arena.example.org"},
                       capture_output=True, timeout=120)  # fmt: skip
        refused = False
    except subprocess.CalledProcessError:
        refused = True
    record("7", "DEBUG with a public ALLOWED_HOSTS", refused, f"refused at start: {refused}")


def _attack_sockets(port: int, idle: int, slow: int, seconds: float) -> list[socket.socket]:
    socks = []
    for _ in range(idle):
        with contextlib.suppress(OSError):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    trickling = []
    for _ in range(slow):
        with contextlib.suppress(OSError):
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            trickling.append(s)
    stop_at = time.monotonic() + seconds

    def trickle() -> None:
        while time.monotonic() < stop_at:
            for s in trickling:
                with contextlib.suppress(OSError):
                    s.sendall(b"X-Slow: 1\r\n")
            time.sleep(1)

    threading.Thread(target=trickle, daemon=True).start()
    return socks + trickling


def case_slow_sockets(base: str) -> None:
    port = int(base.rsplit(":", 1)[1])
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    results = {}
    targets = [("gunicorn alone", port)]
    front = None
    if nginx:
        from tests.faults.test_slow_clients import nginx_front

        front_port = free_port()
        ndir = VAR / "nginx"
        ndir.mkdir(exist_ok=True)
        front = start(nginx_front(ndir, front_port, port), log="nginx")
        wait_http(f"http://127.0.0.1:{front_port}/methodology/")
        targets.append(("behind the shipped nginx", front_port))
    for label, p in targets:
        socks = _attack_sockets(p, idle=200, slow=50, seconds=12)
        answers = [get(f"http://127.0.0.1:{p}/methodology/", timeout=5) for _ in range(3)]
        for s in socks:
            s.close()
        results[label] = answers
        time.sleep(6)  # let gunicorn shed the dead sockets before the next target
    if front is not None:
        stop(front)
    detail = "; ".join(
        f"{label}: {[a[0] for a in ans]} in max {max(a[2] for a in ans):.1f} s"
        for label, ans in results.items()
    )
    protected = results.get("behind the shipped nginx")
    ok = None if protected is None else all(a[0] == 200 and a[2] < 2 for a in protected)
    record(
        "8", "200 idle + 50 slow sockets", ok, detail + ("" if nginx else "; nginx not installed")
    )


def case_healthz_hung_broker() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    base, web = gunicorn({"CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0"}, workers=1,
                         log="gunicorn-healthz")  # fmt: skip
    times = [get(base + "/healthz", timeout=10)[2] for _ in range(20)]
    stop(web)
    listener.close()
    # A request that finds the last broker check stale waits for a new one up to WAIT_SECONDS
    # (arena/health.py), never the hung broker's seconds.
    from arena.health import WAIT_SECONDS

    record("13", "/healthz with a broker that accepts and never answers",
           max(times) < WAIT_SECONDS + 0.25,
           f"20 requests: median {statistics.median(times) * 1000:.0f} ms, max "
           f"{max(times) * 1000:.0f} ms (the wait for a check is {WAIT_SECONDS:g} s)")  # fmt: skip


def case_export_memory(base: str, web: subprocess.Popen) -> None:
    def rss_mb() -> float:
        total = 0
        for pid in subprocess.run(["pgrep", "-g", str(web.pid)], capture_output=True,
                                  text=True).stdout.split():  # fmt: skip
            with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("VmRSS"))
        return total / 1024

    before = rss_mb()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], rss_mb())

    sampler = threading.Thread(target=sample)
    sampler.start()
    url = base + "/exports/decisions.json?limit=200&since=2000-01-01"
    with ThreadPoolExecutor(8) as pool:
        sizes = list(pool.map(lambda _: len(get(url, timeout=120)[1]), range(8)))
    done.set()
    sampler.join()
    record("10", "8 concurrent decision exports (200 rows x ~100 kB each)",
           peak[0] - before < 0.5 * sum(sizes) / 1e6,
           f"gunicorn RSS {before:.0f} MB, peak {peak[0]:.0f} MB while sending "
           f"{sum(sizes) / 1e6:.0f} MB")  # fmt: skip


def case_javascript_url(base: str, market_id: int) -> None:
    page = get(f"{base}/markets/{market_id}/")[1].decode(errors="replace")
    api = json.loads(get(f"{base}/api/markets/{market_id}")[1])
    ok = "javascript:" not in page.lower() and api["url"] is None
    record(
        "12",
        "javascript: market URL",
        ok,
        f"in page: {'javascript:' in page.lower()}; API url: {api['url']}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", help="also write the report (markdown) to this file")
    args = parser.parse_args()
    try:
        ids = seed()
        base, web = gunicorn()
        case_cache_under_anonymous_posts(base)
        case_db_kill(base)
        case_bad_input(base, ids["hostile_market"])
        case_javascript_url(base, ids["hostile_market"])
        import attack_input  # issue 26's input side, a file of its own beside this one

        attack_input.input_cases(base, record, get)
        case_export_memory(base, web)
        case_login(base)
        case_endpoint_exfiltration()
        case_slow_sockets(base)
        # Issue 26, the web side, and issue 25's export numbers (bench/attack_web.py).
        import attack_web

        attack_web.run(sys.modules[__name__], base, ids)
        import attack_round3  # issue 41: slow peers, exports, session cookies, staff rights

        attack_round3.run(sys.modules[__name__], base, ids)
        stop(web)
        case_redis_down()
        case_debug_secrets()
        case_healthz_hung_broker()
    finally:
        for proc in STARTED:
            stop(proc)
    load = os.getloadavg()
    lines = [f"| {c.finding} | {c.name} | {c.result} | {c.detail} |" for c in RESULTS]
    summary = (f"{sum(c.result == 'PASS' for c in RESULTS)} passed, "
               f"{sum(c.result == 'FAIL' for c in RESULTS)} failed, "
               f"{sum(c.result == 'SKIP' for c in RESULTS)} skipped")  # fmt: skip
    report = "\n".join([
        f"# Attack and fault run ({'PostgreSQL' if IS_PG else 'SQLite'}, gunicorn DEBUG=0)", "",
        "| finding | case | result | measured |", "|---|---|---|---|", *lines, "",
        f"{summary}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; logs in {VAR}",
    ])  # fmt: skip
    print("\n" + report)
    if args.report:
        Path(args.report).write_text(report + "\n")
    return 1 if any(c.result == "FAIL" for c in RESULTS) else 0


if __name__ == "__main__":
    sys.exit(main())

