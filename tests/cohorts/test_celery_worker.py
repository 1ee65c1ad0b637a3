"""A real Celery worker process, fed through a real Redis broker, writes snapshots into the
test database.

PostgreSQL only: the worker is a separate process, so it must see the same database as the
test, which pytest-django's in-memory SQLite test database cannot offer.
"""

import os
import subprocess
import sys
import time
import uuid
from decimal import Decimal

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection
from django.utils import timezone

from cohorts.models import Snapshot
from cohorts.services import BetOrder, execute_orders, week_start_for
from core.models import JobRun
from tests.factories import make_cohort_with_entries, make_market

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_worker_runs_the_snapshot_task(tmp_path):
    _, entries = make_cohort_with_entries(2, week_start=week_start_for(timezone.now()))
    execute_orders(entries[0], [BetOrder(make_market().pk, "Yes", Decimal("60"))], [], None)

    db = connection.settings_dict  # NAME is the test database (test_...) by now
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        CELERY_BROKER_URL=os.environ["REDIS_URL"],
        ARENA_VAR_DIR=str(tmp_path),
    )
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    # A queue of our own, so no other worker on this Redis can take the message.
    queue = f"test-{uuid.uuid4().hex}"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "arena", "worker", "--pool", "solo", "-Q", queue,
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"],
        cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        producer = Celery(broker=os.environ["REDIS_URL"], set_as_current=False)
        producer.send_task("cohorts.tasks.snapshot", queue=queue)
        deadline = time.monotonic() + 90
        # The job's record is finished last, after the snapshot rows are committed.
        while not JobRun.objects.filter(job="snapshot").exclude(status="running").exists():
            assert time.monotonic() < deadline, "the snapshot job did not finish within 90 s"
            try:
                worker.wait(timeout=0.25)  # doubles as the poll interval; returns if it died
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"worker exited with {worker.returncode}:\n{worker.stdout.read()[-3000:]}")
        snap = Snapshot.objects.get(entry=entries[0])
        assert snap.cash == Decimal("9940.00") and snap.positions_value == Decimal("60.00")
        run = JobRun.objects.get(job="snapshot")
        assert run.status == "ok" and run.summary["snapshots"] == 2
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
