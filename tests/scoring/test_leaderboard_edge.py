"""A seeded scenario: a forecaster who knows the true probabilities against a noisy market
is labelled GENUINE_EDGE and wins the Diebold-Mariano test; a market copier has NO_EDGE."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest
from scipy.special import expit, logit

from markets.models import Market, PricePoint
from scoring.paper import _within_budget
from scoring.services import compute_scores
from tests.factories import make_cohort_with_entries, make_competitor, make_market
from tests.scoring.conftest import WEEK_START, add_buy, add_forecasts, make_decision

pytestmark = pytest.mark.django_db

AT = WEEK_START + timedelta(hours=1)
CLOSE = WEEK_START + timedelta(days=5)
# The closing line is read a sealed horizon (24 h) before the close: a day and a half before it
# the market has (almost) caught up with the truth, and the outcome is not public yet.
LINE = CLOSE - timedelta(hours=36)
N = 300


@pytest.fixture
def scenario():
    rng = np.random.default_rng(20261101)
    oracle, copier = make_competitor("oracle"), make_competitor("copier")
    cohort, (eo, ec) = make_cohort_with_entries(
        week_start=WEEK_START, competitors=[oracle, copier], at=WEEK_START
    )
    truth = rng.uniform(0.05, 0.95, N)
    outcomes = rng.random(N) < truth
    # The market at decision time is the truth plus noise in log-odds; by the close it has
    # (almost) caught up with the truth, which is what a real informational edge looks like.
    shown = np.round(np.clip(expit(logit(truth) + rng.normal(0, 1.0, N)), 0.02, 0.98), 3)
    closing = np.round(np.clip(expit(logit(truth) + rng.normal(0, 0.1, N)), 0.02, 0.98), 3)
    markets = [
        make_market(
            prices={"Yes": str(c), "No": str(round(1 - c, 3))},
            status=Market.Status.RESOLVED,
            resolved_outcome="Yes" if o else "No",
            resolved_at=CLOSE,
            closed_time=CLOSE,
            close_time=CLOSE,
            open_time=WEEK_START,
        )
        for c, o in zip(closing, outcomes)
    ]
    PricePoint.objects.bulk_create(
        PricePoint(market=m, outcome="Yes", ts=ts, price=Decimal(str(price)))
        for m, s, c, o in zip(markets, shown, closing, outcomes)
        for ts, price in ((AT, s), (LINE, c), (CLOSE - timedelta(hours=1), 0.99 if o else 0.01))
    )
    do, dc = make_decision(eo, at=AT), make_decision(ec, at=AT)
    add_forecasts(do, [(m, "Yes", float(q), float(s)) for m, q, s in zip(markets, truth, shown)])
    add_forecasts(dc, [(m, "Yes", float(s), float(s)) for m, s in zip(markets, shown)])
    for m, q, s in zip(markets, truth, shown):
        if abs(q - s) >= 0.05:  # the oracle bets $50 on the side the truth favours
            side, price = ("Yes", s) if q > s else ("No", round(1 - s, 3))
            add_buy(eo, do, m, side, 50, price, AT)
    return {"oracle": oracle, "copier": copier, "cohort": cohort}


def test_oracle_has_genuine_edge_and_wins_dm(scenario):
    run = compute_scores("live", as_of=CLOSE + timedelta(days=1))
    oracle = run.rows.get(competitor=scenario["oracle"], cohort=None)
    copier = run.rows.get(competitor=scenario["copier"], cohort=None)
    assert oracle.details["edge_label"] == "GENUINE_EDGE"
    assert oracle.details["clv"]["mean_prob"] > 0
    assert copier.details["edge_label"] is None  # it made no trade: n/a, not "no edge"
    assert copier.details["clv"] == {"n": 0, "label": None, "flag": "no_closing_line"}
    assert copier.skill_vs_market == pytest.approx(0.0, abs=1e-12)  # copying scores exactly 0
    assert oracle.skill_vs_market > 0 and oracle.skill_lo > 0  # CI excludes zero
    assert oracle.rank == 1
    for loss in ("brier", "log"):
        (pair,) = run.details["dm"]["all"][loss]
        better = pair["a"] if pair["verdict"] == "a_better" else pair["b"]
        assert pair["verdict"] != "no_difference" and better == "oracle"
    info = oracle.details["information_test"]["opening"]
    assert info["ok"] and info["lr_p"] < 0.001
    assert copier.details["information_test"]["opening"]["flag"] == "collinear"


def test_tournament_and_champions_clothes(scenario):
    run = compute_scores("live", as_of=CLOSE + timedelta(days=1))
    table = {r["competitor"]: r for r in run.details["tournament"]["all"]["rows"]}
    assert table["oracle"]["take"] > table["copier"]["take"]
    # Against the price it was shown the copier scores exactly 0: its take is its coverage.
    assert table["copier"]["score"] == pytest.approx(0.0, abs=1e-12)
    assert table["copier"]["take"] == pytest.approx(table["copier"]["coverage"])
    assert table["oracle"]["prize_share"] + table["copier"]["prize_share"] == pytest.approx(1.0)
    assert table["oracle"]["coverage"] == pytest.approx(table["copier"]["coverage"])
    oracle = run.rows.get(competitor=scenario["oracle"], cohort=None).details
    copier = run.rows.get(competitor=scenario["copier"], cohort=None).details
    assert copier["champions_clothes"]["paper_bets"] == 0  # no edge over the price, no bets
    assert copier["champions_clothes"]["paper_pnl"] == 0
    assert oracle["champions_clothes"]["paper_bets"] > 0
    assert oracle["champions_clothes"]["paper_clv_mean"] > 0


def test_clv_uses_the_line_a_horizon_before_close_complement_and_devig(client):
    dana, eve, finn, gil = (make_competitor(s) for s in ("dana", "eve", "finn", "gil"))
    _, (ed, ee, ef, eg) = make_cohort_with_entries(
        week_start=WEEK_START, competitors=[dana, eve, finn, gil], at=WEEK_START
    )
    yes_no = make_market(closed_time=CLOSE, close_time=CLOSE, status=Market.Status.CLOSED)
    # The anchor is the close; the line is the last point at or before CLOSE - 24 h: 0.7.
    # Later points (0.9 a few hours before the close, 0.95 at it) are when the outcome was
    # becoming public, which v1's "last point before the close" took as the line.
    for ts, price in ((AT, 0.5), (CLOSE - timedelta(hours=30), 0.6), (CLOSE - timedelta(hours=24), 0.7),
                      (CLOSE - timedelta(hours=3), 0.9), (CLOSE, 0.95)):  # fmt: skip
        PricePoint.objects.create(market=yes_no, outcome="Yes", ts=ts, price=Decimal(str(price)))
    abc = make_market(outcomes=["A", "B", "C"], closed_time=CLOSE, status=Market.Status.CLOSED)
    for outcome, price in (("A", "0.5"), ("B", "0.4"), ("C", "0.3")):  # quotes sum to 1.2
        PricePoint.objects.create(market=abc, outcome=outcome, ts=AT + timedelta(hours=1), price=Decimal(price))  # fmt: skip
    add_buy(ed, make_decision(ed, at=AT), yes_no, "Yes", 50, "0.5", AT)
    add_buy(ee, make_decision(ee, at=AT), yes_no, "No", 50, "0.4", AT)
    add_buy(ef, make_decision(ef, at=AT), abc, "A", 50, "0.25", AT)
    # Gil buys after the line was drawn: no closing line for him (n/a, never 0).
    late = CLOSE - timedelta(hours=20)
    add_buy(eg, make_decision(eg, at=late), yes_no, "Yes", 50, "0.8", late)
    run = compute_scores("live", as_of=CLOSE + timedelta(days=1))
    clv = {r.competitor.slug: r.details["clv"] for r in run.rows.filter(cohort=None)}
    assert clv["dana"]["mean_prob"] == pytest.approx(0.7 - 0.5)
    assert clv["dana"]["mean_logodds"] == pytest.approx(logit(0.7) - logit(0.5))
    assert clv["eve"]["mean_prob"] == pytest.approx((1 - 0.7) - 0.4)  # NO: complement of YES
    assert clv["finn"]["mean_prob"] == pytest.approx(0.5 / 1.2 - 0.25)  # de-vigged
    # Too few trades to test: its own state, never "no edge" (methodology v5).
    assert clv["dana"]["label"] == "NOT_TESTED" and clv["dana"]["flag"] == "too_few"
    assert clv["gil"] == {"n": 0, "label": None, "flag": "no_closing_line"}
    # The API says so in its own fields: not tested, why, and no adjusted p.
    api = {r["competitor"]: r for r in client.get("/api/leaderboard?scope=live").json()["rows"]}
    assert api["dana"]["edge_label"] == "NOT_TESTED"
    assert api["dana"]["edge_untested_reason"] == "too_few" and api["dana"]["edge_trades"] == 1
    assert api["dana"]["edge_p_holm"] is None
    assert api["gil"]["edge_label"] is None and api["gil"]["edge_untested_reason"] is None
    # Each BUY's CLV is kept on record in both forms, with the closing price used.
    from scoring.models import TradeCLV

    stored = {t.trade.entry_id: t for t in TradeCLV.objects.select_related("trade")}
    assert stored[ed.pk].close_price == pytest.approx(0.7)
    assert stored[ed.pk].clv_logodds == pytest.approx(logit(0.7) - logit(0.5))
    assert stored[ee.pk].clv_prob == pytest.approx((1 - 0.7) - 0.4)
    assert stored[ef.pk].close_price == pytest.approx(0.5 / 1.2)
    assert not TradeCLV.objects.filter(trade__entry=eg).exists()
    # A second run rewrites the same rows rather than adding more; a stale record of a trade
    # that has no closing line any more is removed.
    gil_trade = eg.trades.get()
    TradeCLV.objects.create(trade=gil_trade, close_price=0.8, clv_prob=0.0, clv_logodds=0.0)
    compute_scores("live", as_of=CLOSE + timedelta(days=2))
    assert TradeCLV.objects.count() == 3


@pytest.mark.parametrize(
    ("stakes", "expected"),
    [
        ([1000.0, 900.0, 700.0, 30.0], [1000.0, 900.0, 600.0, 0.0]),  # the last legal one is cut
        ([40.0, 3000.0, 800.0], [0.0, 2500.0, 0.0]),  # one big edge takes the whole budget
        ([700.0, 1000.0, 900.0, 780.0], [0.0, 1000.0, 900.0, 600.0]),  # largest edges first
        ([1200.0, 1260.0, 100.0], [1200.0, 1260.0, 0.0]),  # $40 left is under min_bet
    ],
)
def test_paper_stakes_fit_the_25_percent_budget(stakes, expected):
    amounts = _within_budget(np.asarray(stakes), budget=2500.0, min_bet=50.0)
    assert amounts.tolist() == expected
    assert amounts.sum() <= 2500.0
