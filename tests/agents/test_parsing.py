"""The decision parser: JSON extraction from messy model output and strict validation."""

import json
import math
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.parsing import (
    MAX_REASONING_CHARS,
    Bet,
    DecisionContext,
    DecisionValidationError,
    Forecast,
    ParsedDecision,
    Sell,
    extract_json,
    parse_decision,
)

# A persona: the week's universe as shown to the model.
ELECTION = "101"  # Yes/No
RATES = "202"  # Yes/No
WINNER = "303"  # multi-outcome
PLAYOFF = "404"  # two outcomes, neither called Yes


def make_ctx(sample=(ELECTION,), positions=("p-7", "12")) -> DecisionContext:
    return DecisionContext(
        markets={
            ELECTION: ["Yes", "No"],
            RATES: ["Yes", "No"],
            WINNER: ["Alice", "Bob", "Carol"],
            PLAYOFF: ["Lakers", "Celtics"],
        },
        position_ids=set(positions),
        forecast_sample=list(sample),
    )


def bet(market=ELECTION, outcome="Yes", amount=50, probability=0.7) -> dict:
    return {"market_id": market, "outcome": outcome, "amount": amount, "probability": probability}


def decision(**fields) -> str:
    payload = {"action": "HOLD", "bets": [], "sells": [], "forecasts": [], "reasoning": "r"}
    payload.update(fields)
    return json.dumps(payload)


def problems_of(text: str, ctx: DecisionContext | None = None) -> list[str]:
    with pytest.raises(DecisionValidationError) as info:
        parse_decision(text, ctx or make_ctx())
    return info.value.problems


# --- extract_json ------------------------------------------------------------------------------


def test_extract_bare_object():
    assert extract_json('  {"a": 1}\n') == {"a": 1}


def test_extract_from_json_fence_with_prose():
    text = 'Here you go:\n```json\n{"action": "HOLD", "n": [1, 2]}\n```\nGood luck.'
    assert extract_json(text) == {"action": "HOLD", "n": [1, 2]}


def test_extract_from_unlabelled_fence():
    assert extract_json('```\n{"x": "y"}\n```') == {"x": "y"}


def test_extract_outermost_object_in_prose_with_stray_braces():
    obj = {"action": "BET", "bets": [{"market_id": "1"}], "reasoning": "a {nested} one"}
    text = f"I weigh {{carefully}} each market. Decision: {json.dumps(obj)} Done {{bye}}."
    assert extract_json(text) == obj


def test_braces_and_escaped_quotes_inside_strings_do_not_end_the_object():
    obj = {"reasoning": 'he said "}" and {not json} \\ ok', "k": {"deep": ["}"]}}
    text = "Answer: " + json.dumps(obj) + " trailing } brace"
    assert extract_json(text) == obj


def test_unclosed_brace_before_the_object_is_skipped():
    assert extract_json('Thinking { out loud... {"action": "HOLD"}') == {"action": "HOLD"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("[1, 2, 3]", "got an array"),
        ('"just a string"', "got a string"),
        ("42", "got a number"),
        ('```json\n[{"a": 1}]\n```', "got an array"),
        ("no json at all", "no JSON object"),
        ('{"action": "HOLD",}', "not valid JSON"),
        ('{"action": "HOLD"', "never closed"),
    ],
)
def test_extract_errors_are_clear(text, message):
    with pytest.raises(ValueError, match=message):
        extract_json(text)


def test_extract_survives_deep_nesting():
    with pytest.raises(ValueError):
        extract_json("[" * 100_000 + "]" * 100_000)


# --- a valid decision --------------------------------------------------------------------------


