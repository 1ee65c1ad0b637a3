"""DEBUG can only be on for loopback, and its pages never show a secret.

Before: with DEBUG on (what `arena up` gives), a foreign Host header or an export bug showed
Django's debug page with DATABASE_URL, password included, to whoever asked.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

SECRET = "hunter2-db-password"


@pytest.fixture
def debug_on(settings):
    settings.DEBUG = True
    settings.DATABASE_URL = f"postgres://arena:{SECRET}@db.internal:5432/arena"
    settings.REDIS_CACHE_URL = f"redis://:{SECRET}@cache.internal:6379/1"
    settings.CELERY_BROKER_URL = f"redis://:{SECRET}@cache.internal:6379/0"
    # The cache's LOCATION repeats the URL (the bench run found it shown on the debug page).
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"redis://:{SECRET}@cache.internal:6379/1",
        }
    }
    return settings


def test_debug_refuses_non_loopback_hosts_at_startup():
    env = dict(os.environ, DEBUG="1", ALLOWED_HOSTS="arena.example.org,127.0.0.1")
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "DJANGO_SETTINGS_MODULE": "arena.settings"},
        capture_output=True, text=True, cwd=django_settings.BASE_DIR, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "DEBUG is on only for loopback hosts" in result.stderr
    assert "arena.example.org" in result.stderr


def test_debug_answers_only_loopback_clients(client, db, debug_on):
    assert client.get("/methodology/", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/methodology/", REMOTE_ADDR="::1").status_code == 200
    refused = client.get("/methodology/", REMOTE_ADDR="203.0.113.7")
    assert refused.status_code == 403
    assert b"DEBUG" in refused.content and SECRET.encode() not in refused.content


def test_a_foreign_host_header_shows_no_secret(client, db, debug_on):
    response = client.get("/", HTTP_HOST="evil.example", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 400  # DisallowedHost, rendered by the debug page
    body = response.content.decode()
    assert "DisallowedHost" in body  # it is the debug page ...
    assert SECRET not in body  # ... without the credentials in the connection URLs


def test_a_crash_page_shows_no_secret_and_no_process_environment(rf, debug_on, monkeypatch):
    from django.views.debug import technical_500_response

    monkeypatch.setenv("SOME_TOKEN_IN_THE_ENV", SECRET)
    request = rf.get("/exports/trades.csv", REMOTE_ADDR="127.0.0.1")
    request.META["SOME_TOKEN_IN_THE_ENV"] = SECRET  # runserver copies os.environ into META
    try:
        raise OverflowError("date value out of range")
    except OverflowError:
        response = technical_500_response(request, *sys.exc_info())
    body = response.content.decode()
    assert "OverflowError" in body
    assert SECRET not in body
