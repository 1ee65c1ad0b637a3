"""The race the rehearsals found, end to end: a score run reads before a resolution is recorded,
though upstream dates the resolution before the run's as_of. Recomputed later from fresh exports
(`arena verify --scores`), and rescored from the database at the same as_of, the run still
stands, because both read "known at as_of" from when the arena recorded the resolution.
An export from before the resolution_recorded_at column is still read (resolved_at stands in)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from cohorts.models import Cohort
from core import clock
from markets.models import Market
from markets.resolution import record_resolution
from scoring import verify_scores
from scoring.models import LeaderboardRow
from scoring.services import compute_scores
from tests.factories import make_cohort_with_entries, make_competitor, make_market
from tests.scoring.conftest import WEEK_START, add_buy, add_forecasts, make_decision
from web.exports import files as exports

pytestmark = pytest.mark.django_db

AT = WEEK_START + timedelta(hours=1)  # decisions
EARLY = WEEK_START + timedelta(days=1)  # the first market resolves upstream...
EARLY_RECORDED = EARLY + timedelta(hours=2)  # ...and is recorded soon after
UPSTREAM = WEEK_START + timedelta(days=2)  # the second resolves upstream before the run...
AS_OF = WEEK_START + timedelta(days=3)  # ...which is scored as of here...
RECORDED = WEEK_START + timedelta(days=4)  # ...and the arena records it only after the run
FIGURES = ("n_forecasts", "n_resolved", "brier", "log_score", "skill_vs_market", "win_rate")


def _resolve(market: Market, outcome: str, upstream, recorded) -> None:
    with clock.running_on(clock.SimulatedClock(recorded)):
        done = record_resolution(
            market.pk, status=Market.Status.RESOLVED, outcome=outcome,
            by=Market.ResolvedBy.UPSTREAM, reason="upstream resolution", at=upstream,
            only_unresolved=True,
        )  # fmt: skip
    assert done is not None


def _export(what: str) -> list[dict]:
    b = exports.bounds(scope=Cohort.Kind.DEMO, limit=exports.MAX_LIMIT)
    return json.loads("".join(exports.stream(what, "json", b)))["rows"]


def _figures(run) -> dict:
    rows = LeaderboardRow.objects.filter(run=run).order_by("cohort_id", "competitor__slug")
    return {(r.cohort_id, r.competitor.slug): [getattr(r, f) for f in FIGURES] for r in rows}


@pytest.fixture
def raced():
    """Two forecasters, two markets; the run at AS_OF knows only the first resolution."""
    alice, bob = make_competitor("alice"), make_competitor("bob")
    _, (ea, eb) = make_cohort_with_entries(
        week_start=WEEK_START, competitors=[alice, bob], kind=Cohort.Kind.DEMO, at=WEEK_START
    )
    early, race = make_market(prices={"Yes": "0.4", "No": "0.6"}), make_market()
    da, db = make_decision(ea, at=AT), make_decision(eb, at=AT)
    add_forecasts(da, [(early, "Yes", 0.7, 0.4), (race, "Yes", 0.9, 0.6)])
    add_forecasts(db, [(early, "Yes", 0.2, 0.4), (race, "Yes", 0.3, 0.6)])
    add_buy(ea, da, race, "Yes", 100, "0.60", AT)
    add_buy(eb, db, early, "No", 100, "0.60", AT)
    _resolve(early, "Yes", EARLY, EARLY_RECORDED)
    run = compute_scores(Cohort.Kind.DEMO, as_of=AS_OF)  # reads before `race` is recorded
    _resolve(race, "Yes", UPSTREAM, RECORDED)
    race.refresh_from_db()
    assert race.resolved_at == UPSTREAM < AS_OF < race.resolution_recorded_at == RECORDED
    return run, race


def test_verify_scores_against_fresh_exports_agrees_with_the_run(raced):
    run, race = raced
    assert run.n_resolved == 2  # one resolved market, forecast by both
    out = StringIO()
    call_command("arena", "verify", "--scores", stdout=out, stderr=StringIO())
    assert out.getvalue().splitlines()[-1].startswith("ok: ")
    assert f"demo run {run.pk}" in out.getvalue()
    # The rows checked carry the recording time, last, in ISO 8601 UTC.
    rows = [r for r in _export("forecasts") if r["market_id"] == race.pk]
    assert rows and all(list(r)[-1] == "resolution_recorded_at" for r in rows)
    assert {r["resolution_recorded_at"] for r in rows} == {RECORDED.isoformat()}
    assert RECORDED.isoformat().endswith("+00:00")


def test_a_rescore_from_the_database_at_the_same_as_of_publishes_the_same_figures(raced):
    run, _ = raced
    again = compute_scores(Cohort.Kind.DEMO, as_of=AS_OF)
    assert again.n_resolved == run.n_resolved
    assert _figures(again) == _figures(run)
    later = compute_scores(Cohort.Kind.DEMO, as_of=RECORDED)
    assert later.n_resolved == 2 * run.n_resolved  # once recorded, it counts


def test_an_export_without_the_column_is_read_with_resolved_at_standing_in(raced):
    """An export saved before the column existed stays checkable: resolved_at stands in, which
    is the reading that misses the race (the run shows up as different, never unreadable)."""
    run, _ = raced
    forecasts, trades = _export("forecasts"), _export("trades")
    for row in (*forecasts, *trades):
        del row["resolution_recorded_at"]
    check = verify_scores.check_scores(_export("scores"), forecasts, trades)
    assert check.runs == [("demo", run.pk)]
    text = "\n".join(check.problems)
    assert "alice: n_resolved published 1, recomputed 2" in text
    assert "alice: win_rate published none, recomputed 1.0" in text


ENTRY = ["cohort_id", "cohort_kind", "competitor", "competitor_simulated", "replicate"]
BEFORE = {  # the columns as published before resolution_recorded_at: names and places kept
    "forecasts": [
        "forecast_id", *ENTRY, "decision_id", "week", "market_id", "outcome", "probability",
        "market_price", "source", "created_at", "market_status", "resolved_outcome",
        "decision_hash", "market_outcomes", "resolved_at", "shown_prices",
    ],
    "trades": [
        "trade_id", *ENTRY, "decision_id", "market_id", "question", "outcome", "side", "amount",
        "shares", "price", "realized_pnl", "executed_at", "decision_hash", "market_status",
        "resolved_outcome", "resolved_at",
    ],
}  # fmt: skip


def test_the_column_is_appended_last_in_csv_and_json(raced):
    _, race = raced
    b = exports.bounds(scope=Cohort.Kind.DEMO)
    for what, before in BEFORE.items():
        lines = list(csv.reader(io.StringIO("".join(exports.stream(what, "csv", b)))))
        # Appended after every earlier column (later columns come after it in turn).
        assert lines[0][: len(before) + 1] == [*before, "resolution_recorded_at"]
        market, recorded = lines[0].index("market_id"), len(before)
        assert {r[recorded] for r in lines[1:] if r[market] == str(race.pk)} == {
            RECORDED.isoformat()
        }
        assert all(list(row) == lines[0] for row in _export(what))
