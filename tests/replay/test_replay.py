"""ForecastBench replay through the whole pipeline, on small fixture sets in the real format.

fixtures/ holds a resolved set (2026-01-04: every platform, resolved and unresolved rows, a row
without resolution, malformed values, a bad date, a bad resolution row, a metaculus and an infer
question sharing an id, dataset questions) and a set whose resolution set is not published yet.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections import Counter
from datetime import UTC, date, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from agents.models import Competitor
from agents.services import ensure_default_lineup
from cohorts.doctor import check_invariants
from cohorts.models import Cohort, Decision, Forecast, LedgerEntry, Snapshot, Trade, Universe
from cohorts.seals.models import EventLogEntry, WeekSeal
from cohorts.seals.verify import verify_database
from markets.models import Market, PricePoint, ResolutionChange
from scoring.models import LeaderboardRow, ScoreRun
from scoring.selectors import latest_run, leaderboard_rows
from scoring.services import compute_scores
from simulations.replay import (
    CUTOFF_WARNING,
    SIMULATED_NOTE,
    ReplayError,
    load_sets,
    parse_set,
    replay,
    replay_clock,
    replay_set,
    timeline,
    upsert_markets,
)

FIXTURES = Path(__file__).parent / "fixtures"
DUE = date(2026, 1, 4)
MARKET_SOURCES = {"polymarket", "manifold", "metaculus", "infer"}

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_llm_key(settings):
    # LLM competitors must be skipped (no key), whatever the machine's environment says.
    settings.ARENA_LLM_API_KEY = ""


@pytest.fixture
def lineup():
    ensure_default_lineup()
    return Competitor.objects.all()


def _raw(kind: str, due: date = DUE) -> dict:
    name = f"{due}-llm.json" if kind == "q" else f"{due}_resolution_set.json"
    folder = "question_sets" if kind == "q" else "resolution_sets"
    return json.loads((FIXTURES / folder / name).read_text())


def _valid_freeze(row: dict) -> float | None:
    """The test's own reading of a usable row: a number in (0, 1) and parseable dates."""
    try:
        value = float(row["freeze_datetime_value"])
        for key in ("market_info_open_datetime", "market_info_close_datetime"):
            if row[key] != "N/A":
                datetime.fromisoformat(row[key])
    except (KeyError, ValueError):
        return None
    return value if 0 < value < 1 else None


def _expected_market_brier() -> tuple[float, int]:
    """Brier of the freeze values against the outcomes, straight from the JSON files."""
    outcomes = {
        (r["id"], r["source"]): r["resolved_to"]
        for r in _raw("r")["resolutions"]
        if r["resolved"] and r["resolved_to"] in (0, 1)
    }
    pairs = []
    for row in _raw("q")["questions"]:
        key = (row["id"], row["source"])
        if row["source"] in MARKET_SOURCES and key in outcomes:
            p = _valid_freeze(row)
            if p is not None:
                pairs.append((p, outcomes[key]))
    return sum((p - o) ** 2 for p, o in pairs) / len(pairs), len(pairs)


def _counts() -> dict[str, int]:
    models = [Cohort, Market, Decision, Forecast, Trade, LedgerEntry, Snapshot, PricePoint]
    counts = {m.__name__: m.objects.count() for m in models}
    counts["ResolutionChange"] = ResolutionChange.objects.count()
    return counts


def _replay_cohort() -> Cohort:
    return Cohort.objects.get(kind=Cohort.Kind.REPLAY, label=f"ForecastBench {DUE}")


# --- reading and validation ----------------------------------------------------------------


