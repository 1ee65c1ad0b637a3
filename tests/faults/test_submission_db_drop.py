"""Fault: the database connection drops while an outside agent's deciding submission is written.

A test-only trigger terminates the backend as the submission's audit row is marked accepted
(tests/faults/conftest.py). Before: the decision was committed first and its submission row
closed after, so a connection lost between the two left the deciding row "received" and linked
to nothing, and the agent's retry (same Idempotency-Key) was told "already final": the audit
record showed no accepted submission for a week the agent had decided. Proves: the decision and
its submission's record commit together, so after the drop there is no decision, the retry
decides the week, and exactly one accepted submission is on the decision's record.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from cohorts.models import AgentSubmission, Decision
from tests.cohorts.agent_helpers import outside_agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _post(agent, body: bytes, key: str):
    # A dropped connection is a 500 here (the exception is not raised into the test); the agent
    # sees what a client of the real site would, and retries.
    return Client(raise_request_exception=False).generic(
        "POST", "/api/agent/v1/decision", body, content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key, **agent.headers(body),
    )  # fmt: skip


def test_a_connection_lost_while_the_deciding_submission_is_recorded_loses_nothing(inject_fault):
    agent = outside_agent()
    bet = agent.first_market_bet()
    body = agent.body(agent.valid_answer([bet]))
    inject_fault("accepted submission", 1, "terminate")

    first = _post(agent, body, "key-1")
    assert first.status_code >= 500
    connection.close()  # the test's connection was the one terminated
    assert not Decision.objects.exists()  # nothing of the decision outlived its record

    again = _post(agent, body, "key-1")  # the agent's retry: same body, same key
    assert again.status_code == 201, again.content
    decision = Decision.objects.get()
    assert again.json()["decision"]["id"] == decision.pk
    accepted = AgentSubmission.objects.filter(outcome=AgentSubmission.Outcome.ACCEPTED)
    assert list(accepted.values_list("decision_id", "http_status")) == [(decision.pk, 201)]
    # The lost request keeps its audit row (stored before anything was judged), unanswered.
    assert list(
        AgentSubmission.objects.filter(decision=None).values_list("http_status", flat=True)
    ) == [None]
