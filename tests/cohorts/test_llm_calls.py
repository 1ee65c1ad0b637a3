"""An LLM call's fields are named once (cohorts/llm_calls.py): the row stored from an attempt,
the sealed record and the decision API publish the same fields, each in its own forms."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from agents.attempts import Attempt
from cohorts.decisions.run import run_decision
from cohorts.llm_calls import FIELDS, call_dict, call_row, store_calls
from cohorts.models import Decision, LLMCall
from cohorts.seals.canonical import dec, ts
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets

pytestmark = pytest.mark.django_db


def test_every_column_of_an_llm_call_is_published():
    # A new column is either published (sealed and in the API) or deliberately left out here.
    columns = {f.name for f in LLMCall._meta.concrete_fields}
    assert columns - {"id", "decision"} == set(FIELDS)
    assert len(FIELDS) == len(set(FIELDS))


def _attempt(**kw) -> Attempt:
    values = {
        "number": 1,
        "url": "http://llm.example/v1/chat/completions" + "x" * 400,
        "request_body": {"model": "m", "messages": []},
        "started_at": datetime(2026, 3, 1, 0, 5, 1, 250, tzinfo=UTC),
        "http_status": 200,
        "raw_response": "{}",
        "content": "{}",
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost_usd": Decimal("0.000007351234567"),
        "cost_source": "usage",
        "latency_ms": 12,
        "served_model": "m" * 300,
        "generation_id": "gen-1",
        "finish_reason": "stop",
    }
    values.update(kw)
    return Attempt(**values)


def test_a_stored_attempt_is_published_the_same_way_by_the_seal_and_the_api():
    make_markets(3)
    cohort = make_cohort([baseline_competitor("favorite")])
    entry = cohort.entries.get()
    decision = run_decision(entry.pk, 1, AT)
    before = decision.llm_calls.count()
    store_calls(
        decision, [_attempt(), _attempt(number=2, error_kind=None, cost_usd=None)], "repair"
    )
    first, second = LLMCall.objects.filter(decision=decision).order_by("attempt")[before:]
    assert (first.attempt, second.attempt) == (before + 1, before + 2)  # numbered after earlier
    assert len(first.url) == 300 and len(first.served_model) == 200  # cut to their columns
    assert first.cost_usd == Decimal("0.0000073512") and second.cost_usd is None
    assert second.error_kind == "" and second.cost_source == "usage"

    sealed = call_dict(first, time=ts, money=lambda v: dec(v, 6))
    assert list(sealed) == list(FIELDS)
    assert sealed["cost_usd"] == "0.000007"
    assert sealed["started_at"] == "2026-03-01T00:05:01.000250Z"
    assert sealed["phase"] == "repair" and sealed["request"] == {"model": "m", "messages": []}
    # A `.values()` row (what the seal reads) gives the same dict as the model row.
    row = LLMCall.objects.filter(pk=first.pk).values(*FIELDS).get()
    assert call_dict(row, time=ts, money=lambda v: dec(v, 6)) == sealed


def test_the_decision_api_lists_the_calls_with_the_shared_fields(client):
    make_markets(3)
    cohort = make_cohort([baseline_competitor("favorite")])
    decision = run_decision(cohort.entries.get().pk, 1, AT)
    assert decision.status == Decision.Status.DONE
    calls = client.get(f"/api/decisions/{decision.pk}").json()["llm_calls"]
    assert calls and all(list(c) == list(FIELDS) for c in calls)
    row = decision.llm_calls.order_by("attempt").first()
    assert calls[0]["started_at"] == row.started_at.isoformat()
    assert calls[0]["cost_usd"] == "0.000000"  # a baseline costs nothing, with six places


def test_call_row_sets_every_published_field():
    decision = Decision(pk=1)
    row = call_row(decision, _attempt(error="boom", error_kind="http"), 3, "initial")
    assert all(hasattr(row, name) for name in FIELDS)
    assert (row.attempt, row.phase, row.error, row.error_kind) == (3, "initial", "boom", "http")
