"""freeze_universe: the same markets, prices and order for every entry of a cohort week."""

from datetime import timedelta
from decimal import Decimal

import pytest

from cohorts.models import Cohort, Universe
from cohorts.universe import FORECAST_SAMPLE_SIZE, RULES_CHARS, content_hash, freeze_universe
from markets.models import Market
from tests.agents.helpers import AT, make_cohort, make_market, make_markets

pytestmark = pytest.mark.django_db


def test_top_open_markets_by_volume_of_the_cohort_source(settings):
    settings.ARENA_MARKETS_PER_PROMPT = 5
    make_markets(8)  # volumes descend with the number
    make_market(100, volume=10**9, status=Market.Status.CLOSED)
    make_market(101, volume=10**9, source=Market.Source.DEMO)
    make_market(102, volume=10**9, close_in_days=-1)  # past its close, not yet synced
    make_market(103, volume=10**9, prices={})  # no price: nothing to trade
    cohort = make_cohort([])

    universe = freeze_universe(cohort, 1, AT)

    questions = [item["question"] for item in universe.markets]
    assert questions == [f"Will event {n} happen?" for n in range(1, 6)]


def test_items_carry_what_a_forecaster_needs():
    market = make_market(1, yes="0.62")
    cohort = make_cohort([])

    item = freeze_universe(cohort, 1, AT).markets[0]

    assert item["market_id"] == market.pk
    assert item["outcomes"] == ["Yes", "No"]
    assert item["prices"] == {"Yes": "0.62", "No": "0.38"}  # side-correct complement
    assert item["volume"] == str(int(market.volume))
    assert item["close_time"] == market.close_time.isoformat()
    assert item["days_to_close"] == pytest.approx(30, abs=0.1)
    assert 0 < len(item["rules"]) <= RULES_CHARS
    assert item["rules"].startswith("Resolves Yes if event 1")


def test_frozen_once_later_price_changes_do_not_leak_in():
    make_markets(3)
    cohort = make_cohort([])
    first = freeze_universe(cohort, 1, AT)
    Market.objects.update(last_prices={"Yes": "0.99"})
    make_market(50, volume=10**9)

    again = freeze_universe(cohort, 1, AT + timedelta(hours=1))

    assert again.pk == first.pk
    assert again.markets == first.markets
    assert Universe.objects.count() == 1


def test_content_hash_covers_markets_and_sample():
    make_markets(3)
    universe = freeze_universe(make_cohort([]), 1, AT)
    assert universe.content_hash == content_hash(universe.markets, universe.forecast_sample)
    changed = [dict(universe.markets[0], prices={"Yes": "0.5", "No": "0.5"}), *universe.markets[1:]]
    assert content_hash(changed, universe.forecast_sample) != universe.content_hash


def test_forecast_sample_is_seeded_and_in_universe_order():
    make_markets(60)
    cohort = make_cohort([])
    week1 = freeze_universe(cohort, 1, AT)
    week2 = freeze_universe(cohort, 2, AT + timedelta(days=7))

    ids = [item["market_id"] for item in week1.markets]
    assert len(week1.forecast_sample) == FORECAST_SAMPLE_SIZE
    assert week1.forecast_sample == [m for m in ids if m in set(week1.forecast_sample)]
    assert week1.forecast_sample != week2.forecast_sample  # a new draw each week
    # Reproducible: the same seed inputs give the same sample.
    Universe.objects.filter(pk=week1.pk).delete()
    assert freeze_universe(cohort, 1, AT).forecast_sample == week1.forecast_sample


def test_replay_passes_explicit_markets_and_prices():
    a = make_market(1, source=Market.Source.FORECASTBENCH)
    b = make_market(2, source=Market.Source.FORECASTBENCH)
    make_market(3, source=Market.Source.FORECASTBENCH)
    cohort = make_cohort([], kind=Cohort.Kind.REPLAY)

    universe = freeze_universe(
        cohort, 1, AT, markets=[b, a], prices={a.pk: {"Yes": 0.2}, b.pk: {"Yes": "0.9"}}
    )

    assert [i["market_id"] for i in universe.markets] == [b.pk, a.pk]
    assert universe.markets[1]["prices"] == {"Yes": "0.2", "No": "0.8"}
    assert Decimal(universe.markets[0]["prices"]["No"]) == Decimal("0.1")


def test_replay_cohort_defaults_to_its_own_source():
    make_markets(2)
    replayed = make_market(9, source=Market.Source.FORECASTBENCH)
    cohort = make_cohort([], kind=Cohort.Kind.REPLAY)
    universe = freeze_universe(cohort, 1, AT)
    assert [i["market_id"] for i in universe.markets] == [replayed.pk]
