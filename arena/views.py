from django.db import connection
from django.http import HttpResponse, JsonResponse


def home(request):
    return HttpResponse("<!doctype html><title>Forecasting Arena</title><h1>Forecasting Arena</h1>")


def healthz(request):
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        db = "ok"
    except Exception:  # pragma: no cover - reported, not raised
        db = "error"
    return JsonResponse({"database": db}, status=200 if db == "ok" else 503)
