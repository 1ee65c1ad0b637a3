"""/healthz: can we reach the database and the broker, and when did each periodic job last succeed?

Redacted on purpose: no hostnames, credentials or error text from drivers, only states and times.

Answered from cached checks: the checks run in a background thread of each web process, at most
once per FRESH_SECONDS, and a request waits for a running check at most WAIT_SECONDS. A broker
that is down made every check take 2-4 s (connection retries), so /healthz timed out under load
exactly when it mattered; now it answers at once with the last result and its age (`checked_at`),
"unknown" only before the first check of a fresh process has finished.
"""

import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max
from django.http import JsonResponse

from core import clock
from core.models import JobRun

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


def health_report(now=None, broker: tuple[bool | None, float | None] | None = None) -> dict:
    """The report; `broker` is a cached (result, age) from CachedCheck, else checked now."""
    now = now or clock.now()
    broker_ok, broker_age = broker if broker is not None else (_broker_ok(), 0.0)
    db_ok = _database_ok()
    jobs = {}
    if db_ok:
        last_ok = dict(
            JobRun.objects.filter(status=JobRun.Status.OK)
            .values_list("job")
            .annotate(last=Max("finished_at"))
        )
        for job, stale_after in STALE_AFTER.items():
            last = last_ok.get(job)
            jobs[job] = {
                "last_success": last.isoformat() if last else None,
                "late": last is None or now - last > stale_after,
            }
    return {
        "database": "ok" if db_ok else "error",
        "broker": {True: "ok", False: "error", None: "unknown"}[broker_ok],
        # The broker is checked in the background (a down broker took 2-4 s to say so).
        "broker_checked_seconds_ago": None if broker_age is None else round(broker_age, 1),
        "broker_kind": settings.CELERY_BROKER_URL.split(":", 1)[0],
        "jobs": jobs,
        "time": now.isoformat(),
    }


FRESH_SECONDS = 10.0
WAIT_SECONDS = 0.1


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
            return self.result, time.monotonic() - self.checked


broker_check = CachedCheck(lambda: _broker_ok())


def healthz(request):
    report = health_report(broker=broker_check.get())
    # "unknown" (a fresh process whose first broker check is still running) is not a failure.
    healthy = report["database"] == "ok" and report["broker"] != "error"
    response = JsonResponse(report, status=200 if healthy else 503)
    response["Cache-Control"] = "no-store"
    return response
