"""/healthz gives one overall status, knows whether a worker is alive (a heartbeat), reports
the disk, does not call a fresh install late, answers 503 when the arena cannot run, and is
reachable by a local probe on a DEBUG=0 deploy (no HTTPS redirect, no host check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db.migrations.recorder import MigrationRecorder

from arena import health
from arena.tasks import heartbeat
from core import clock
from core.models import JobRun

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def broker_known_ok(monkeypatch):
    # A fresh cached check per test, its first answer in before the test's requests: on a
    # loaded machine the in-memory broker's first check outlasted the request's short wait,
    # and the page said "degraded" (broker unknown) where the test asks about the worker.
    check = health.CachedCheck(health._broker_ok)
    check.get()
    if check.thread is not None:
        check.thread.join()
    monkeypatch.setattr(health, "broker_check", check)


def _age_install(by: timedelta) -> None:
    MigrationRecorder.Migration.objects.update(applied=clock.wall() - by)


def _all_jobs_ran_just_now() -> None:
    now = clock.now()
    for job in health.STALE_AFTER:
        JobRun.objects.create(job=job, status="ok", started_at=now, finished_at=now)


def test_a_fresh_install_is_starting_not_late_nor_down(client):
    _age_install(timedelta(minutes=1))
    response = client.get("/healthz")
    data = response.json()
    assert response.status_code == 200
    assert data["worker"] == {"status": "starting", "last_heartbeat": None}
    assert not any(job["late"] for job in data["jobs"].values())
    assert data["status"] in ("ok", "degraded")  # degraded only if the disk here is low


def test_a_worker_that_beats_is_ok_and_one_that_stopped_is_503(client, settings):
    settings.ARENA_DISK_LOW_BYTES = 0  # this machine's disk is not what is tested here
    _age_install(timedelta(days=10))
    _all_jobs_ran_just_now()
    heartbeat.apply()  # the real task, as a worker runs it
    heartbeat.apply()  # again: still one heartbeat row
    assert JobRun.objects.filter(job=health.HEARTBEAT_JOB).count() == 1

    response = client.get("/healthz")
    assert response.status_code == 200
    data = response.json()
    assert (data["status"], data["worker"]["status"]) == ("ok", "ok")

    JobRun.objects.filter(job=health.HEARTBEAT_JOB).update(
        finished_at=clock.wall() - health.WORKER_LATE - timedelta(seconds=1)
    )
    response = client.get("/healthz")
    assert response.status_code == 503
    data = response.json()
    assert (data["status"], data["worker"]["status"]) == ("error", "down")


def test_no_heartbeat_on_an_old_install_is_a_dead_worker(client):
    _age_install(timedelta(hours=1))
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["worker"]["status"] == "down"


def test_jobs_that_never_ran_are_late_once_the_install_is_older_than_their_period(client):
    _age_install(timedelta(hours=2))
    jobs = client.get("/healthz").json()["jobs"]
    assert jobs["sync"]["late"] and jobs["snapshot"]["late"] and jobs["decide"]["late"]
    assert not jobs["resolve"]["late"] and not jobs["backfill"]["late"]  # 3 h and 2 days


def test_a_full_disk_is_reported_and_is_503_a_low_one_degraded(client, settings):
    _age_install(timedelta(days=10))
    _all_jobs_ran_just_now()
    heartbeat.apply()
    settings.ARENA_DISK_FULL_BYTES = 2**62  # more than any disk has free: "full"
    response = client.get("/healthz")
    data = response.json()
    assert response.status_code == 503
    assert data["disk"]["status"] == "full" and data["status"] == "error"
    assert data["disk"]["free_bytes"] > 0

    settings.ARENA_DISK_FULL_BYTES, settings.ARENA_DISK_LOW_BYTES = 0, 2**62
    response = client.get("/healthz")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["disk"]["status"]) == ("degraded", "low")


PROBE = """
import json, django
django.setup()
from django.test import Client
c = Client()
probe = c.get("/healthz", HTTP_HOST="127.0.0.1:8000")
public = c.get("/methodology/", HTTP_HOST="arena.example.org")
print(json.dumps([probe.status_code, probe["Content-Type"], public.status_code,
                  public.get("Location", "")]))
"""


@pytest.mark.own_sqlite
def test_a_local_probe_reaches_healthz_on_a_production_deploy(tmp_path):
    env = dict(os.environ, DEBUG="0", SECRET_KEY="x" * 50, ALLOWED_HOSTS="arena.example.org",
               ARENA_VAR_DIR=str(tmp_path), DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               DJANGO_SETTINGS_MODULE="arena.settings")  # fmt: skip
    env.pop("SECURE_SSL_REDIRECT", None)
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                            text=True, timeout=120, cwd=health.settings.BASE_DIR)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    probe_status, content_type, public_status, location = json.loads(result.stdout.splitlines()[-1])
    # The probe gets the report (503 here: an unmigrated database, no worker), not 301 or 400...
    assert probe_status in (200, 503) and content_type == "application/json"
    # ...while the site itself still redirects plain HTTP to HTTPS.
    assert public_status == 301 and location.startswith("https://arena.example.org/")