def test_bet_decision_is_parsed_and_normalised():
    text = decision(
        action="bet",
        bets=[bet(market=int(RATES), outcome="yes", amount="25.129", probability="0.4")],
        forecasts=[
            {"market_id": ELECTION, "probability": 0.55},
            {"market_id": WINNER, "outcome": " carol ", "probability": 0.2},
        ],
        reasoning="  Rates are likely to hold.  ",
    )

    parsed = parse_decision(text, make_ctx())

    assert parsed.action == "BET"
    assert parsed.bets == [Bet(RATES, "Yes", Decimal("25.12"), 0.4)]
    assert parsed.sells == []
    assert parsed.forecasts == [
        Forecast(ELECTION, "Yes", 0.55),  # outcome omitted on a Yes/No market means Yes
        Forecast(WINNER, "Carol", 0.2),
        Forecast(RATES, "Yes", 0.4),  # the bet's probability counts as a forecast
    ]
    assert parsed.reasoning == "Rates are likely to hold."


def test_sell_decision():
    text = decision(
        action="SELL",
        sells=[{"position_id": "p-7", "percentage": 50}, {"position_id": 12, "percentage": "100"}],
        forecasts=[{"market_id": ELECTION, "outcome": "NO", "probability": 0.3}],
    )

    parsed = parse_decision(text, make_ctx())

    assert parsed.action == "SELL"
    assert parsed.sells == [Sell("p-7", Decimal("50.00")), Sell("12", Decimal("100.00"))]
    assert parsed.forecasts == [Forecast(ELECTION, "No", 0.3)]


def test_forecast_without_outcome_on_a_two_outcome_market_without_yes_means_the_first():
    text = decision(forecasts=[{"market_id": PLAYOFF, "probability": 0.6}])

    parsed = parse_decision(text, make_ctx(sample=[PLAYOFF]))

    assert parsed.forecasts == [Forecast(PLAYOFF, "Lakers", 0.6)]


def test_action_is_derived_when_missing():
    ctx = make_ctx(sample=[])
    assert parse_decision(json.dumps({"bets": [bet()]}), ctx).action == "BET"
    sells = [{"position_id": "12", "percentage": 10}]
    assert parse_decision(json.dumps({"sells": sells}), ctx).action == "SELL"
    assert parse_decision("{}", ctx).action == "HOLD"


def test_to_json_round_trips_and_is_json_safe():
    text = decision(
        action="BET",
        bets=[bet(amount=10.5)],
        forecasts=[{"market_id": RATES, "probability": 0.1}],
    )
    parsed = parse_decision(text, make_ctx())

    stored = json.loads(json.dumps(parsed.to_json()))

    assert stored["bets"][0]["amount"] == "10.50"
    assert ParsedDecision.from_json(stored) == parsed


def test_reasoning_is_cut_to_the_maximum():
    parsed = parse_decision(decision(reasoning="x" * (MAX_REASONING_CHARS * 2)), make_ctx([]))
    assert len(parsed.reasoning) == MAX_REASONING_CHARS


# --- numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw_amount",
    ['"NaN"', "NaN", "Infinity", "-Infinity", "1e999", '"inf"', '"sNaN"'],
)
def test_non_finite_amounts_are_refused(raw_amount):
    text = '{"action": "BET", "bets": [{"market_id": "101", "outcome": "Yes", '
    text += f'"amount": {raw_amount}, "probability": 0.5}}]}}'

    problems = problems_of(text)

    assert any("bets[0]: amount must be a finite number" in p for p in problems)


def test_float_nan_amount_is_refused():
    problems = problems_of(decision(action="BET", bets=[bet(amount=math.nan)]))
    assert any("amount must be a finite number" in p for p in problems)


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        (-5, "amount must be positive"),
        (0, "amount must be positive"),
        ("0.00", "amount must be positive"),
        (0.004, "at least 0.01"),
        (True, "must be a number"),
        (False, "must be a number"),
        ("fifty", "must be a number"),
        ("$50", "must be a number"),
        ([50], "must be a number"),
        (None, "amount is missing"),
        (10**15, "too large"),
    ],
)
def test_bad_amounts_are_refused(amount, message):
    problems = problems_of(decision(action="BET", bets=[bet(amount=amount)]))
    assert any(p.startswith("bets[0]: amount") and message in p for p in problems), problems


