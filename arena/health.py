"""/healthz: can we reach the database and the broker, is a worker alive, is there disk left,
and when did each periodic job last succeed? One overall `status`: "ok", "degraded" (a job
late, the disk low: look soon) or "error" (database, broker or worker down, the disk full: the
arena cannot run), the last answered with 503 so a probe or orchestrator sees it.

Redacted on purpose: no hostnames, credentials or error text from drivers, only states and times
(and the signing key's public id, or why this process's key is not the arena's).

Worker liveness is a heartbeat: beat sends `arena.tasks.heartbeat` every minute and a worker
records its wall-clock time (one row, updated in place). No heartbeat for WORKER_LATE means no
worker consumes the queue (or beat is down, which stops everything just the same). A fresh
install has none yet: until it is WORKER_LATE old (its first migration) that reads "starting",
not "down", and a job that never ran is not "late" before its own period has passed.

Who gets what: a local probe (a caller on the loopback, `curl http://127.0.0.1:8000/healthz` on
a DEBUG=0 deploy whose ALLOWED_HOSTS names only the public host) is answered before Django's host
check and HTTPS redirect (HealthzMiddleware, first in the chain) with the full report rather than
a 301 or a 400. Any other caller goes through the whole chain like a page, so a disallowed Host
is a 400; staff get the full report, the public only the overall status (free disk bytes, job
times and the broker kind tell an outsider how to hurt the site and when it would be noticed).
Behind a proxy the caller is the address the proxy reports (ARENA_TRUSTED_PROXIES), so a public
request relayed by nginx on the same machine is not taken for a local probe.

The broker is checked in a background thread of each web process, and a result is used for at
most FRESH_SECONDS: a request that finds it older starts a new check and waits for it up to
WAIT_SECONDS. A broker that is down made a check take 2-4 s (connection retries), so /healthz
must never wait that long; but it must never say "ok" from a look seconds old either (with three
web processes, a 10 s cache answered "broker=ok" for 10 s after Redis stopped). So a check still
running after the wait reports the last result only when that was an error; a last "ok" that is
no longer fresh reads "unknown" (degraded, 200) until the check finishes. `checked_at`'s age is
in every answer (`broker_checked_seconds_ago`).
"""

import ipaddress
import shutil
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max, Min
from django.http import JsonResponse

from arena.security import CSP
from core import clock
from core.clients import client_ip
from core.models import JobRun
from core.reaper import owner_token

HEARTBEAT_JOB = "heartbeat"
# The heartbeat comes every minute; three missed ones mean no worker is consuming the queue.
WORKER_LATE = timedelta(minutes=3)
# Free space under var/ (the SQLite database, the file cache, the embedded broker): below
# DISK_FULL_BYTES writes fail, below DISK_LOW_BYTES they soon will.
DISK_FULL_BYTES = 100 * 2**20
DISK_LOW_BYTES = 1 * 2**30

# A job counts as late when its last success is older than this (twice its beat period, roughly).
STALE_AFTER = {
    "sync": timedelta(minutes=45),
    "snapshot": timedelta(minutes=30),
    "resolve": timedelta(hours=3),
    "score": timedelta(hours=3),
    "decide": timedelta(hours=1),
    "backfill": timedelta(days=2),
}


def _database_ok() -> bool:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return True
    except Exception:
        return False


def _broker_ok() -> bool:
    from arena.celery import app

    # Socket timeouts of its own: a broker that accepts and never answers would otherwise hold
    # the check (and so every later one) for ever.
    options = {
        **app.conf.broker_transport_options,
        "socket_timeout": 2,
        "socket_connect_timeout": 2,
    }
    try:
        with app.connection_for_write(transport_options=options) as conn:
            conn.ensure_connection(max_retries=0, timeout=2)
        return True
    except Exception:
        return False


def record_heartbeat() -> datetime:
    """A worker is alive: store the wall-clock time. Safe to run twice at once: an UPDATE of
    the heartbeat row; a race on the very first one leaves two rows, both kept current, and
    the report reads the newest."""
    at = clock.wall()
    fields = {"status": JobRun.Status.OK, "started_at": at, "finished_at": at}
    if not JobRun.objects.filter(job=HEARTBEAT_JOB).update(owner=owner_token(), **fields):
        JobRun.objects.create(job=HEARTBEAT_JOB, owner=owner_token(), **fields)
    return at


def _installed_at() -> datetime | None:
    """When this database was first migrated: the age of the install."""
    from django.db.migrations.recorder import MigrationRecorder

    return MigrationRecorder.Migration.objects.aggregate(first=Min("applied"))["first"]


def _worker(last_beat: datetime | None, installed: datetime | None, wall: datetime) -> dict:
    if last_beat is not None:
        late = wall - last_beat > WORKER_LATE
        state = "down" if late else "ok"
    else:
        young = installed is not None and wall - installed <= WORKER_LATE
        state = "starting" if young else "down"
    return {
        "status": state,
        "last_heartbeat": last_beat.isoformat() if last_beat else None,
    }


def _signing_key() -> dict:
    """Whether this process reads the arena's latest signing key: one that does not neither
    signs nor serves checkpoints (cohorts/seals/keys.py), and says why here. Key ids only."""
    from cohorts.seals import keys

    try:
        problem = keys.key_problem()
    except Exception:  # an unreadable key file, an unmigrated table: said, never raised
        return {"status": "error", "why": "the signing key cannot be read"}
    if problem:
        return {"status": "error", "why": problem}
    return {"status": "ok", "key_id": keys.current_id()}