def test_parse_keeps_market_questions_and_reports_every_skipped_row():
    (files,) = load_sets(str(FIXTURES), [DUE])
    rs = parse_set(files)
    raw = _raw("q")["questions"]
    market_rows = [r for r in raw if r["source"] in MARKET_SOURCES]
    assert rs.other_sources == len(raw) - len(market_rows)
    assert len(rs.questions) + len(rs.skipped) == len(market_rows)
    reasons = dict(rs.skipped)
    assert reasons["manifold:Mf3"].startswith("bad freeze value")  # "abc"
    assert reasons["metaculus:7566"].startswith("bad freeze value")  # exactly 1
    assert reasons["infer:1403"].startswith("bad date")
    assert rs.skip_summary() == Counter({"bad freeze value": 2, "bad date": 1})
    # A resolution row "resolved" to 0.5 is ignored with a warning; the question stays.
    assert any("manifold:Mf4" in w and "not 0 or 1" in w for w in rs.warnings)
    mf4 = next(q for q in rs.questions if q.qid == "Mf4")
    assert mf4.outcome is None
    assert rs.without_resolution == 1  # Mf2
    assert {(q.platform, q.qid) for q in rs.questions} >= {("metaculus", "7565"), ("infer", "7565")}


def test_missing_due_and_missing_path_are_clear_errors():
    with pytest.raises(ReplayError, match="no question set for 2025-01-01"):
        load_sets(str(FIXTURES), [date(2025, 1, 1)])
    with pytest.raises(ReplayError, match="does not exist"):
        load_sets(str(FIXTURES / "nope"))


# --- the whole replay ----------------------------------------------------------------------


def test_replay_runs_the_set_end_to_end(lineup):
    gpt, other = lineup.filter(kind="llm").order_by("pk")[:2]
    Competitor.objects.filter(pk=gpt.pk).update(knowledge_cutoff=date(2026, 3, 1))
    Competitor.objects.filter(pk=other.pk).update(knowledge_cutoff=date(2025, 6, 1))
    result = replay(str(FIXTURES), [DUE])
    (rs,) = result.sets
    cohort = _replay_cohort()
    assert cohort.week_start == datetime(2026, 1, 4, tzinfo=UTC)
    assert cohort.decision_weeks == 1
    assert CUTOFF_WARNING in cohort.notes
    assert f"{gpt.display_name}: 2026-03-01 (after the due date: may know outcomes)" in cohort.notes
    assert f"{other.display_name}: 2025-06-01\n" in cohort.notes

    markets = Market.objects.filter(source=Market.Source.FORECASTBENCH)
    assert markets.count() == len(rs.questions)
    # Same id on two platforms: two markets.
    assert markets.filter(external_id__endswith=":7565").count() == 2
    # The universe is exactly the set's market questions, at the freeze values.
    universe = Universe.objects.get(cohort=cohort, week=1)
    assert {item["market_id"] for item in universe.markets} == set(
        markets.values_list("pk", flat=True)
    )
    shown = {item["market_id"]: item["prices"]["Yes"] for item in universe.markets}
    for q in rs.questions:
        market = markets.get(external_id=rs.external_id(q))
        assert Decimal(shown[market.pk]) == q.freeze_value
        assert (
            PricePoint.objects.filter(market=market, ts=cohort.week_start).get().price
            == q.freeze_value
        )

    # Resolved rows resolved the market on their date; everything resolved is settled.
    p1 = markets.get(external_id=f"{DUE}:polymarket:0xaaa1")
    assert (p1.status, p1.resolved_outcome, p1.resolved_by) == ("resolved", "Yes", "replay")
    assert p1.resolved_at == datetime(2026, 1, 20, tzinfo=UTC)
    assert markets.get(external_id=f"{DUE}:metaculus:7565").resolved_outcome == "No"
    assert not markets.filter(status="resolved", settled_at__isnull=True).exists()
    # Unresolved rows gave a later price; rows without resolution stay open at the freeze value.
    p3 = markets.get(external_id=f"{DUE}:polymarket:0xaaa3")
    assert p3.status == "open" and Decimal(p3.last_prices["Yes"]) == Decimal("0.55")
    assert PricePoint.objects.filter(market=p3, ts=datetime(2026, 3, 1, tzinfo=UTC)).exists()
    mf2 = markets.get(external_id=f"{DUE}:manifold:Mf2")
    assert mf2.status == "open" and Decimal(mf2.last_prices["Yes"]) == Decimal("0.3")

    # Baselines decided once; LLM entries were skipped (no key) rather than failing.
    statuses = Counter(
        Decision.objects.filter(entry__cohort=cohort).values_list(
            "entry__competitor__kind", "status"
        )
    )
    n_baselines = lineup.filter(kind="baseline").count()
    assert statuses[("baseline", "done")] == n_baselines
    assert statuses[("llm", "skipped")] == lineup.filter(kind="llm").count()
    assert not Decision.objects.exclude(week=1).exists()
    assert check_invariants() == []
    # Sealed like a live week: one complete root, every record and settlement verifies.
    assert list(WeekSeal.objects.filter(cohort=cohort).values_list("week", "reason")) == [
        (1, "complete")
    ]
    assert EventLogEntry.objects.filter(scope="replay", kind="resolution").exists()
    assert verify_database(cohort.pk).problems == []
    assert Snapshot.objects.filter(
        entry__cohort=cohort, ts=datetime(2026, 3, 1, tzinfo=UTC)
    ).exists()


