"""Parsing Gamma market objects: every wire trap of EXTERNAL_APIS §0/§1.5."""

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markets.gamma import MarketParseError, parse_market, parse_price, parse_when
from tests.fakes.gamma_server import (
    example_legacy_zero,
    example_open_binary,
    example_resolved_binary,
    make_market,
    neg_risk_event,
    team_names_market,
    up_down_market,
)


def test_example_open_binary_fields():
    p = parse_market(example_open_binary())
    assert p.external_id == "516706"
    assert p.outcomes == ["Yes", "No"]  # JSON inside a string
    assert p.prices == [Decimal("0.0025"), Decimal("0.9975")]
    assert p.token_ids[0].startswith("6048711698446802097") and len(p.token_ids[0]) == 77
    assert p.volume == Decimal("1089143.41")  # from volumeNum, rounded to cents
    assert p.liquidity == Decimal("51025.14")
    assert (p.best_bid, p.best_ask) == (Decimal("0.002"), Decimal("0.003"))
    assert p.close_time == datetime(2025, 12, 10, 12, tzinfo=UTC)
    assert p.open_time == datetime(2024, 12, 29, 22, 50, 33, 584839, tzinfo=UTC)
    assert p.closed_time is None and not p.closed and p.uma_status == ""
    assert (p.event_slug, p.event_title) == ("fed-rate-hike-in-2025", "Fed rate hike in 2025?")
    assert p.tags == ["Fed Rates", "Politics"] and p.category == "Fed Rates"
    assert p.is_binary and not p.neg_risk


def test_resolved_example_closed_time_and_lagging_history():
    p = parse_market(example_resolved_binary())
    assert p.closed and p.uma_status == "resolved"
    assert p.closed_time == datetime(2025, 11, 1, 6, 28, 8, tzinfo=UTC)  # "2025-11-01 06:28:08+00"
    assert p.uma_end_date == datetime(2025, 11, 1, 6, 28, 8, tzinfo=UTC)
    assert p.uma_statuses == ["proposed"]
    assert p.prices == [Decimal(0), Decimal(1)]
    assert p.best_bid is None and p.best_ask == Decimal("0.001")  # bestBid omitted upstream
    assert p.event_slug == "" and p.tags == []  # no events/tags in this payload


def test_volume_string_used_when_number_missing():
    raw = make_market("1")
    del raw["volumeNum"]
    raw["volume"] = "8580.893536999998"
    assert parse_market(raw).volume == Decimal("8580.89")


def test_omitted_fields_get_defaults():
    raw = {"id": "5", "question": "Bare?", "outcomes": '["Yes", "No"]'}
    p = parse_market(raw)
    assert p.prices is None and p.price_error == ""
    assert p.volume == 0 and p.close_time is None and p.token_ids == [] and not p.closed


def test_unknown_fields_are_ignored():
    raw = make_market("1", someFieldFrom2027={"nested": [1, 2]}, anotherFlag=True)
    assert parse_market(raw).external_id == "1"


def test_numeric_id_is_accepted():
    raw = make_market("1")
    raw["id"] = 17
    assert parse_market(raw).external_id == "17"


def test_neg_risk_leg():
    leg = neg_risk_event(resolved=False)[1]
    p = parse_market(leg)
    assert p.neg_risk and p.neg_risk_market_id.endswith("00")
    assert (p.group_item_title, p.group_item_threshold) == ("32-33°F", 3)
    assert p.event_slug == "highest-temperature-in-nyc-on-december-30"


@pytest.mark.parametrize("factory", [up_down_market, team_names_market])
def test_named_binary_outcomes_keep_their_order(factory):
    raw = factory()
    p = parse_market(raw)
    assert p.is_binary and p.outcomes == json.loads(raw["outcomes"])


