"""Baselines: through the same pipeline as the models, within the rules, reproducible."""

import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import baselines
from agents.baselines import BaselineInput
from agents.parsing import parse_decision
from agents.prompts import MAX_FRACTION, MIN_BET, decision_context
from cohorts.decisions.run import decide
from cohorts.models import Decision, Forecast, Trade
from cohorts.universe import freeze_universe
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets

STRATEGIES = ["market", "cash", "random", "favorite", "longshot-fader"]


def items(n: int = 60) -> list[dict]:
    """Universe items without a database: prices spread over (0, 1), some longshots."""
    out = []
    for i in range(1, n + 1):
        yes = Decimal(3 + (i * 37) % 94) / 100
        out.append(
            {
                "market_id": i,
                "question": f"Q{i}",
                "rules": "",
                "outcomes": ["Yes", "No"],
                "prices": {"Yes": str(yes), "No": str(1 - yes)},
                "volume": "1000",
                "close_time": None,
                "days_to_close": None,
            }
        )
    return out


def inp(strategy: str, cash: Decimal = Decimal("10000"), entry_id: int = 1, **kw) -> BaselineInput:
    markets = kw.pop("markets", None) or items()
    return BaselineInput(
        strategy=strategy,
        cohort_id=kw.pop("cohort_id", 7),
        week=kw.pop("week", 1),
        entry_id=entry_id,
        cash=cash,
        markets=markets,
        forecast_sample=kw.pop("sample", [m["market_id"] for m in markets[::3]]),
    )


class _Universe:
    """Just what decision_context reads."""

    def __init__(self, markets, sample):
        self.markets, self.forecast_sample = markets, sample


def parsed(i: BaselineInput):
    ctx = decision_context(_Universe(i.markets, i.forecast_sample), [])
    return parse_decision(baselines.decide(i), ctx)


def assert_within_rules(decision, cash: Decimal) -> None:
    total = sum((b.amount for b in decision.bets), Decimal(0))
    assert total <= (cash * MAX_FRACTION).quantize(Decimal("0.01"))
    assert all(b.amount >= MIN_BET for b in decision.bets)
    assert all(0 <= f.probability <= 1 for f in decision.forecasts)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_answers_validly_and_covers_the_sample(strategy):
    i = inp(strategy)
    decision = parsed(i)  # raises DecisionValidationError if not
    assert_within_rules(decision, i.cash)
    assert {f.market_id for f in decision.forecasts} >= {str(m) for m in i.forecast_sample}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_same_seed_same_decision_other_entry_may_differ(strategy):
    assert baselines.decide(inp(strategy)) == baselines.decide(inp(strategy))


def test_random_replicates_differ():
    answers = {baselines.decide(inp("random", entry_id=e)) for e in range(1, 6)}
    assert len(answers) > 1


@pytest.mark.parametrize("strategy", ["market", "cash"])
def test_market_and_cash_never_bet_and_state_the_price(strategy):
    i = inp(strategy)
    decision = parsed(i)
    assert decision.action == "HOLD" and not decision.bets
    prices = {str(m["market_id"]): m["prices"] for m in i.markets}
    for f in decision.forecasts:
        assert f.probability == float(prices[f.market_id][f.outcome])


def test_favorite_backs_the_side_above_one_half_with_a_margin():
    i = inp("favorite")
    decision = parsed(i)
    prices = {str(m["market_id"]): m["prices"] for m in i.markets}
    assert decision.action == "BET" and len(decision.bets) == baselines.FAVORITE_BETS
    for b in decision.bets:
        price = Decimal(prices[b.market_id][b.outcome])
        assert price > Decimal("0.5")
        expected = min(price + baselines.FAVORITE_MARGIN, baselines.PROB_CEIL)
        assert b.probability == pytest.approx(float(expected))


def test_longshot_fader_backs_the_complement_of_longshots():
    i = inp("longshot-fader")
    decision = parsed(i)
    prices = {str(m["market_id"]): m["prices"] for m in i.markets}
    assert decision.bets
    for b in decision.bets:
        other = "No" if b.outcome == "Yes" else "Yes"
        assert Decimal(prices[b.market_id][other]) < baselines.LONGSHOT_PRICE
        assert b.probability > float(prices[b.market_id][b.outcome])


@pytest.mark.parametrize("strategy", ["random", "favorite", "longshot-fader"])
def test_too_little_cash_to_bet_means_hold(strategy):
    decision = parsed(inp(strategy, cash=Decimal("150")))  # 25% = 37.50 < the $50 minimum
    assert decision.action == "HOLD" and not decision.bets


@settings(max_examples=50, deadline=None)
@given(
    cash=st.decimals(min_value=0, max_value=100000, places=2),
    cohort_id=st.integers(1, 10_000),
    week=st.integers(1, 5),
    entry_id=st.integers(1, 10_000),
)
def test_random_stakes_always_within_the_rules(cash, cohort_id, week, entry_id):
    i = inp("random", cash=cash, entry_id=entry_id, cohort_id=cohort_id, week=week)
    assert_within_rules(parsed(i), cash)


@pytest.mark.django_db
def test_baselines_decide_through_the_pipeline_and_trades_respect_the_rules():
    make_markets(80)
    competitors = [baseline_competitor(s) for s in STRATEGIES]
    cohort = make_cohort(competitors)

    decide(cohort=cohort, at=AT, sync=True)

    universe = freeze_universe(cohort, 1, AT)
    for decision in Decision.objects.filter(entry__cohort=cohort).select_related(
        "entry__competitor"
    ):
        strategy = decision.entry.competitor.strategy
        assert decision.status == "done", (strategy, decision.error)
        assert decision.validation_errors == []
        call = decision.llm_calls.get()
        assert call.url == f"builtin:baseline/{strategy}"
        assert json.loads(call.raw_response)["action"] == decision.action
        trades = Trade.objects.filter(decision=decision)
        spent = sum((t.amount for t in trades), Decimal(0))
        assert spent <= decision.cash_before * MAX_FRACTION
        assert all(t.amount >= MIN_BET for t in trades)
        if strategy in ("market", "cash"):
            assert not trades.exists()
        sampled = set(
            Forecast.objects.filter(decision=decision).values_list("market_id", flat=True)
        )
        assert sampled >= set(universe.forecast_sample)