def test_market_baseline_brier_equals_the_freeze_values_brier(lineup):
    result = replay(str(FIXTURES), [DUE])
    expected, n = _expected_market_brier()
    run = latest_run("replay")
    assert run is not None and run.pk == result.score_run_id
    row = leaderboard_rows(run, _replay_cohort()).get(competitor__slug="market")
    assert row.n_resolved == n
    assert row.brier == pytest.approx(expected, abs=1e-12)


def test_reimport_is_idempotent(lineup):
    replay(str(FIXTURES), [DUE])
    first = _counts()
    cash = dict(_replay_cohort().entries.values_list("pk", "cash"))
    replay(str(FIXTURES), [DUE])
    assert _counts() == first
    assert dict(_replay_cohort().entries.values_list("pk", "cash")) == cash


def _scores(run) -> list[tuple]:
    fields = [f.name for f in LeaderboardRow._meta.fields if f.name not in ("id", "run")]
    return list(run.rows.order_by("cohort_id", "competitor_id").values_list(*fields))


def test_replay_rescored_twice_by_any_path_gives_identical_numbers(lineup):
    # Issue 18: the import scored as of its clock end, `arena score` and the hourly job as of
    # now; a resolution between the two flipped the market baseline's Brier with whichever ran
    # last. Every path now scores the scope as of its own clock.
    from scoring.tasks import score_all

    result = replay(str(FIXTURES), [DUE])
    imported = ScoreRun.objects.get(pk=result.score_run_id)
    call_command("arena", "score", "--scope", "replay", stdout=StringIO())
    by_cli = latest_run("replay")
    score_all()
    by_job = latest_run("replay")
    assert len({imported.pk, by_cli.pk, by_job.pk}) == 3
    clock = replay_clock(_replay_cohort())
    assert imported.as_of == by_cli.as_of == by_job.as_of == clock <= timezone.now()
    assert _scores(imported) == _scores(by_cli) == _scores(by_job)
    assert imported.details == by_cli.details == by_job.details
    market = leaderboard_rows(by_job, _replay_cohort()).get(competitor__slug="market")
    assert market.brier == pytest.approx(_expected_market_brier()[0], abs=1e-12)


def test_rows_dated_after_today_wait_for_their_date(lineup):
    # "Today" is 2026-02-01 for the first import: the resolution on 2026-01-20 is applied, the
    # price of 2026-03-01 is not, and nothing (clock, snapshots, scores) is dated after today.
    today = datetime(2026, 2, 1, tzinfo=UTC)
    result = replay(str(FIXTURES), [DUE], now=today)
    (report,) = result.reports
    assert report.held >= 1 and report.held_until == datetime(2026, 3, 1, tzinfo=UTC)
    assert report.clock <= today
    assert not Snapshot.objects.filter(ts__gt=today).exists()
    assert not PricePoint.objects.filter(ts__gt=today).exists()
    assert ScoreRun.objects.get(pk=result.score_run_id).as_of <= today
    p3 = Market.objects.get(external_id=f"{DUE}:polymarket:0xaaa3")
    assert p3.last_prices["Yes"] != "0.55"
    # Imported again once the date has come, the held rows are applied.
    later = replay(str(FIXTURES), [DUE], now=datetime(2026, 3, 2, tzinfo=UTC))
    assert later.reports[0].held == 0
    p3.refresh_from_db()
    assert Decimal(p3.last_prices["Yes"]) == Decimal("0.55")


