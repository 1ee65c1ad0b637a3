"""GET /api/leaderboard: the published row shape, scopes, errors, empty state; the score task and CLI."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command

from arena.celery import app as celery_app
from cohorts.models import Cohort
from core.methodology import METHODOLOGY_HASH
from core.models import JobRun
from markets.models import Market
from scoring import services
from scoring.models import ScoreRun
from scoring.services import compute_scores
from scoring.tasks import RESCORE_KEY, ScoringFailed, request_rescore, score
from tests.factories import make_cohort_with_entries, make_competitor, make_market
from tests.scoring.conftest import WEEK_START, add_forecasts, make_decision

pytestmark = pytest.mark.django_db

AT = WEEK_START + timedelta(hours=1)
CONTRACT_KEYS = {
    "competitor", "n_forecasts", "n_resolved", "brier", "brier_ci", "log_score",
    "brier_skill_vs_market", "return_pct", "return_ci", "pnl", "win_rate", "provisional",
}  # fmt: skip


def _cohort(kind=Cohort.Kind.LIVE, slugs=("ann", "ben"), week_start=WEEK_START):
    competitors = [make_competitor(s) for s in slugs]
    cohort, entries = make_cohort_with_entries(
        week_start=week_start, kind=kind, competitors=competitors, at=week_start
    )
    market = make_market(status=Market.Status.RESOLVED, resolved_outcome="Yes", resolved_at=AT)
    for i, entry in enumerate(entries):
        if entry.competitor.slug == "idle":
            continue  # entered, never forecast
        add_forecasts(make_decision(entry, at=AT), [(market, "Yes", 0.6 + 0.1 * i, 0.5)])
    return cohort


def _get(client, **params):
    response = client.get("/api/leaderboard", params)
    return response, json.loads(response.content)


def test_empty_state_before_any_run(client):
    response, body = _get(client)
    assert response.status_code == 200
    assert body["rows"] == [] and body["as_of"] is None and body["note"] == "no score run yet"
    assert body["methodology_hash"] == METHODOLOGY_HASH and body["scope"] == "live"
    assert "max-age" in response["Cache-Control"]


def test_contract_shape_with_json_numbers(client):
    cohort = _cohort()
    run = compute_scores("live", as_of=AT + timedelta(days=1))
    response, body = _get(client)
    assert response.status_code == 200
    assert body["as_of"] == run.as_of.isoformat()
    assert body["methodology_hash"] == run.methodology_hash == METHODOLOGY_HASH
    assert [r["competitor"] for r in body["rows"]] == ["ben", "ann"]  # ben's 0.7 beats ann's 0.6
    for row in body["rows"]:
        assert set(row) >= CONTRACT_KEYS
        assert isinstance(row["pnl"], float) and isinstance(row["brier"], float)
        assert len(row["brier_ci"]) == 2 and len(row["return_ci"]) == 2
    assert body["rows"][0]["brier"] == pytest.approx((0.7 - 1) ** 2)
    # Each row says which methodology scored it and which its cohorts started under.
    assert body["methodology_version"] == "5"
    for row in body["rows"]:
        assert row["methodology_version"] == "5"
        assert row["cohort_methodology_versions"] == [cohort.methodology_version] == ["5"]
        assert "bss_vs_base_rate" in row
    _, by_cohort = _get(client, cohort=cohort.pk)
    assert by_cohort["cohort"]["id"] == cohort.pk
    assert [r["competitor"] for r in by_cohort["rows"]] == ["ben", "ann"]
    assert by_cohort["edge"]["dm"] is not None


def test_replay_cohort_is_served_from_its_own_scope(client):
    _cohort()
    replay = _cohort(kind=Cohort.Kind.REPLAY, slugs=("rep",))
    compute_scores("live", as_of=AT + timedelta(days=1))
    compute_scores("replay", as_of=AT + timedelta(days=1))
    _, body = _get(client, cohort=replay.pk)
    assert body["scope"] == "replay" and body["cohort"]["kind"] == "replay"
    assert [r["competitor"] for r in body["rows"]] == ["rep"]
    _, live = _get(client)
    assert "rep" not in {r["competitor"] for r in live["rows"]}
    _, replay_all = _get(client, scope="replay")
    assert [r["competitor"] for r in replay_all["rows"]] == ["rep"]


@pytest.mark.parametrize(
    ("params", "status"),
    [({"cohort": "abc"}, 400), ({"cohort": "999999"}, 404), ({"scope": "x"}, 400)],
)
def test_bad_requests(client, params, status):
    response, body = _get(client, **params)
    assert response.status_code == status and "error" in body


def test_failed_run_is_not_served(client):
    _cohort()
    good = compute_scores("live", as_of=AT + timedelta(days=1))
    ScoreRun.objects.create(
        scope="live", status=ScoreRun.Status.FAILED, as_of=AT + timedelta(days=2),
        started_at=AT + timedelta(days=2), finished_at=AT + timedelta(days=3),
        methodology_version="1", methodology_hash="x", engine_version="1",
    )  # fmt: skip
    _, body = _get(client)
    assert body["run_id"] == good.pk


def test_score_task_scores_every_scope_with_cohorts():
    _cohort()
    _cohort(kind=Cohort.Kind.DEMO, slugs=("dem",))
    result = score.apply().get()
    assert set(result) == {"live", "demo"}
    assert ScoreRun.objects.filter(status=ScoreRun.Status.DONE).count() == 2
    assert JobRun.objects.get(job="score").status == JobRun.Status.OK


def test_request_rescore_enqueues_once_after_commit(django_capture_on_commit_callbacks):
    _cohort()
    cache.delete(RESCORE_KEY)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        request_rescore()
        request_rescore()  # e.g. a second market settled in the same resolve pass
    assert len(callbacks) == 2 and not ScoreRun.objects.exists()  # nothing before the commit
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True  # run the enqueued task in-process
    try:
        for callback in callbacks:
            callback()
    finally:
        celery_app.conf.task_always_eager = eager
        cache.delete(RESCORE_KEY)
    assert ScoreRun.objects.filter(scope="live", status=ScoreRun.Status.DONE).count() == 1


def test_cli_score_prints_table():
    _cohort()
    out = StringIO()
    call_command("arena", "score", stdout=out)
    text = out.getvalue()
    assert "live: run" in text and "ann" in text and "ben" in text


def test_one_failing_scope_does_not_stop_the_others(monkeypatch):
    _cohort()
    _cohort(kind=Cohort.Kind.DEMO, slugs=("dem",))
    real = services.build_items

    def broken_for_demo(data):
        if data.scope == "demo":
            raise RuntimeError("demo data is broken")
        return real(data)

    monkeypatch.setattr(services, "build_items", broken_for_demo)
    with pytest.raises(ScoringFailed):
        score.apply(throw=True)
    assert ScoreRun.objects.get(scope="live").status == ScoreRun.Status.DONE
    assert ScoreRun.objects.get(scope="demo").status == ScoreRun.Status.FAILED
    job = JobRun.objects.get(job="score")
    assert (
        job.status == JobRun.Status.FAILED and "demo data is broken" in job.summary["demo"]["error"]
    )


def test_unscored_rows_are_not_ranked_and_say_why(client):
    """A competitor with no forecast has no rank in the API either, as the page lists it apart;
    ranked rows carry their group letters."""
    cohort = _cohort(slugs=("ann", "ben", "idle"))
    compute_scores("live", as_of=AT + timedelta(days=1))
    for query in ({}, {"cohort": cohort.pk}):
        _, body = _get(client, **query)
        rows = {r["competitor"]: r for r in body["rows"]}
        assert [r["competitor"] for r in body["rows"]] == ["ben", "ann", "idle"]
        assert (rows["ben"]["rank"], rows["ann"]["rank"]) == (1, 2)
        assert rows["idle"]["rank"] is None
        assert rows["idle"]["unranked_reason"] == "no forecast made yet"
        assert rows["ben"]["unranked_reason"] is None
        # One common question is below the test's minimum: no difference, one shared letter.
        assert rows["ben"]["group_letters"] == rows["ann"]["group_letters"] == "a"
        assert rows["idle"]["group_letters"] is None


def test_the_scores_export_ranks_as_the_api_does(client):
    """The scores export shows the pages' rank, not the run's stored order: the competitor with
    no forecast has none, with the same reason, in CSV and JSON."""
    _cohort(slugs=("ann", "ben", "idle"))
    compute_scores("live", as_of=AT + timedelta(days=1))
    query = {"scope": "live", "since": "2000-01-01"}
    body = b"".join(client.get("/exports/scores.json", query).streaming_content)
    rows = json.loads(body)["rows"]
    ranks = {(r["cohort_id"], r["competitor"]): (r["rank"], r["unranked_reason"]) for r in rows}
    for group in {r["cohort_id"] for r in rows}:
        assert ranks[(group, "ben")] == (1, None) and ranks[(group, "ann")] == (2, None)
        assert ranks[(group, "idle")] == (None, "no forecast made yet")
    csv_text = b"".join(client.get("/exports/scores.csv", query).streaming_content).decode()
    header, *lines = list(csv.reader(io.StringIO(csv_text)))
    # The computed reason follows the published columns; columns added later come after it.
    reason = header.index("unranked_reason")
    assert header[reason - 1] == "cohort_root" and header[-1] == "group_letters"
    idle = next(line for line in lines if line[header.index("competitor")] == "idle")
    assert idle[reason] == "no forecast made yet" and idle[header.index("rank")] == ""
