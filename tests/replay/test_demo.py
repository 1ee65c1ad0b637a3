"""`arena demo` on a small scale: a consistent, labelled, resumable synthetic history."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Max
from hypothesis import given, settings
from hypothesis import strategies as st

from cohorts.doctor import check_invariants
from cohorts.models import (
    Cohort,
    Decision,
    Forecast,
    LedgerEntry,
    LLMCall,
    Position,
    Settlement,
    Snapshot,
    Trade,
    Universe,
)
from cohorts.seals.models import EventLogEntry, WeekSeal
from cohorts.seals.verify import verify_database
from markets.models import Market, PricePoint, ResolutionChange
from scoring.models import LeaderboardRow, ScoreRun
from scoring.selectors import latest_run
from simulations.demo import DemoError, build_plan, price_path, run_demo
from tests.factories import make_market
from tests.fixtures import DEMO_NOW, SMALL_DEMO

# A Wednesday noon: two weekly cohorts (Sundays 03-01 and 03-08), clock stopped mid-week; the
# demo the `small_demo` fixture builds (tests/fixtures.py).
NOW, SMALL = DEMO_NOW, SMALL_DEMO


def _counts() -> dict[str, int]:
    models = [Market, PricePoint, Cohort, Decision, LLMCall, Forecast, Trade, LedgerEntry, Snapshot]
    return {m.__name__: m.objects.count() for m in models}


def test_small_demo_is_sealed_the_same_way(small_demo):
    """Every demo week with decisions is sealed as complete and every settlement and every
    resolution is in the demo event log, so `arena verify` covers simulations too."""
    weeks = set(Universe.objects.values_list("cohort_id", "week"))
    assert weeks and set(WeekSeal.objects.values_list("cohort_id", "week")) == weeks
    assert set(WeekSeal.objects.values_list("reason", "scope")) == {("complete", "demo")}
    demo_log = EventLogEntry.objects.filter(scope="demo")
    assert demo_log.filter(kind="settlement").count() == Settlement.objects.count()
    changes = ResolutionChange.objects.filter(market__source=Market.Source.DEMO)
    assert changes.count() == small_demo.resolved > 0
    assert demo_log.filter(kind="resolution").count() == changes.count()
    money = demo_log.filter(kind__in=("settlement", "resolution"))
    assert money.count() == Settlement.objects.count() + changes.count()
    # ...and every week's root, each cohort's state and each competitor's identity.
    assert demo_log.filter(kind="seal").count() == WeekSeal.objects.count()
    assert demo_log.filter(kind="cohort_state").count() >= len({c for c, _ in weeks})
    assert demo_log.filter(kind="identity").exists()
    assert verify_database().problems == []


def test_small_demo_builds_a_consistent_history(small_demo):
    cohorts = Cohort.objects.filter(kind=Cohort.Kind.DEMO).order_by("week_start")
    assert [c.week_start for c in cohorts] == [
        datetime(2026, 3, 1, tzinfo=UTC),
        datetime(2026, 3, 8, tzinfo=UTC),
    ]
    # Baselines and the simulated models (no real model), every decision through the real
    # pipeline and done.
    lineup = set(cohorts.values_list("entries__competitor__kind", "entries__competitor__simulated"))
    assert lineup == {("baseline", False), ("llm", True)}
    decisions = Decision.objects.filter(entry__cohort__kind=Cohort.Kind.DEMO)
    assert decisions.exists()
    assert set(decisions.values_list("status", flat=True)) == {Decision.Status.DONE}
    # The first cohort decided in weeks 1 and 2, the second in week 1.
    assert set(decisions.values_list("entry__cohort__week_start", "week")) == {
        (cohorts[0].week_start, 1),
        (cohorts[0].week_start, 2),
        (cohorts[1].week_start, 1),
    }
    assert Trade.objects.filter(entry__cohort__kind=Cohort.Kind.DEMO).exists()

    assert check_invariants() == []
    markets = Market.objects.filter(source=Market.Source.DEMO)
    finished = markets.filter(status__in=[Market.Status.RESOLVED, Market.Status.VOID])
    assert finished.exists()
    assert not finished.filter(settled_at__isnull=True).exists()
    assert not Position.objects.filter(market__in=finished, status=Position.Status.OPEN).exists()
    assert not markets.filter(close_time__lte=NOW, status=Market.Status.OPEN).exists()
    assert markets.filter(neg_risk=True).exists()

    run = latest_run("demo")
    assert run is not None and run.pk == small_demo.score_run_id
    assert LeaderboardRow.objects.filter(run=run, cohort__isnull=True).exists()
    assert run.n_resolved > 0

    # Snapshots: hourly, then every 10 minutes in the demo's last day.
    times = sorted(
        set(Snapshot.objects.filter(entry__cohort__kind="demo").values_list("ts", flat=True))
    )
    last_day = [t for t in times if t > NOW - timedelta(days=1)]
    earlier = [t for t in times if t <= NOW - timedelta(days=1)]
    assert len(last_day) == 24 * 6
    assert {b - a for a, b in zip(last_day, last_day[1:])} == {timedelta(minutes=10)}
    assert max(b - a for a, b in zip(earlier, earlier[1:])) == timedelta(hours=1)


def test_demo_rescored_by_the_cli_gives_identical_numbers(small_demo):
    # Scored as of the demo's clock by every path (the import, `arena score`), never as of the
    # wall clock, so re-scoring changes nothing.
    first = ScoreRun.objects.get(pk=small_demo.score_run_id)
    call_command("arena", "score", "--scope", "demo", stdout=StringIO())
    second = latest_run("demo")
    assert second.pk != first.pk and first.as_of == second.as_of == NOW
    fields = [f.name for f in LeaderboardRow._meta.fields if f.name not in ("id", "run")]
    rows = [
        list(run.rows.order_by("cohort_id", "competitor_id").values_list(*fields))
        for run in (first, second)
    ]
    assert rows[0] == rows[1] and first.details == second.details


def test_rerun_with_the_same_seed_adds_nothing(small_demo):
    before = _counts()
    report = run_demo(**SMALL)
    assert _counts() == before
    assert report.ticks == 0  # the clock was already at NOW


def test_rerun_later_continues_the_same_demo(small_demo):
    later = run_demo(**{**SMALL, "now": NOW + timedelta(days=2)})
    assert later.ticks > 0
    assert Cohort.objects.filter(kind=Cohort.Kind.DEMO).count() == 2
    assert check_invariants() == []
    ts = Snapshot.objects.filter(entry__cohort__kind="demo").values_list("ts", flat=True)
    assert max(ts) == NOW + timedelta(days=2)


def test_another_seed_refuses_then_reset_rebuilds_only_demo_data(small_demo):
    live = make_market(source=Market.Source.POLYMARKET, external_id="keep-me")
    with pytest.raises(DemoError, match="seed 7"):
        run_demo(**{**SMALL, "seed": 8})
    with pytest.raises(CommandError, match="--reset"):
        call_command("arena", "demo", "--weeks", "2", "--seed", "9", "--markets", "40")
    run_demo(**{**SMALL, "seed": 8}, reset=True)
    keys = Market.objects.filter(source=Market.Source.DEMO).values_list("external_id", flat=True)
    assert keys and all(k.startswith("s8-") for k in keys)
    assert Market.objects.filter(pk=live.pk).exists()
    assert ScoreRun.objects.filter(scope="demo").count() == 1
    assert check_invariants() == []
    # The old demo's seals went with it; the new one is sealed afresh and verifies.
    assert set(WeekSeal.objects.values_list("cohort__kind", flat=True)) == {"demo"}
    assert WeekSeal.objects.count() == Universe.objects.count()
    assert verify_database().problems == []


def test_plan_is_determined_by_the_seed():
    start = datetime(2026, 3, 1, tzinfo=UTC)
    a = build_plan(seed=3, weeks=2, n_markets=30, start=start)
    b = build_plan(seed=3, weeks=2, n_markets=30, start=start)
    c = build_plan(seed=4, weeks=2, n_markets=30, start=start)
    assert [(m.key, m.question, m.outcome) for m in a.markets] == [
        (m.key, m.question, m.outcome) for m in b.markets
    ]
    assert all(np.array_equal(x.prices, y.prices) for x, y in zip(a.markets, b.markets))
    assert [m.question for m in a.markets] != [m.question for m in c.markets]
    assert len(a.markets) == 30
    # negRisk-like groups: exactly one member resolves Yes.
    groups = Counter(m.group for m in a.markets if m.group and m.outcome == "Yes")
    members = {m.group for m in a.markets if m.group}
    assert members and all(groups[g] == 1 for g in members)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    truth=st.floats(0.01, 0.99),
    won=st.booleans(),
    hours=st.integers(48, 2000),
)
def test_price_paths_stay_inside_and_converge_to_the_outcome(seed, truth, won, hours):
    path = price_path(np.random.default_rng(seed), truth, won, hours)
    assert len(path) == hours
    assert (path > 0).all() and (path < 1).all()
    assert path[-1] > 0.9 if won else path[-1] < 0.1


def test_prices_are_calibrated_forecasts_at_every_age():
    """Among paths priced near p at a given age, about p resolve Yes: the demo's market is a fair
    forecaster, so stretching or copying it earns nothing (a bridge pulled to the outcome failed
    this: its prices lagged the outcome and an over-confident forecaster beat it)."""
    rng = np.random.default_rng(2026)
    prices, outcomes = [], []
    for _ in range(1500):
        truth = float(rng.beta(0.8, 0.8))
        won = bool(rng.random() < truth)
        hours = int(rng.integers(48, 1500))
        path = price_path(rng, truth, won, hours)
        for age in (hours // 4, hours // 2, hours - 25):
            prices.append(path[age])
            outcomes.append(won)
    prices, outcomes = np.array(prices), np.array(outcomes, dtype=float)
    for lo in np.arange(0.1, 0.9, 0.1):  # the middle buckets, where a lag would show
        mask = (prices >= lo) & (prices < lo + 0.1)
        n = int(mask.sum())
        assert n >= 100, lo
        mean_price, rate = prices[mask].mean(), outcomes[mask].mean()
        tolerance = 4 * np.sqrt(mean_price * (1 - mean_price) / n)
        assert abs(rate - mean_price) < tolerance, (lo, n, rate, mean_price)


class _InterruptAfter:
    """A progress bar that presses Ctrl-C after `days` simulated days (advance per day)."""

    def __init__(self, days: int):
        self.days = days

    def advance(self, n: int = 1) -> None:
        self.days -= 1
        if self.days == 0:
            raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_interrupted_demo_resumes_without_gaps_or_duplicates(db, settings):
    settings.ARENA_LLM_API_KEY = ""
    with pytest.raises(KeyboardInterrupt):
        run_demo(**SMALL, progress_factory=lambda total: _InterruptAfter(days=4))
    stopped = Snapshot.objects.aggregate(ts=Max("ts"))["ts"]
    assert stopped is not None and stopped < NOW
    run_demo(**SMALL)
    assert check_invariants() == []
    times = sorted(set(Snapshot.objects.values_list("ts", flat=True)))
    hourly = [t for t in times if t <= NOW - timedelta(days=1)]
    assert hourly[0] == datetime(2026, 3, 1, tzinfo=UTC)
    assert {b - a for a, b in zip(hourly, hourly[1:])} == {timedelta(hours=1)}
    decisions = Decision.objects.values_list("entry__cohort__week_start", "week")
    assert len(set(decisions)) == 3 and set(Decision.objects.values_list("status", flat=True)) == {
        "done"
    }


def test_simulated_models_are_labelled_on_every_page_api_row_and_export(small_demo, client):
    from agents.models import Competitor
    from web.exports import files as exports

    sim = Competitor.objects.get(slug="sim-skilled")
    entry = sim.entries.order_by("pk").first()
    decision = entry.decisions.order_by("pk").first()
    cohort = entry.cohort
    market_id = decision.forecasts.order_by("pk").first().market_id
    badge = 'class="badge badge-simulated"'
    for url in [
        "/?scope=demo",
        "/competitors/",
        f"/competitors/{sim.slug}/?scope=demo",
        f"/cohorts/{cohort.pk}/",
        f"/cohorts/{cohort.pk}/entries/{sim.slug}/",
        f"/decisions/{decision.pk}/",
        f"/markets/{market_id}/",
    ]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert badge in response.content.decode(), url
    page = client.get(f"/decisions/{decision.pk}/").content.decode()
    assert "simulated model: nothing billed" in page
    # Inactive, yet not "retired": they run in simulations only.
    assert "simulations only" in client.get("/competitors/").content.decode()

    def simulated_flags(rows, key="competitor_simulated"):
        return {r["competitor"]: r[key] for r in rows}

    api = client.get(f"/api/cohorts/{cohort.pk}").json()
    assert simulated_flags(api["entries"])[sim.slug] is True
    assert simulated_flags(api["entries"])["market"] is False
    assert client.get(f"/api/decisions/{decision.pk}").json()["competitor_simulated"] is True
    board = client.get("/api/leaderboard?scope=demo").json()["rows"]
    assert simulated_flags(board)[sim.slug] is True and simulated_flags(board)["cash"] is False
    series = client.get(f"/api/cohorts/{cohort.pk}/series").json()["entries"]
    assert simulated_flags(series)[sim.slug] is True
    bounds = exports.bounds(since="2026-01-01", until="2026-12-31")
    for what in exports.SPECS:
        rows = list(exports.rows(what, bounds))
        if what == "universes":
            continue  # one row per cohort-week's frozen sample: it names no competitor
        assert rows and all("competitor_simulated" in r for r in rows), what
        assert {r["competitor_simulated"] for r in rows if r["competitor"] == sim.slug} == {True}


@pytest.mark.django_db
def test_the_demo_command_runs_without_the_debug_query_log():
    """`arena demo` skips DEBUG's per-statement query log for its run and restores it after;
    the statements themselves run and commit as usual."""
    from django.db import connection

    from simulations.demo_cli import _without_query_log

    connection.force_debug_cursor = True  # log queries as DEBUG would
    try:
        connection.queries_log.clear()
        with _without_query_log():
            assert Market.objects.count() == 0
        assert len(connection.queries) == 0
        Market.objects.count()
        assert len(connection.queries) == 1
    finally:
        connection.force_debug_cursor = False