def test_replay_cohorts_stay_out_of_live_scores(lineup):
    replay(str(FIXTURES), [DUE])
    live = compute_scores("live")
    assert not LeaderboardRow.objects.filter(run=live, cohort__kind=Cohort.Kind.REPLAY).exists()
    assert live.n_forecasts == 0
    replay_rows = LeaderboardRow.objects.filter(run=latest_run("replay"), cohort__isnull=False)
    assert replay_rows.exists()
    assert set(replay_rows.values_list("cohort__kind", flat=True)) == {Cohort.Kind.REPLAY}


def test_directory_mode_imports_a_set_without_resolutions(lineup):
    result = replay(str(FIXTURES))
    assert [rs.due for rs in result.sets] == [DUE, date(2026, 1, 18)]
    later = result.sets[1]
    assert not later.has_resolution_set
    cohort = Cohort.objects.get(kind=Cohort.Kind.REPLAY, label="ForecastBench 2026-01-18")
    markets = Market.objects.filter(event_slug="forecastbench-2026-01-18")
    assert markets.count() == len(later.questions) == 4
    assert set(markets.values_list("status", flat=True)) == {"open"}
    assert cohort.entries.filter(decisions__status="done").exists()


# --- URL mode against a local server -------------------------------------------------------


@pytest.fixture
def fixture_server():
    handler = functools.partial(_QuietHandler, directory=str(FIXTURES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    seen_agents: list[str] = []

    def do_GET(self):
        _QuietHandler.seen_agents.append(self.headers.get("User-Agent", ""))
        super().do_GET()

    def log_message(self, *args):
        pass


def test_url_mode_reads_the_same_sets(lineup, fixture_server, settings):
    result = replay(fixture_server, [DUE])
    (rs,) = result.sets
    local = parse_set(load_sets(str(FIXTURES), [DUE])[0])
    assert [q.qid for q in rs.questions] == [q.qid for q in local.questions]
    assert rs.has_resolution_set
    assert Market.objects.filter(source="forecastbench", status="resolved").count() == sum(
        1 for q in local.questions if q.outcome
    )
    assert settings.ARENA_USER_AGENT in _QuietHandler.seen_agents


def test_url_to_a_question_file_finds_its_resolution_set(fixture_server):
    (files,) = load_sets(f"{fixture_server}/question_sets/2026-01-04-llm.json")
    assert files.resolutions is not None
    (files,) = load_sets(f"{fixture_server}/question_sets/2026-01-18-llm.json")
    assert files.resolutions is None  # 404: not published yet


def test_url_mode_missing_set_is_a_clear_error(fixture_server):
    with pytest.raises(ReplayError, match="HTTP 404"):
        load_sets(fixture_server, [date(2030, 1, 6)])


def test_cli_reports_skips_and_is_idempotent(lineup, capsys):
    call_command("arena", "replay-forecastbench", str(FIXTURES), "--due", str(DUE))
    out = capsys.readouterr().out
    assert "ForecastBench 2026-01-04: cohort" in out
    assert "2 bad freeze value" in out and "1 bad date" in out
    counts = _counts()
    call_command("arena", "replay-forecastbench", str(FIXTURES), "--due", str(DUE))
    assert "(existing)" in capsys.readouterr().out
    assert _counts() == counts


def test_interrupted_replay_resumes_where_it_stopped(lineup):
    (files,) = load_sets(str(FIXTURES), [DUE])
    rs = parse_set(files)
    calls = 0

    def interrupt_after_two_steps():
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replay_set(rs, on_step=interrupt_after_two_steps)
    cohort = _replay_cohort()
    stopped = replay_clock(cohort)
    report = replay_set(rs)
    markets = upsert_markets(rs)
    all_steps = timeline(rs, markets)
    assert report.steps == len([s for s in all_steps if s.at > stopped]) == len(all_steps) - 2
    # Every step instant has exactly one snapshot per entry, none twice, none missing.
    per_ts = Counter(Snapshot.objects.filter(entry__cohort=cohort).values_list("ts", flat=True))
    n_entries = cohort.entries.count()
    assert all(per_ts[s.at] == n_entries for s in all_steps)
    assert set(per_ts.values()) == {n_entries}
    assert check_invariants() == []
    resolved = Market.objects.filter(source="forecastbench", status="resolved").count()
    assert resolved == sum(1 for q in rs.questions if q.outcome)


def test_file_mode_pairs_a_question_set_with_its_resolution_set(tmp_path):
    q_file = FIXTURES / "question_sets" / f"{DUE}-llm.json"
    r_file = FIXTURES / "resolution_sets" / f"{DUE}_resolution_set.json"
    for given in (q_file, r_file):
        (files,) = load_sets(str(given))
        assert files.origin == str(q_file)
        assert files.resolutions == _raw("r")
    with pytest.raises(ReplayError, match="not one of --due"):
        load_sets(str(q_file), [date(2026, 1, 18)])
    broken = tmp_path / "2026-02-01-llm.json"
    broken.write_text('{"forecast_due_date": "2026-02-01", "questions": [')
    with pytest.raises(ReplayError, match="not valid JSON"):
        load_sets(str(broken))
    no_due = tmp_path / "2026-02-15-llm.json"
    no_due.write_text('{"questions": []}')
    with pytest.raises(ReplayError, match="forecast_due_date"):
        load_sets(str(no_due))


def test_cli_says_a_warning_shared_by_sets_once_with_a_count(lineup, capsys):
    # Both fixture sets have LLM entries without a key; the second has no resolution set yet.
    call_command("arena", "replay-forecastbench", str(FIXTURES))
    out = capsys.readouterr().out
    assert out.count("without an API key") == 1, out
    assert "2 sets: skipped decisions are LLM entries without an API key" in out
    assert out.count("no resolution set published yet") == 1
    assert "ForecastBench 2026-01-18: cohort" in out and "; no resolution set yet" in out


def test_simulated_replay_answers_through_the_endpoint_and_never_mixes_with_real_models(
    lineup, capsys
):
    call_command("arena", "replay-forecastbench", str(FIXTURES), "--due", str(DUE),
                 "--simulated", "--latency-scale", "0")  # fmt: skip
    assert "decisions: 10 done" in capsys.readouterr().out  # 5 baselines, 5 simulated models
    cohort = Cohort.objects.get(kind=Cohort.Kind.REPLAY)
    assert cohort.label == f"ForecastBench {DUE} · simulated models"
    assert SIMULATED_NOTE in cohort.notes
    models = Competitor.objects.filter(entries__cohort=cohort, kind=Competitor.Kind.LLM)
    assert models.count() == 5 and not models.filter(simulated=False).exists()
    decisions = Decision.objects.filter(entry__cohort=cohort, entry__competitor__simulated=True)
    assert set(decisions.values_list("status", flat=True)) == {Decision.Status.DONE}
    # Every question is in the forecast sample of a replay: each model forecast every one.
    n_questions = len(cohort.universes.get(week=1).markets)
    for d in decisions:
        assert d.llm_calls.filter(http_status=200).exists()
        assert d.forecasts.values("market").distinct().count() == n_questions
    # The set's cohort holds simulated models: a plain replay of it is refused, and the other
    # way round a set replayed with real models refuses --simulated.
    with pytest.raises(ReplayError, match="holds simulated models"):
        replay(str(FIXTURES), [DUE])
    other = date(2026, 1, 18)
    replay(str(FIXTURES), [other])
    with pytest.raises(ReplayError, match="replayed with real models"):
        replay(str(FIXTURES), [other], simulated=True)
