"""/healthz: can we reach the database and the broker, and when did each periodic job last succeed?

Redacted on purpose: no hostnames, credentials or error text from drivers, only states and times.
"""

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max
from django.http import JsonResponse
from django.utils import timezone

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

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        return False


def health_report(now=None) -> dict:
    now = now or timezone.now()
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
        "broker": "ok" if _broker_ok() else "error",
        "broker_kind": settings.CELERY_BROKER_URL.split(":", 1)[0],
        "jobs": jobs,
        "time": now.isoformat(),
    }


def healthz(request):
    report = health_report()
    healthy = report["database"] == "ok" and report["broker"] == "ok"
    response = JsonResponse(report, status=200 if healthy else 503)
    response["Cache-Control"] = "no-store"
    return response
