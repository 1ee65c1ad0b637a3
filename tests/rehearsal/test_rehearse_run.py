"""CI's rehearsal: `arena rehearse --weeks 2 --faults` end to end on PostgreSQL + Redis, as real
processes (gunicorn, a Celery worker, beat, a private redis-server, the stand-ins), every check
passing: decisions exactly once, weeks sealed, verify and --published, the doctor, fresh prices,
the leaderboard recomputed from the exports, every model request on the record (the killed
worker's call as lost), no 5xx, /healthz reporting the broker's outage; the outside agent
deciding every week it is entered in through the agent API, signed, sealed and scored; and a
catalog change the lineup review proposed, approved by staff through the admin: the next cohort
runs the new release, the running one keeps its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import connection

from agents.models import LineupProposal
from cohorts.models import Cohort, Decision, Entry
from markets.models import Market, ResolutionChange

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

ROOT = Path(__file__).resolve().parents[2]
WALL_LIMIT = 900  # seconds: two arena weeks take about four minutes, startup and checks two more


@pytest.mark.timeout(WALL_LIMIT + 60)
def test_two_weeks_with_faults_pass_every_check(tmp_path):
    db = connection.settings_dict  # the test database by now
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        CELERY_BROKER_URL=os.environ["REDIS_URL"],  # Redis: the rehearsal runs a private one
        ARENA_VAR_DIR=str(tmp_path),
        PYTHONUNBUFFERED="1",
    )
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "arena", "rehearse", "--weeks", "2", "--faults",
         "--competitors", "6", "--models", "3", "--markets", "40", "--json", str(report)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=WALL_LIMIT,
    )  # fmt: skip
    output = done.stdout + done.stderr
    # The rehearsal's pg-kill fault terminated every other backend of this database, this
    # test's connection among them: open a new one.
    connection.close()
    assert report.exists(), output[-4000:]
    doc = json.loads(report.read_text())
    failed = [f"{c['name']}: {c['detail']}" for c in doc["checks"] if not c["ok"]]
    assert not failed, "\n".join(failed) + "\n" + output[-3000:]
    assert done.returncode == 0, output[-3000:]

    names = {c["name"] for c in doc["checks"]}
    assert {"decisions", "model calls on record", "sealed", "verify", "verify --published", "doctor", "fresh prices",
            "leaderboard = exports", "web 5xx", "healthz", "lineup change"} <= names  # fmt: skip
    faults = {f["name"]: f for f in doc["faults"]}
    assert all(f["injected"] for f in faults.values()), faults  # PostgreSQL + Redis: all of them
    # The worker killed mid-call: every request the models saw is a call record, its own lost.
    calls = next(c for c in doc["checks"] if c["name"] == "model calls on record")
    assert " 0 lost" not in calls["detail"] and "0 decision take-over" not in calls["detail"]
    assert doc["decisions"] >= 2 * 6  # two weeks of six entries at least
    # The outside agent (the reference agent, its own process) decided each week it was
    # entered in by its own signed, verified submission: cohort 1's weeks 1 and 2, cohort 2's
    # week 1; each sealed, on its pages and scored (the check's detail says which failed).
    outside = next(c for c in doc["checks"] if c["name"] == "outside agent")
    assert outside["detail"].startswith("3 week(s) decided by its own signed submission"), outside
    assert ", scored;" in outside["detail"]
    agent = doc["outside_agent"]
    assert agent["token_prefix"] and len(agent["minutes_after_freeze"]) == 3, agent
    assert all(0 <= m < agent["window_minutes"] for m in agent["minutes_after_freeze"]), agent
    assert not re.search(r"arena_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}", output)  # nor its token
    # /healthz said so while the broker was down, and the staff's two corrections went through.
    assert any("503 error broker=error" in span["state"] for span in doc["health_timeline"])
    applied = [c["action"] for c in doc["corrections"] if c["applied"]]
    assert applied == ["resolve_to_outcome", "void_markets"], doc["corrections"]
    assert ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN).count() == 2
    # The stand-in's catalog repriced a model: the review on the workers proposed a new release,
    # staff approved it on the attention page in the first week, and only the cohort opened
    # after it runs the new release.
    lineup = doc["lineup"]
    assert lineup["approved"] and "success: Approved: release" in lineup["said"], lineup
    approved = LineupProposal.objects.get(status=LineupProposal.Status.APPROVED)
    assert (approved.kind, approved.competitor_id, approved.decided_by) == (
        LineupProposal.Kind.CHANGED, lineup["competitor"], "rehearsal-staff",
    )  # fmt: skip
    first, second = Cohort.objects.order_by("week_start")[:2]
    mine = Entry.objects.filter(competitor_id=lineup["competitor"])
    old, new = mine.get(cohort=first).release, mine.get(cohort=second).release
    assert (old.price_in_per_m, old.price_out_per_m) == (Decimal(0), Decimal(0))
    assert (new.number, new.price_in_per_m, new.price_out_per_m) == (
        old.number + 1, Decimal("1.25"), Decimal("10"),
    )  # fmt: skip
    called = Decision.objects.filter(entry__competitor_id=lineup["competitor"])
    assert set(called.filter(entry__cohort=first).values_list("week", "release_id")) == {
        (1, old.pk), (2, old.pk),
    }  # fmt: skip
    assert set(called.filter(entry__cohort=second).values_list("release_id", flat=True)) == {new.pk}
    others = Entry.objects.exclude(competitor_id=lineup["competitor"])
    assert {e.competitor_id: e.release_id for e in others.filter(cohort=first)} == {
        e.competitor_id: e.release_id for e in others.filter(cohort=second)
    }
    # Everything it made is the rehearsal's own.
    assert set(Cohort.objects.values_list("kind", flat=True)) == {Cohort.Kind.REHEARSAL}
    assert set(Market.objects.values_list("source", flat=True)) == {Market.Source.REHEARSAL}
    assert "rehearsal PASSED" in done.stdout
