"""Hostile model responses through the real client and the fake OpenRouter server: whatever a
model sends back, every HTTP attempt is kept as an LLMCall row, and what cannot be stored as
received (NUL, lone surrogates, figures beyond their columns) is escaped or clamped with the
reason in the row's `error`. Runs on SQLite and, with DATABASE_URL, on PostgreSQL, where a NUL
or an out-of-range integer used to be a DataError that lost the whole decision's calls.
"""

import json
from decimal import Decimal

import pytest

from cohorts.decisions.run import run_decision
from cohorts.models import Decision, LLMCall
from cohorts.universe import freeze_universe
from tests.agents.helpers import (
    AT,
    answer,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import FakeResponse, success, success_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(model_server):
    make_markets(4)
    cohort = make_cohort([llm_competitor(model_server)])
    return cohort.entries.get(), freeze_universe(cohort, 1, AT)


def _calls(decision: Decision) -> list[LLMCall]:
    return list(LLMCall.objects.filter(decision=decision).order_by("attempt"))


def test_a_body_nested_200k_deep_is_a_malformed_attempt_and_every_attempt_is_kept(
    model_server, setup
):
    entry, _ = setup
    deep = "[" * 200_000 + "]" * 200_000
    model_server.enqueue(*[FakeResponse(200, deep) for _ in range(3)])

    decision = run_decision(entry.pk, 1, AT)

    calls = _calls(decision)
    # the first try and two content retries
    assert len(calls) == len(model_server.chat_requests) == 3
    assert decision.status == Decision.Status.FAILED
    assert "nested too deeply" in decision.error
    assert all(c.error_kind == "malformed" and len(c.raw_response) == len(deep) for c in calls)


def test_raw_nul_bytes_and_surrogates_are_stored_visibly_and_the_decision_is_made(
    model_server, setup
):
    entry, universe = setup
    text = answer(universe, reasoning="fine\x00 then \ud800 and \u202eseY")
    body = json.dumps(success_body(text, model="evil\x00model"))
    # A NUL byte as received on the wire too (invalid JSON there, so it is the bytes that count).
    model_server.enqueue(FakeResponse(200, body.encode()))

    decision = run_decision(entry.pk, 1, AT)

    decision.refresh_from_db()
    assert decision.status == Decision.Status.DONE and decision.action == "HOLD"
    assert decision.reasoning == "fine then  and seY"  # no NUL, surrogate or bidi control
    [call] = _calls(decision)
    assert call.served_model == "evil\ufffdmodel"
    assert call.raw_response == body  # JSON escapes: the text is as received


def test_a_nul_byte_on_the_wire_is_replaced_in_the_stored_raw_response(model_server, setup):
    entry, universe = setup
    raw = b'{"choices": [{"message": {"content": "\x00"}}]}'
    model_server.enqueue(*[FakeResponse(200, raw) for _ in range(3)])

    decision = run_decision(entry.pk, 1, AT)

    calls = _calls(decision)
    assert len(calls) == len(model_server.chat_requests) == 3
    assert calls[0].raw_response == raw.decode().replace("\x00", "\ufffd")
    assert "stored as U+FFFD" in calls[0].error and calls[0].error_kind == "malformed"


def test_invalid_utf8_is_kept_with_replacement_characters(model_server, setup):
    entry, universe = setup
    body = json.dumps(success_body(answer(universe))).encode()
    model_server.enqueue(FakeResponse(200, body[:-1] + b"\xff\xfe}"))

    decision = run_decision(entry.pk, 1, AT)

    [call, *_] = _calls(decision)
    assert call.raw_response.endswith("\ufffd\ufffd}")


@pytest.mark.parametrize(
    ("usage", "expected", "note"),
    [
        ({"prompt_tokens": 1e12, "completion_tokens": 10, "cost": 0.01}, 100_000_000, "clamped"),
        ({"prompt_tokens": 10**30, "completion_tokens": 10, "cost": 0.01}, 100_000_000, "clamped"),
        ({"prompt_tokens": -5, "completion_tokens": 10, "cost": 0.01}, None, "negative"),
        ({"prompt_tokens": "many", "completion_tokens": 10, "cost": 0.01}, None, ""),
    ],
)
def test_token_counts_beyond_any_real_call_are_clamped_and_said(
    model_server, setup, usage, expected, note
):
    entry, universe = setup
    body = success_body(answer(universe))
    body["usage"] = usage
    model_server.enqueue(FakeResponse(200, body))

    decision = run_decision(entry.pk, 1, AT)

    decision.refresh_from_db()
    assert decision.status == Decision.Status.DONE
    [call] = _calls(decision)
    assert call.prompt_tokens == expected
    assert (note in call.error) and (bool(call.error) == bool(note))
    assert decision.tokens_in == (expected or 0)


@pytest.mark.parametrize(
    ("cost", "stored"),
    [("12345678", Decimal(10_000)), (1e300, Decimal(10_000)), (-3, None), ("1e-30", Decimal(0))],
)
def test_costs_out_of_range_are_clamped_and_the_row_is_kept(model_server, setup, cost, stored):
    entry, universe = setup
    body = success_body(answer(universe))
    body["usage"]["cost"] = cost
    model_server.enqueue(FakeResponse(200, body))

    decision = run_decision(entry.pk, 1, AT)

    decision.refresh_from_db()
    [call] = _calls(decision)
    assert call.cost_usd == stored
    assert decision.status == Decision.Status.DONE
    if stored == Decimal(10_000):
        assert "clamped" in call.error and decision.cost_usd == stored


def test_retried_clamped_costs_still_fit_the_decision_total(model_server, setup, settings):
    entry, universe = setup
    failing = success_body("   ", cost=None)
    failing["usage"]["cost"] = "99999999"
    model_server.enqueue(
        FakeResponse(200, failing), FakeResponse(200, failing), success(answer(universe))
    )

    decision = run_decision(entry.pk, 1, AT)

    decision.refresh_from_db()
    assert len(_calls(decision)) == 3
    assert decision.cost_usd == Decimal(20_000) + Decimal("0.00384")


def test_the_audit_page_shows_bidi_controls_instead_of_obeying_them(model_server, setup, client):
    entry, universe = setup
    text = answer(universe, reasoning="\u202eseY")
    body = json.dumps(success_body(text), ensure_ascii=False).replace("seY", "\u202eseY")
    model_server.enqueue(FakeResponse(200, body.encode()))
    decision = run_decision(entry.pk, 1, AT)

    response = client.get(f"/decisions/{decision.pk}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "\u202e" not in html
    assert "&lt;U+202E&gt;seY" in html  # in the raw response as received
