"""Fault: `arena score` is killed (SIGKILL) in the middle of a run.

Before: its ScoreRun said "running" for ever. The real command runs as a subprocess on the
test database; it is held mid-run by a table lock this test takes (so it is killed at a known
point), then killed. Proves: the next run marks the dead one failed with the reason, and scores.
"""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from scoring.models import ScoreRun
from scoring.services import compute_scores
from tests.factories import make_cohort_with_entries
from tests.faults.conftest import Proc, child_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_killed_score_run_is_reaped_by_the_next_one(tmp_path):
    make_cohort_with_entries(2)
    db = connection.settings_dict
    blocker = psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"],
                              password=db.get("PASSWORD") or None, dbname=db["NAME"])  # fmt: skip
    blocker.execute("LOCK TABLE scoring_tradeclv, scoring_leaderboardrow IN ACCESS EXCLUSIVE MODE")
    env = child_env(tmp_path, "memory://")
    arena = str(Path(sys.executable).parent / "arena")
    proc = Proc("score", [arena, "score", "--scope", "live"], env, tmp_path)
    try:
        run = wait_until(
            lambda: ScoreRun.objects.filter(status=ScoreRun.Status.RUNNING).first(),
            60, "the score run to start", procs=(proc,),
        )  # fmt: skip
        proc.kill()  # SIGKILL mid-run: no handler, no cleanup
    finally:
        blocker.rollback()
        blocker.close()
        proc.stop()
    assert ScoreRun.objects.get(pk=run.pk).status == ScoreRun.Status.RUNNING  # as it was left

    fresh = compute_scores("live")

    dead = ScoreRun.objects.get(pk=run.pk)
    assert dead.status == ScoreRun.Status.FAILED and dead.finished_at is not None
    assert dead.error.startswith("abandoned: its process") and "is gone" in dead.error
    assert fresh.status == ScoreRun.Status.DONE
