"""`arena verify --scores`: the published leaderboard of a small demo recomputed from its exports
alone matches every row; a forged export (a probability changed, a resolution flipped) fails,
naming the row and the figure."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from scoring import verify_scores
from scoring.models import LeaderboardRow, ScoreRun
from tests import demo_snapshot
from tests.fixtures import SMALL_DEMO

WHATS = ("scores", "forecasts", "trades", "snapshots")

pytestmark = pytest.mark.django_db


def _arena(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("arena", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def demo_exports(django_db_setup, django_db_blocker, tmp_path_factory):
    """One demo per module, its exports saved as a visitor would download them."""
    from django.core.management import call_command as run

    directory = tmp_path_factory.mktemp("exports")
    with django_db_blocker.unblock(), override_settings(ARENA_LLM_API_KEY=""):
        try:
            demo_snapshot.demo(**SMALL_DEMO)  # the `small_demo` fixture's
            for what in WHATS:
                out, _ = _arena("export", "--what", what, "--format", "json", "--scope", "demo")
                (directory / f"{what}.json").write_text(out)
            yield directory
        finally:
            run("flush", interactive=False, verbosity=0)


def _doc(directory: Path, what: str) -> dict:
    return json.loads((directory / f"{what}.json").read_text())


def test_every_published_row_is_recomputed_from_the_exports(demo_exports):
    scores = _doc(demo_exports, "scores")["rows"]
    check = verify_scores.check_scores(
        scores,
        _doc(demo_exports, "forecasts")["rows"],
        _doc(demo_exports, "trades")["rows"],
        snapshot_rows=_doc(demo_exports, "snapshots")["rows"],
    )
    assert check.problems == []
    run = ScoreRun.objects.get(scope="demo", status="done")
    rows = LeaderboardRow.objects.filter(run=run)
    assert check.runs == [("demo", run.pk)] and check.rows == rows.count() > 4
    fields = {*verify_scores.FLOAT_FIELDS, *verify_scores.INT_FIELDS, *verify_scores.MONEY_FIELDS}
    assert check.figures == check.rows * len(fields)
    # The figures compared are real ones: scored rows with intervals and a win rate.
    assert rows.filter(brier__isnull=False, brier_lo__isnull=False, skill_hi__isnull=False).exists()
    assert rows.filter(win_rate__isnull=False).exists()
    assert rows.exclude(pnl=0).filter(return_pct__isnull=False).exists()


def test_the_command_checks_the_database_and_a_saved_directory(demo_exports):
    out, _ = _arena("verify", "--scores")
    assert out.splitlines()[-1].startswith("ok: ") and "within 1e-12" in out
    out, _ = _arena("verify", "--scores", "--export", str(demo_exports))
    assert out.splitlines()[-1].startswith("ok: ")


def _forge(demo_exports: Path, tmp_path: Path) -> tuple[dict, dict]:
    """A copy of the exports with one scored forecast's probability changed and one resolution
    flipped; returns the two forged rows."""
    for what in WHATS:
        (tmp_path / f"{what}.json").write_text((demo_exports / f"{what}.json").read_text())
    doc = _doc(tmp_path, "forecasts")
    resolved = [r for r in doc["rows"] if r["market_status"] == "resolved"]
    changed = resolved[0]
    changed["probability"] = round(1.0 - float(changed["probability"]), 6) or 0.5
    other = next(r for r in resolved if r["market_id"] != changed["market_id"])
    flipped_market = other["market_id"]
    names = other["market_outcomes"]
    for row in doc["rows"]:
        if row["market_id"] == flipped_market:
            row["resolved_outcome"] = next(n for n in names if n != row["resolved_outcome"])
    (tmp_path / "forecasts.json").write_text(json.dumps(doc))
    return changed, other


def test_a_forged_export_fails_naming_the_row(demo_exports, tmp_path):
    changed, flipped = _forge(demo_exports, tmp_path)
    check = verify_scores.check_scores(
        _doc(tmp_path, "scores")["rows"],
        _doc(tmp_path, "forecasts")["rows"],
        _doc(tmp_path, "trades")["rows"],
    )
    assert not check.ok
    text = "\n".join(check.problems)
    # The changed forecast's competitor in its cohort and across all cohorts, by name and field.
    assert f"cohort {changed['cohort_id']}, {changed['competitor']}: brier published" in text
    assert f"all cohorts, {changed['competitor']}: brier published" in text
    # The flipped resolution moves the scores of whoever forecast that market.
    assert f"cohort {flipped['cohort_id']}, {flipped['competitor']}: " in text
    with pytest.raises(CommandError, match=r"verify FAILED: \d+ published figures differ; first: "):
        _arena("verify", "--scores", "--export", str(tmp_path))


def test_a_forged_snapshot_fails_on_pnl_and_return(demo_exports):
    doc = _doc(demo_exports, "snapshots")
    last = max(doc["rows"], key=lambda r: (r["ts"], r["entry_id"]))
    last["total"] = f"{float(last['total']) + 100:.2f}"
    check = verify_scores.check_scores(
        _doc(demo_exports, "scores")["rows"],
        _doc(demo_exports, "forecasts")["rows"],
        _doc(demo_exports, "trades")["rows"],
        snapshot_rows=doc["rows"],
    )
    text = "\n".join(check.problems)
    assert f"cohort {last['cohort_id']}, {last['competitor']}: pnl published" in text
    assert f"all cohorts, {last['competitor']}: return_pct published" in text


def test_ranks_follow_the_recomputed_figures(demo_exports):
    """Rows swapped in rank are both named: the rank is recomputed from the headline figures."""
    doc = _doc(demo_exports, "scores")
    run = max(r["run_id"] for r in doc["rows"])
    group = [r for r in doc["rows"] if r["run_id"] == run and r["cohort_id"] is None]
    first, second = sorted(group, key=lambda r: r["rank"])[:2]
    first["rank"], second["rank"] = second["rank"], first["rank"]
    check = verify_scores.check_scores(
        doc["rows"],
        _doc(demo_exports, "forecasts")["rows"],
        _doc(demo_exports, "trades")["rows"],
        snapshot_rows=_doc(demo_exports, "snapshots")["rows"],
    )
    assert check.problems == [
        f"demo run {run}, all cohorts, {first['competitor']}: rank published 2, recomputed 1",
        f"demo run {run}, all cohorts, {second['competitor']}: rank published 1, recomputed 2",
    ]
    # Without the snapshots, money is not compared and a note says so.
    out, _ = _arena("verify", "--scores", "--export", str(_without_snapshots(demo_exports)))
    assert "no snapshots.json" in out and out.splitlines()[-1].startswith("ok: ")


def _without_snapshots(demo_exports: Path) -> Path:
    directory = demo_exports.parent / "no-snapshots"
    directory.mkdir(exist_ok=True)
    for what in WHATS[:3]:
        (directory / f"{what}.json").write_text((demo_exports / f"{what}.json").read_text())
    return directory


def test_a_missing_row_and_an_unreadable_export_are_named(demo_exports, tmp_path):
    scores = _doc(demo_exports, "scores")
    dropped = next(r for r in scores["rows"] if r["cohort_id"] is None and r["n_forecasts"])
    rows = [r for r in scores["rows"] if r is not dropped]
    check = verify_scores.check_scores(
        rows, _doc(demo_exports, "forecasts")["rows"], _doc(demo_exports, "trades")["rows"]
    )
    assert any(
        p.endswith("forecasts in the export but no published row")
        and f"all cohorts, {dropped['competitor']}:" in p
        for p in check.problems
    )
    (tmp_path / "scores.json").write_text("{not json")
    with pytest.raises(CommandError, match="scores.json is not JSON"):
        _arena("verify", "--scores", "--export", str(tmp_path))


def test_a_run_under_another_methodology_is_reported_not_recomputed(demo_exports):
    rows = _doc(demo_exports, "scores")["rows"]
    for row in rows:
        row["methodology_hash"] = "0" * 64
    check = verify_scores.check_scores(rows, [], [])
    assert check.figures == 0 and len(check.problems) == 1
    assert "scored under methodology unknown (000000000000...)" in check.problems[0]
    with pytest.raises(CommandError, match="without --published and --cohort"):
        _arena("verify", "--scores", "--cohort", "1")


def test_the_export_ranks_as_the_pages_do_and_a_blanked_rank_is_caught(demo_exports, client):
    """An unscored row is exported without a rank and with the reason the pages give; ranked
    rows are 1..k in each group, as /api/leaderboard shows them. Blanking a scored row's rank
    in the export (hiding it from the ranking) is named."""
    doc = _doc(demo_exports, "scores")
    groups: dict[tuple, list[dict]] = {}
    for r in doc["rows"]:
        assert (r["rank"] is None) == bool(r["unranked_reason"]), r
        groups.setdefault((r["run_id"], r["cohort_id"]), []).append(r)
    for group in groups.values():
        ranks = sorted(r["rank"] for r in group if r["rank"] is not None)
        assert ranks == list(range(1, len(ranks) + 1))
    run = max(r["run_id"] for r in doc["rows"])
    api = client.get("/api/leaderboard", {"scope": "demo"}).json()
    exported = {r["competitor"]: r["rank"] for r in groups[(run, None)]}
    assert {r["competitor"]: r["rank"] for r in api["rows"]} == exported

    scored = next(r for r in groups[(run, None)] if r["rank"] is not None)
    scored["rank"] = None
    check = verify_scores.check_scores(
        doc["rows"],
        _doc(demo_exports, "forecasts")["rows"],
        _doc(demo_exports, "trades")["rows"],
        snapshot_rows=_doc(demo_exports, "snapshots")["rows"],
    )
    assert any(f"{scored['competitor']}: published without a rank" in p for p in check.problems), (
        check.problems
    )