def disk_report() -> dict:
    free = shutil.disk_usage(settings.VAR_DIR).free
    full = getattr(settings, "ARENA_DISK_FULL_BYTES", DISK_FULL_BYTES)
    low = getattr(settings, "ARENA_DISK_LOW_BYTES", DISK_LOW_BYTES)
    state = "full" if free < full else "low" if free < low else "ok"
    return {"status": state, "free_bytes": free}


def health_report(now=None, broker: tuple[bool | None, float | None] | None = None) -> dict:
    """The report; `broker` is a cached (result, age) from CachedCheck, else checked now."""
    now = now or clock.now()
    wall = clock.wall()
    broker_ok, broker_age = broker if broker is not None else (_broker_ok(), 0.0)
    db_ok = _database_ok()
    jobs = {}
    worker = {"status": "unknown", "last_heartbeat": None}
    if db_ok:
        try:
            last_ok = dict(
                JobRun.objects.filter(status=JobRun.Status.OK)
                .values_list("job")
                .annotate(last=Max("finished_at"))
            )
            installed = _installed_at()
        except Exception:  # reachable but not the arena's (unmigrated, wrong DATABASE_URL)
            db_ok = False
    if db_ok:
        for job, stale_after in STALE_AFTER.items():
            last = last_ok.get(job)
            if last is None:
                # Never ran: late only once the install is older than the job's period.
                late = installed is None or wall - installed > stale_after
            else:
                late = now - last > stale_after
            jobs[job] = {"last_success": last.isoformat() if last else None, "late": late}
        worker = _worker(last_ok.get(HEARTBEAT_JOB), installed, wall)
    signing = _signing_key() if db_ok else {"status": "unknown"}
    disk = disk_report()
    down = (
        not db_ok
        or broker_ok is False
        or worker["status"] in ("down", "unknown")
        or disk["status"] == "full"
    )
    late_jobs = any(j["late"] for j in jobs.values())
    degraded = (
        late_jobs or disk["status"] == "low" or broker_ok is None or signing["status"] == "error"
    )
    return {
        "status": "error" if down else "degraded" if degraded else "ok",
        "database": "ok" if db_ok else "error",
        "broker": {True: "ok", False: "error", None: "unknown"}[broker_ok],
        # The broker is checked in the background (a down broker took 2-4 s to say so).
        "broker_checked_seconds_ago": None if broker_age is None else round(broker_age, 1),
        "broker_kind": settings.CELERY_BROKER_URL.split(":", 1)[0],
        "worker": worker,
        "disk": disk,
        "signing_key": signing,
        "jobs": jobs,
        "time": now.isoformat(),
    }


FRESH_SECONDS = 2.0
WAIT_SECONDS = 0.5


class CachedCheck:
    """The last result of a slow check in this process, and the one thread that refreshes it."""

    def __init__(self, check):
        self.check = check
        self.lock = threading.Lock()
        self.result: bool | None = None
        self.checked = 0.0  # time.monotonic() of the last finished check
        self.thread: threading.Thread | None = None

    def _refresh(self) -> None:
        try:
            result = bool(self.check())
        except Exception:  # a check must never take the thread down silently
            result = False
        with self.lock:
            self.result, self.checked = result, time.monotonic()

    def get(self) -> tuple[bool | None, float | None]:
        """(result or None before the first one, its age in seconds)."""
        with self.lock:
            stale = time.monotonic() - self.checked > FRESH_SECONDS
            if stale and (self.thread is None or not self.thread.is_alive()):
                self.thread = threading.Thread(target=self._refresh, daemon=True, name="healthz")
                self.thread.start()
            thread = self.thread
        if thread is not None and thread.is_alive():
            thread.join(WAIT_SECONDS)
        with self.lock:
            if self.result is None:
                return None, None
            age = time.monotonic() - self.checked
            if self.result and age > FRESH_SECONDS + WAIT_SECONDS:
                return None, age  # an "ok" this old is not known to be true any more
            return self.result, age


broker_check = CachedCheck(lambda: _broker_ok())


def is_local(request) -> bool:
    """A caller on this machine, as the proxy (if any) reports it."""
    ip = client_ip(request)
    if ip is None:
        return False
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def healthz(request, full: bool | None = None):
    """The report: whole for a local probe and staff, the overall status for anyone else."""
    report = health_report(broker=broker_check.get())
    if full is None:
        user = getattr(request, "user", None)
        full = is_local(request) or bool(user is not None and user.is_staff)
    status = report["status"]
    if not full:
        report = {"status": status}
    # "unknown" (a fresh process whose first broker check is still running) is not a failure.
    response = JsonResponse(report, status=503 if status == "error" else 200)
    response["Cache-Control"] = "no-store"
    response["Content-Security-Policy"] = CSP
    return response


class HealthzMiddleware:
    """Answers a local probe's GET /healthz ahead of every other middleware: no host check, no
    HTTPS redirect (a probe on the machine speaks plain HTTP to 127.0.0.1), no session or
    cache. Anyone else's goes down the chain to the same view, which asks who is calling."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (
            request.path_info == "/healthz"
            and request.method in ("GET", "HEAD")
            and is_local(request)
        ):
            return healthz(request, full=True)
        return self.get_response(request)
