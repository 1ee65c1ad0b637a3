"""`arena verify` on both cores (cohorts/seals/workers.py): the cohorts and logs checked in forked
workers give the very report one process gives, on an intact demo and on an edited one."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from cohorts.models import Decision
from cohorts.seals import workers as seal_workers
from cohorts.seals.verify import export_chunks, verify_database, verify_export
from cohorts.seals.workers import workers_for
from scoring.models import LeaderboardRow


@pytest.fixture(autouse=True)
def _small_is_enough(monkeypatch):
    monkeypatch.setattr(seal_workers, "MIN_RECORDS", 0)  # the demo is small: fork anyway


def _both(settings, check):
    settings.ARENA_VERIFY_WORKERS = 1
    one = check()
    settings.ARENA_VERIFY_WORKERS = 2
    two = check()
    return one, two


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_database_verify_in_workers_is_the_one_process_verify(small_demo, settings):
    settings.ARENA_VERIFY_WORKERS = 2
    assert workers_for(3) == 2  # outside a transaction, on a shared database: forked
    one, two = _both(settings, verify_database)
    assert one.ok and two.ok and one.summary() == two.summary() and one.notes == two.notes
    decision = Decision.objects.filter(status="done").order_by("-pk").first()
    row = LeaderboardRow.objects.order_by("pk").first()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE agents_decision SET reasoning = 'x' WHERE id = %s", [decision.pk])
        cursor.execute("UPDATE scoring_leaderboardrow SET rank = 99 WHERE id = %s", [row.pk])
    one, two = _both(settings, verify_database)
    assert one.problems == two.problems and len(two.problems) == 2, two.problems
    assert f"decision {decision.pk}" in two.problems[0] and "reasoning" in two.problems[0]
    assert f"leaderboard row {row.pk} was edited" in two.problems[1]


@pytest.mark.django_db
def test_the_export_verify_in_workers_is_the_one_process_verify(small_demo, settings):
    doc = json.loads("".join(export_chunks(kind="demo")))
    settings.ARENA_VERIFY_WORKERS = 2
    assert workers_for(len(doc["cohorts"]), database=False) == 2
    assert workers_for(3) == 1  # inside the test's transaction the database is not shared
    one, two = _both(settings, lambda: verify_export(doc))
    assert one.ok and two.ok and one.summary() == two.summary()
    doc["cohorts"][-1]["weeks"][0]["digests"][0]["record"]["decision"]["reasoning"] = "x"
    one, two = _both(settings, lambda: verify_export(doc))
    assert one.problems == two.problems and "does not match its sealed hash" in two.problems[0]


def test_too_little_work_is_checked_in_one_process(settings, monkeypatch):
    settings.ARENA_VERIFY_WORKERS = 2
    monkeypatch.setattr(seal_workers, "MIN_RECORDS", 600)
    assert workers_for(3, database=False, records=599) == 1
    assert workers_for(3, database=False, records=600) == 2
    assert workers_for(1, database=False, records=10_000) == 1  # one part: nothing to share
