"""Tournament scoring (Metaculus 2022 style, market as community) and the standard Kelly layer."""

import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.methodology import CONSTANTS as C
from scoring import metrics

FAST = settings(max_examples=40, deadline=None)


# --- Tournament -------------------------------------------------------------------------------


def _score(**kw):
    defaults = {"market_times": [0.0], "market_p": [0.5], "outcome": 1, "open_time": 0.0}
    return metrics.tournament_question_score(**(defaults | kw))


def test_constant_forecast_over_the_whole_life_scores_its_relative_log_score():
    r = _score(forecast_times=[0.0], forecast_p=[0.8], close_time=100.0)
    assert r["score"] == pytest.approx(math.log(0.8 / 0.5))
    assert r["coverage"] == pytest.approx(1.0)


def test_late_forecast_scores_zero_before_it_and_loses_coverage():
    r = _score(forecast_times=[75.0], forecast_p=[0.8], close_time=100.0)
    assert r["score"] == pytest.approx(0.25 * math.log(0.8 / 0.5))
    assert r["coverage"] == pytest.approx(0.25)


def test_early_resolution_counts_as_zero_for_the_rest_of_the_scheduled_life():
    r = _score(forecast_times=[0.0], forecast_p=[0.8], close_time=100.0, resolve_time=40.0)
    assert r["score"] == pytest.approx(0.4 * math.log(0.8 / 0.5))
    # Active for the whole actual life, but that is 40% of the scheduled life (Metaculus).
    assert r["coverage"] == pytest.approx(0.4)


def test_coverage_is_over_the_scheduled_life_metaculus_q3():
    # The Q3 case: the first forecast comes a quarter into the question's scheduled
    # life and the question resolves early, three quarters in. Metaculus counts the share of the
    # scheduled life with a standing forecast, (75 - 25) / 100 = 0.50, not the share of the
    # actual life, (75 - 25) / 75 = 0.667.
    r = _score(forecast_times=[25.0], forecast_p=[0.8], close_time=100.0, resolve_time=75.0)
    assert r["coverage"] == pytest.approx(0.50)
    assert r["score"] == pytest.approx(0.50 * math.log(0.8 / 0.5))


def test_forecast_and_market_changes_are_carried_forward():
    r = _score(
        forecast_times=[10.0, 60.0],
        forecast_p=[0.7, 0.2],
        market_times=[0.0, 30.0],
        market_p=[0.5, 0.6],
        outcome=0,
        close_time=100.0,
    )
    expected = (
        20 * math.log(0.3 / 0.5)  # 10..30: p 0.7, m 0.5, outcome NO
        + 30 * math.log(0.3 / 0.4)  # 30..60: m moved to 0.6
        + 40 * math.log(0.8 / 0.4)  # 60..100: p changed to 0.2
    ) / 100
    assert r["score"] == pytest.approx(expected)
    assert r["coverage"] == pytest.approx(0.9)


def test_forecasts_outside_the_life_and_empty_inputs():
    assert _score(forecast_times=[120.0], forecast_p=[0.9], close_time=100.0) == {
        "score": 0.0,
        "coverage": 0.0,
    }
    assert _score(forecast_times=[], forecast_p=[], close_time=100.0)["coverage"] == 0.0
    early = _score(forecast_times=[-50.0], forecast_p=[0.9], close_time=100.0)
    assert early["coverage"] == pytest.approx(1.0)  # made before opening: active from the open


@st.composite
def question_histories(draw):
    close = draw(st.integers(5, 60))
    n_f = draw(st.integers(1, 5))
    n_m = draw(st.integers(1, 5))
    ft = draw(st.lists(st.integers(0, close + 5), min_size=n_f, max_size=n_f))
    mt = draw(st.lists(st.integers(0, close), min_size=n_m, max_size=n_m))
    fp = draw(st.lists(st.floats(0.0, 1.0), min_size=n_f, max_size=n_f))
    mp = draw(st.lists(st.floats(0.01, 0.99), min_size=n_m, max_size=n_m))
    resolve = draw(st.one_of(st.none(), st.integers(1, close)))
    return ft, fp, mt, mp, draw(st.integers(0, 1)), close, resolve


@FAST
@given(question_histories())
def test_tournament_score_matches_brute_force_integration(history):
    ft, fp, mt, mp, outcome, close, resolve = history
    r = metrics.tournament_question_score(ft, fp, mt, mp, outcome, 0, close, resolve)
    # Change points sit on integers, so midpoints of 0.01-wide cells integrate exactly.
    grid = np.arange(0, close, 0.01) + 0.005
    end = close if resolve is None else resolve
    fo, mo = np.argsort(ft, kind="stable"), np.argsort(mt, kind="stable")
    ft_s, fp_s = np.asarray(ft, float)[fo], np.asarray(fp)[fo]
    mt_s, mp_s = np.asarray(mt, float)[mo], np.asarray(mp)[mo]
    active = (grid >= ft_s[0]) & (grid < end)
    p = fp_s[np.clip(np.searchsorted(ft_s, grid, side="right") - 1, 0, None)]
    m = mp_s[np.clip(np.searchsorted(mt_s, grid, side="right") - 1, 0, None)]
    p_out, m_out = (p, m) if outcome == 1 else (1 - p, 1 - m)
    eps = C.log_eps
    integrand = np.log(np.clip(p_out, eps, 1 - eps)) - np.log(np.clip(m_out, eps, 1 - eps))
    total, active = np.sum(np.where(active, integrand, 0.0)), active.sum()
    assert r["score"] == pytest.approx(total / grid.size, abs=1e-9)
    assert r["coverage"] == pytest.approx(active / grid.size, abs=1e-9)  # scheduled life