@pytest.mark.parametrize(
    "when, expected",
    [
        ("2025-11-01 06:28:08+00", datetime(2025, 11, 1, 6, 28, 8, tzinfo=UTC)),
        ("2025-12-31T09:12:59Z", datetime(2025, 12, 31, 9, 12, 59, tzinfo=UTC)),
        ("2024-12-29T22:50:33.584839Z", datetime(2024, 12, 29, 22, 50, 33, 584839, tzinfo=UTC)),
        ("2026-06-09 15:00:00+02:00", datetime(2026, 6, 9, 13, tzinfo=UTC)),
        ("2025-12-10", datetime(2025, 12, 10, tzinfo=UTC)),
    ],
)
def test_timestamp_forms(when, expected):
    assert parse_when(when) == expected


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"outcomes": ["Yes", "No"]}, None),  # a real list is fine too
        ({"outcomes": "Yes, No"}, "not JSON"),
        ({"outcomes": '["Yes"]'}, "at least 2"),
        ({"outcomes": '["Yes", "Yes"]'}, "distinct"),
        ({"outcomes": "[1, 2]"}, "list of strings"),
        ({"clobTokenIds": '["1"]'}, "differ in length"),
        ({"id": ""}, "id is missing"),
        ({"question": None}, "question is missing"),
        ({"volumeNum": "lots"}, "not a number"),
        ({"volumeNum": float("nan")}, "out of range"),
        ({"volumeNum": -5}, "out of range"),
        ({"closedTime": "yesterday"}, "not a timestamp"),
        ({"endDate": 1700000000}, "not a timestamp string"),
        ({"closed": "true"}, "not a boolean"),
        ({"conditionId": "0x" + "a" * 200}, "longer than"),
    ],
)
def test_malformed_values(changes, message):
    raw = make_market("1")
    raw.update(changes)
    if message is None:
        parse_market(raw)
        return
    with pytest.raises(MarketParseError, match=message):
        parse_market(raw)


def test_not_an_object():
    with pytest.raises(MarketParseError):
        parse_market(["not", "a", "market"])


@pytest.mark.parametrize(
    "prices, why",
    [
        ('["NaN", "0.5"]', "outside"),
        ('["Infinity", "0"]', "outside"),
        ('["1.5", "-0.5"]', "outside"),
        ('["abc", "0.5"]', "not a number"),
        ('["0.5"]', "does not match"),
        ("0.5,0.5", "not JSON"),
        ("[0.5,", "not JSON"),
        ("0.5", "does not match"),  # valid JSON, but a number rather than a list
        ('["0", "0"]', "add up to 1"),
        ('["0.9", "0.9"]', "add up to 1"),
        ("[true, false]", "not a number"),
    ],
)
def test_garbage_prices_are_rejected_but_market_kept(prices, why):
    p = parse_market(make_market("1", outcomePrices=prices))
    assert p.prices is None and why in p.price_error
    assert p.external_id == "1"  # the market itself is still usable


def test_legacy_zero_prices_parse_but_are_not_a_quote():
    p = parse_market(example_legacy_zero())
    assert p.outcome_prices == [Decimal(0), Decimal(0)]
    assert p.prices is None and "add up to 1" in p.price_error
    assert p.market_maker_address.startswith("0x8BD6") and p.category == "US-current-affairs"


def test_numbers_inside_prices_are_accepted():
    p = parse_market(make_market("1", outcomePrices="[0.25, 0.75]"))
    assert p.prices == [Decimal("0.25"), Decimal("0.75")]


def test_bad_bid_ask_are_dropped_not_fatal():
    p = parse_market(make_market("1", best_bid=0.6, best_ask=0.4))  # crossed
    assert p.best_bid is None and p.best_ask is None
    p = parse_market(make_market("1", bestBid="x", bestAsk=0.4))
    assert p.best_bid is None and p.best_ask is None and p.prices is not None


@settings(max_examples=50, deadline=None)
@given(
    st.one_of(
        st.text(max_size=12), st.floats(allow_nan=True), st.integers(), st.none(), st.booleans()
    )
)
def test_parse_price_only_ever_returns_a_probability(value):
    try:
        price = parse_price(value)
    except ValueError:
        return
    assert price.is_finite() and Decimal(0) <= price <= Decimal(1)
    assert price == price.quantize(Decimal("0.000001"))
