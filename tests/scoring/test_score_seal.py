"""Score runs in the seal: every finished run is a `score_run` record in its scope's event log,
with the digest of what it read and of the rows it published; `arena verify` names the run and
the leaderboard row edited afterwards (SQL or ORM), and lets pruning remove old runs."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from cohorts.decisions.run import decide
from cohorts.seals.canonical import canonical, sha256_hex
from cohorts.seals.models import Checkpoint, EventLogEntry
from cohorts.seals.verify import verify_database
from core.methodology import METHODOLOGY_HASH, METHODOLOGY_VERSION
from scoring.load import load_scope
from scoring.models import LeaderboardRow, ScoreRun
from scoring.services import compute_scores, prune_runs
from scoring.services_seal import inputs_digest
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "market")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    return compute_scores("live")


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _problem() -> str:
    report = verify_database()
    assert report.problems, "verify passed but should have failed"
    return report.problems[0]


def _record(run: ScoreRun) -> dict:
    return json.loads(EventLogEntry.objects.get(kind="score_run", ref=run.pk).record_bytes())


def test_a_finished_run_is_logged_with_its_inputs_and_published_rows(run):
    entry = EventLogEntry.objects.get(kind="score_run", ref=run.pk)
    assert entry.scope == "live" and entry.seq == EventLogEntry.objects.filter(scope="live").count()
    # The new head is signed in the run's transaction.
    assert Checkpoint.objects.filter(scope="live", size=entry.seq, head=entry.link).exists()
    record = _record(run)
    assert record["type"] == "score_run" and record["run"] == run.pk and record["scope"] == "live"
    assert record["methodology"] == {"version": METHODOLOGY_VERSION, "hash": METHODOLOGY_HASH}
    assert record["as_of"].endswith("Z") and record["finished_at"].endswith("Z")
    # The inputs are every forecast row the run read (one per outcome stated, so at least as
    # many as the questions it scored): loading the scope again at its as_of gives the same.
    assert record["inputs"] == inputs_digest(load_scope("live", run.as_of))
    assert record["inputs"]["forecasts"] >= run.n_forecasts > 0
    assert record["inputs"]["markets"] > 0 and len(record["inputs"]["digest"]) == 64
    rows = list(LeaderboardRow.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))
    published = record["published"]
    assert published["rows"] == len(rows) > 0
    # Keyed by row id as text, in the record's canonical (sorted-key) order: "100" before "99".
    assert sorted(published["row_hashes"], key=int) == [str(pk) for pk in rows]
    assert verify_database().ok


def test_the_inputs_digest_is_the_documented_canonical_bytes(run):
    from scoring.load import load_scope

    data = load_scope("live", run.as_of)
    f = data.forecasts
    forecasts = [
        [int(d), int(e), int(m), o, float(p)]
        for d, e, m, o, p in zip(f["decision"], f["entry"], f["market"], f["outcome"], f["p"])
    ]
    markets = [
        [pk, m.status, m.resolved_outcome if m.status == "resolved" else None]
        for pk, m in sorted(data.markets.items())
    ]
    body = canonical({"forecasts": forecasts, "markets": markets})
    assert _record(run)["inputs"]["digest"] == sha256_hex(body)


@pytest.mark.parametrize("how", ["sql", "orm"])
def test_a_leaderboard_row_edited_afterwards_is_named(run, how):
    row = LeaderboardRow.objects.filter(run=run).order_by("pk")[1]
    if how == "sql":
        _sql(
            "UPDATE scoring_leaderboardrow SET n_forecasts = n_forecasts + 1 WHERE id = %s",
            [row.pk],
        )
    else:
        LeaderboardRow.objects.filter(pk=row.pk).update(brier=0.01)
    problem = _problem()
    assert f"score run {run.pk}: leaderboard row {row.pk} was edited" in problem, problem


def test_a_row_deleted_or_run_details_edited_are_named(run):
    row = LeaderboardRow.objects.filter(run=run).order_by("-pk").first()
    _sql("DELETE FROM scoring_leaderboardrow WHERE id = %s", [row.pk])
    assert f"score run {run.pk}: leaderboard row {row.pk} was deleted" in _problem()


def test_a_run_row_edited_afterwards_is_named(run):
    details = dict(run.details, headline_rule="something else")
    ScoreRun.objects.filter(pk=run.pk).update(details=details)
    assert f"score run {run.pk}: the run row" in _problem()


def test_pruned_runs_verify_and_a_deleted_latest_run_does_not(run):
    second = compute_scores("live")
    assert prune_runs(keep=1) == 1 and not ScoreRun.objects.filter(pk=run.pk).exists()
    assert verify_database().ok
    _sql("DELETE FROM scoring_leaderboardrow WHERE run_id = %s", [second.pk])
    _sql("DELETE FROM scoring_boardslice WHERE run_id = %s", [second.pk])
    _sql("DELETE FROM scoring_scorerun WHERE id = %s", [second.pk])
    # Nothing later stands in for them now: the first logged run that is gone is named.
    problem = _problem()
    assert f"score_run {run.pk} " in problem and "the row is missing" in problem, problem


def test_arena_verify_fails_naming_the_row(run):
    out = StringIO()
    call_command("arena", "verify", stdout=out, stderr=StringIO())
    assert out.getvalue().startswith("ok: ")
    row = LeaderboardRow.objects.filter(run=run).order_by("pk").first()
    _sql("UPDATE scoring_leaderboardrow SET rank = 99 WHERE id = %s", [row.pk])
    with pytest.raises(CommandError, match=f"leaderboard row {row.pk} was edited"):
        call_command("arena", "verify", stdout=StringIO(), stderr=StringIO())
