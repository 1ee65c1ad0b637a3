"""The agent API under races on PostgreSQL: submissions of one agent at once end in exactly one
decision, every request keeps its audit row, and none is a 5xx."""

from __future__ import annotations

import pytest
from django.test import Client

from cohorts.models import AgentSubmission, Decision, Trade
from tests.cohorts.agent_helpers import outside_agent
from tests.cohorts.test_concurrency_pg import at_once

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _post(agent, body: bytes):
    def send():
        return Client().generic("POST", "/api/agent/v1/decision", body,
                                content_type="application/json", **agent.headers(body))  # fmt: skip

    return send


def test_four_submissions_at_once_make_exactly_one_decision():
    agent = outside_agent()
    bet = agent.first_market_bet()
    body = agent.body(agent.valid_answer([bet]))
    results = at_once(*[_post(agent, body) for _ in range(4)])
    assert [exc for _, exc in results] == [None] * 4
    statuses = sorted(r.status_code for r, _ in results)
    assert statuses == [201, 409, 409, 409]
    decision = Decision.objects.get()
    assert Trade.objects.filter(decision=decision).count() == 1
    assert AgentSubmission.objects.count() == 4
    assert sorted(AgentSubmission.objects.values_list("http_status", flat=True)) == statuses


def test_invalid_tries_at_once_count_once_each():
    agent = outside_agent()
    body = agent.body({"action": "HOLD"})  # the forecast sample is missing
    results = at_once(*[_post(agent, body) for _ in range(3)])
    statuses = sorted(r.status_code for r, _ in results)
    # The first try is answered with one more allowed, the second ends the week held, the third
    # finds the decision made.
    assert statuses == [409, 422, 422]
    assert Decision.objects.get().action == "HOLD"