@pytest.mark.parametrize("probability", [-0.01, 1.01, 62, "70%", True, math.inf, None])
def test_probability_outside_unit_interval_or_not_a_number_is_refused(probability):
    problems = problems_of(decision(action="BET", bets=[bet(probability=probability)]))
    assert any(p.startswith("bets[0]: probability") for p in problems), problems


@pytest.mark.parametrize("probability", [0, 1, "0.25"])
def test_probability_bounds_are_inclusive(probability):
    parsed = parse_decision(decision(action="BET", bets=[bet(probability=probability)]), make_ctx())
    assert parsed.bets[0].probability == float(probability)


@pytest.mark.parametrize("percentage", [0, -10, 100.5, "all", True])
def test_bad_sell_percentages_are_refused(percentage):
    sells = [{"position_id": "p-7", "percentage": percentage}]
    problems = problems_of(decision(action="SELL", sells=sells))
    assert any(p.startswith("sells[0]: percentage") for p in problems), problems


# --- ids, outcomes, structure ------------------------------------------------------------------


def test_unknown_market_outcome_and_position_are_each_reported():
    text = decision(
        action="BET",
        bets=[bet(market="999"), bet(market=ELECTION, outcome="Maybe"), bet(market=WINNER)],
        sells=[],
        forecasts=[{"market_id": WINNER, "probability": 0.4}],
    )

    problems = problems_of(text)

    assert 'bets[0]: unknown market_id "999"' in problems
    assert any(p.startswith('bets[1]: market 101 has no outcome "Maybe"') for p in problems)
    # "Yes" is not an outcome of a multi-outcome market, even though it is of others.
    assert any(p.startswith('bets[2]: market 303 has no outcome "Yes"') for p in problems)
    assert any(p.startswith("forecasts[0]: outcome is missing (market 303") for p in problems)


def test_unknown_position_id_is_refused():
    problems = problems_of(decision(action="SELL", sells=[{"position_id": "p-8", "percentage": 5}]))
    assert 'sells[0]: unknown position_id "p-8"' in problems


def test_missing_forecast_sample_entries_are_listed():
    ctx = make_ctx(sample=[ELECTION, RATES, WINNER])
    text = decision(action="BET", bets=[bet(market=RATES)])

    problems = problems_of(text, ctx)

    [missing] = [p for p in problems if p.startswith("missing forecasts")]
    assert ELECTION in missing and WINNER in missing and RATES not in missing


def test_every_problem_is_reported_at_once():
    text = decision(
        action="HOLD",
        bets=[bet(amount=-1, probability=2)],
        sells=[{"position_id": "nope", "percentage": 0}],
        reasoning=7,
    )

    message = str(pytest.raises(DecisionValidationError, parse_decision, text, make_ctx()).value)

    for fragment in (
        "HOLD cannot include",
        "amount must be positive",
        "probability must be between 0 and 1",
        "unknown position_id",
        "percentage must be above 0",
        "missing forecasts",
        "reasoning must be a string",
    ):
        assert fragment in message
    assert all(line.startswith("- ") for line in message.splitlines())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"action": "BET", "bets": []}, "BET needs at least one bet"),
        ({"action": "SELL"}, "SELL needs at least one sell"),
        ({"action": "BUY"}, 'action must be BET, SELL or HOLD (got "BUY")'),
        ({"action": 3}, "action must be BET, SELL or HOLD"),
        ({"action": "BET", "bets": "all in"}, "bets must be a list"),
        ({"action": "BET", "bets": ["x"]}, "bets[0] must be an object"),
        ({"action": "BET", "bets": [{"amount": 5}]}, "bets[0]: market_id is missing"),
    ],
)
def test_action_and_structure_problems(fields, message):
    problems = problems_of(decision(**fields))
    assert any(message in p for p in problems), problems


def test_bets_and_sells_are_not_combined():
    sells = [{"position_id": "p-7", "percentage": 50}]
    assert "action BET cannot include sells (one action per decision)" in problems_of(
        decision(action="BET", bets=[bet()], sells=sells)
    )
    payload = json.dumps({"bets": [bet()], "sells": sells})
    assert any("cannot be combined" in p for p in problems_of(payload))


