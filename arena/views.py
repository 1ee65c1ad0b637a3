"""Site-wide plain views. The public pages live in arena/pages.py, the JSON API in arena/api.py."""

from django.db import connection
from django.http import JsonResponse

from arena.pages import home  # noqa: F401  (kept importable as arena.views.home)


def healthz(request):
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        db = "ok"
    except Exception:  # pragma: no cover - reported, not raised
        db = "error"
    return JsonResponse({"database": db}, status=200 if db == "ok" else 503)