def test_takes_and_prize_shares():
    scores = np.array([[0.2, 0.1], [0.0, np.nan], [-0.5, 0.3]])
    covers = np.array([[1.0, 0.5], [1.0, np.nan], [0.8, 1.0]])
    takes = metrics.tournament_takes(scores, covers)
    np.testing.assert_allclose(takes, [0.75 * math.exp(0.3), 0.5 * 1.0, 0.9 * math.exp(-0.2)])
    shares = metrics.prize_shares(takes)
    assert shares.sum() == pytest.approx(1.0)
    assert shares[0] > shares[2] > shares[1]
    assert metrics.prize_shares([0.0, 0.0]).tolist() == [0.0, 0.0]


# --- Standard trading layer -------------------------------------------------------------------


def test_kelly_worked_examples():
    yes, no, small, edge, multi_small, multi_short = metrics.kelly_stake(
        [0.60, 0.30, 0.52, 0.53, 0.54, 0.40],
        [0.50, 0.50, 0.50, 0.50, 0.50, 0.50],
        Decimal("4000.00"),
        multi=[False, False, False, False, True, True],
    )
    # p = 0.6 at 0.5: full Kelly (0.6 - 0.5) / 0.5 = 20%, a quarter of it = 5% of $4,000.
    assert (yes.side, yes.kelly, yes.stake) == ("YES", pytest.approx(0.2), Decimal("200.00"))
    # p = 0.3: buy NO at 0.5 believing 0.7: Kelly 40%, stake 10%.
    assert (no.side, no.p, no.stake) == ("NO", pytest.approx(0.7), Decimal("400.00"))
    assert small.reason == "below_edge" and small.stake == Decimal("0.00")
    assert edge.reason == "bet"  # exactly the 3% binary threshold
    assert multi_small.reason == "below_edge"  # multi-outcome needs 5%
    assert multi_short.reason == "no_edge" and multi_short.side is None  # no NO side there
    # The decision's stakes (200 + 400 + 60) are below 25% of the cash: no scaling.
    assert edge.stake == Decimal("60.00")


def test_kelly_respects_min_bet():
    (bet,) = metrics.kelly_stake([0.6], [0.5], 1000)  # 5% of $1,000 = $50, exactly the minimum
    assert bet.reason == "bet" and bet.stake == Decimal(C.min_bet)
    (bet,) = metrics.kelly_stake([0.6], [0.5], 900)
    assert bet.reason == "below_min_bet" and bet.stake == Decimal("0.00")


def test_kelly_scales_a_decision_down_to_the_cap():
    bets = metrics.kelly_stake([0.95] * 4, [0.2, 0.3, 0.4, 0.5], Decimal("10000"))
    stakes = [b.stake for b in bets]
    assert sum(stakes) <= Decimal("2500.00")
    assert sum(stakes) >= Decimal("2499.96")  # only cents lost to rounding down
    full = [b.kelly for b in bets]
    # Proportional scaling keeps the Kelly ordering and ratios.
    assert float(stakes[0] / stakes[3]) == pytest.approx(full[0] / full[3], rel=1e-3)


def test_kelly_refuses_impossible_prices():
    bets = metrics.kelly_stake([0.9, 0.9, np.nan], [0.0, 1.0, 0.5], 10_000)
    assert [b.reason for b in bets] == ["bad_price", "bad_price", "bad_price"]


@FAST
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(0.01, 0.99), st.booleans()), min_size=1, max_size=12
    ),
    st.integers(0, 50_000),
)
def test_kelly_invariants(candidates, cash):
    p, price, multi = map(list, zip(*candidates))
    bets = metrics.kelly_stake(p, price, Decimal(cash), multi=multi)
    assert len(bets) == len(candidates)
    total = sum(b.stake for b in bets)
    assert total <= Decimal(str(C.max_bet_fraction)) * cash
    for b, is_multi in zip(bets, multi):
        if b.reason == "bet":
            threshold = C.edge_threshold_multi if is_multi else C.edge_threshold_binary
            assert b.stake >= Decimal(C.min_bet)
            assert b.edge >= threshold - 1e-9
            assert b.stake == b.stake.quantize(Decimal("0.01"))
            assert not (is_multi and b.side == "NO")
        else:
            assert b.stake == 0