def test_duplicates_are_refused():
    dup_bets = decision(action="BET", bets=[bet(amount=10), bet(outcome="YES", amount=20)])
    assert any("second bet on market 101" in p for p in problems_of(dup_bets))

    sells = [{"position_id": "12", "percentage": 10}, {"position_id": 12, "percentage": 20}]
    assert any("sold twice" in p for p in problems_of(decision(action="SELL", sells=sells)))

    forecasts = [{"market_id": ELECTION, "probability": 0.5}] * 2
    assert any("forecast twice" in p for p in problems_of(decision(forecasts=forecasts)))


def test_forecast_contradicting_the_bet_probability_is_refused():
    text = decision(
        action="BET",
        bets=[bet(probability=0.7)],
        forecasts=[{"market_id": ELECTION, "outcome": "Yes", "probability": 0.6}],
    )
    assert any("give one number" in p for p in problems_of(text))


def test_forecast_agreeing_with_the_bet_is_kept_once():
    text = decision(
        action="BET",
        bets=[bet(probability=0.7)],
        forecasts=[{"market_id": ELECTION, "outcome": "Yes", "probability": 0.7}],
    )
    assert parse_decision(text, make_ctx()).forecasts == [Forecast(ELECTION, "Yes", 0.7)]


def test_fenced_prose_answer_with_nested_braces_in_reasoning():
    obj = {
        "action": "HOLD",
        "forecasts": [{"market_id": ELECTION, "probability": 0.5}],
        "reasoning": 'Base rate {roughly 50%}; see "}" edge cases',
    }
    text = f"Thoughts first.\n```json\n{json.dumps(obj, indent=2)}\n```\nThat's all."

    parsed = parse_decision(text, make_ctx())

    assert parsed.reasoning == obj["reasoning"]


def test_non_object_json_is_a_validation_error():
    assert problems_of("[1, 2]") == ["expected a JSON object {...}, got an array"]


# --- fuzz: nothing but DecisionValidationError, ever --------------------------------------------

JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from([ELECTION, WINNER, "Yes", "carol", "p-7", "BET", "SELL", "HOLD"])
)
JSONISH = st.recursive(
    JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "action",
                    "bets",
                    "sells",
                    "forecasts",
                    "reasoning",
                    "market_id",
                    "outcome",
                    "amount",
                    "probability",
                    "position_id",
                    "percentage",
                    "x",
                ]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=25,
)


def _parses_or_refuses(text: str) -> None:
    try:
        parsed = parse_decision(text, make_ctx())
    except DecisionValidationError as exc:
        assert exc.problems and str(exc)
    else:
        assert parsed.action in ("BET", "SELL", "HOLD")
        json.dumps(parsed.to_json())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_arbitrary_text_only_raises_validation_errors(text):
    _parses_or_refuses(text)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSONISH, st.sampled_from(["{}", "```json\n{}\n```", "Sure: {} ok", "{} {"]))
def test_arbitrary_json_shapes_only_raise_validation_errors(value, wrapper):
    _parses_or_refuses(wrapper.replace("{}", json.dumps(value), 1))


def test_a_forecast_for_every_market_of_a_large_universe_is_accepted():
    from agents.parsing import MAX_ITEMS, DecisionContext, parse_decision

    n = MAX_ITEMS + 50
    ctx = DecisionContext(
        markets={str(i): ["Yes", "No"] for i in range(n)},
        position_ids=set(),
        forecast_sample=[str(i) for i in range(n)],
    )
    forecasts = [{"market_id": str(i), "outcome": "Yes", "probability": 0.5} for i in range(n)]
    parsed = parse_decision(json.dumps({"action": "HOLD", "forecasts": forecasts}), ctx)
    assert len(parsed.forecasts) == n
    too_many = forecasts * 3  # more items than the universe has outcomes: junk
    with pytest.raises(DecisionValidationError, match="at most"):
        parse_decision(json.dumps({"action": "HOLD", "forecasts": too_many}), ctx)
