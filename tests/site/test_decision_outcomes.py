"""A decision followed to its score: the Brier its page shows for each question is the one the
leaderboard averages, so a competitor's questions, read off its decision pages, average to its
published Brier; and the scope's header counts the forecasts the rows are scored on."""

from __future__ import annotations

import html
import math
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from cohorts.models import Cohort, Decision, Forecast, Position, Settlement, Trade, Universe
from markets.models import Market
from scoring.models import LeaderboardRow
from scoring.selectors import latest_run
from tests import demo_snapshot
from web.decision_outcomes import question_views, trade_views

NOW = datetime(2026, 3, 11, 12, 0, tzinfo=UTC)


@pytest.fixture
def demo(db, settings):
    settings.ARENA_LLM_API_KEY = ""
    return demo_snapshot.demo(weeks=2, seed=7, n_markets=40, now=NOW, latency_scale=0)


def test_the_decision_pages_briers_average_to_the_leaderboards(demo, client):
    run = latest_run("demo")
    assert run is not None
    rows = LeaderboardRow.objects.filter(run=run, cohort__isnull=True, brier__isnull=False)
    assert rows.count() >= 3
    checked = 0
    for row in rows.select_related("competitor"):
        decisions = Decision.objects.filter(entry__competitor=row.competitor).prefetch_related(
            "forecasts__market"
        )
        briers = [q.brier for d in decisions for q in question_views(d) if q.brier is not None]
        assert len(briers) == row.n_resolved, row.competitor.slug
        assert math.isclose(sum(briers) / len(briers), float(row.brier), abs_tol=1e-6)
        checked += 1
    assert checked >= 3


def test_a_settled_buy_shows_its_payout_and_pl(demo, client):
    settlement = (
        Settlement.objects.filter(reversed_at__isnull=True, position__trades__side="BUY")
        .exclude(position__trades__side="SELL")
        .order_by("pk")
        .first()
    )
    assert settlement is not None
    trade = Trade.objects.filter(position=settlement.position).order_by("pk").first()
    assert trade is not None and trade.decision is not None
    view = next(v for v in trade_views(trade.decision) if v.trade.pk == trade.pk)
    per_share = settlement.payout / settlement.shares
    assert view.payout == (per_share * trade.shares).quantize(Decimal("0.01"))
    assert view.pnl == view.payout - trade.amount
    page = client.get(f"/decisions/{trade.decision_id}/").content.decode()
    assert settlement.get_kind_display() in page and 'id="decision-trades"' in page


def test_a_forced_hold_is_told_from_a_chosen_one_and_links_name_the_decision():
    from web.decision_words import action_label, decision_link_text

    assert action_label("HOLD", "the answer was not JSON") == "forced HOLD"
    assert action_label("HOLD", "") == "chosen HOLD" and action_label("BUY", "") == "BUY"
    assert decision_link_text(2, "HOLD", "no JSON", "Done") == "week 2: forced HOLD"
    assert decision_link_text(3, "", "", "Failed") == "week 3: failed"


@pytest.mark.django_db
def test_the_live_page_says_why_markets_are_missing_while_the_sync_fails(client):
    from datetime import timedelta

    from core import clock
    from core.models import JobRun

    now = clock.now()
    runs = [
        (JobRun.Status.FAILED, now - timedelta(hours=3), "an old failure, before the success"),
        (JobRun.Status.OK, now - timedelta(hours=2), ""),
        (JobRun.Status.FAILED, now - timedelta(minutes=30), "timed out"),
        (JobRun.Status.FAILED, now - timedelta(minutes=15), "HTTP 502 <from> gamma"),
        (JobRun.Status.RUNNING, now - timedelta(minutes=1), ""),
    ]
    for status, at, error in runs:
        JobRun.objects.create(job="sync", status=status, started_at=at, finished_at=at, error=error)
    page = client.get("/?scope=live").content.decode()
    status = page[page.index('id="sync-status"') :].split("</p>", 1)[0]
    assert "has failed 2 times since it last succeeded (it is running again now)" in status
    assert f"Last failure at {now - timedelta(minutes=15):%Y-%m-%d %H:%M} UTC" in status
    assert "HTTP 502 &lt;from&gt; gamma" in status and "<from>" not in status


def test_the_home_header_counts_what_the_rows_count(demo, client):
    """The scope's header, in words, counts the markets and forecasts its rows are scored on: a
    forecast is one question (a decision's probabilities for one market), so the rows' own
    counts add up to it."""
    run = latest_run("demo")
    assert run is not None
    rows = LeaderboardRow.objects.filter(run=run, cohort__isnull=True)
    cohorts = Cohort.objects.filter(kind="demo")
    by = {"created_at__lte": run.as_of, "decision__entry__cohort__in": cohorts}
    markets = set(Forecast.objects.filter(**by).values_list("market_id", flat=True))
    by = {"opened_at__lte": run.as_of, "entry__cohort__in": cohorts}
    markets |= set(Position.objects.filter(**by).values_list("market_id", flat=True))
    by = {"frozen_at__lte": run.as_of, "cohort__in": cohorts}
    for sample in Universe.objects.filter(**by).values_list("forecast_sample", flat=True):
        markets |= {int(m) for m in sample}
    resolved = Market.objects.filter(pk__in=markets, status=Market.Status.RESOLVED).count()
    common = {r.details["common"]["questions"] for r in rows}
    assert len(common) == 1 and resolved > 0
    page = client.get("/?scope=demo").content.decode()
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    expected = (
        f"{cohorts.count()} cohorts · {len(markets):,} markets asked, forecast or traded, "
        f"{resolved:,} resolved · {rows.count()} competitors · "
        f"{sum(r.n_forecasts for r in rows):,} forecasts (one competitor's probabilities for one "
        f"market at one decision), {sum(r.n_resolved for r in rows):,} of them on resolved "
        f"markets · {common.pop():,} common questions"
    )
    assert expected in text, text[:3000]
