"""The agent API end to end through Django's request handling (web/agent_api.py,
cohorts/decisions/submissions.py): tokens, the week, the decision and its tries, signatures,
the deadline and bad input. Every submission leaves its audit row."""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta
from decimal import Decimal

import django_ratelimit.core
import pytest

from agents import tokens
from cohorts.decisions.run import decide
from cohorts.models import AgentSubmission, Decision, Forecast, Trade, Universe
from cohorts.seals.verify import export_chunks, signature_problem, verify_database, verify_export
from core import clock
from tests.cohorts.agent_helpers import outside_agent, outside_agents

pytestmark = pytest.mark.django_db
WEEK = "/api/agent/v1/week"
POST = "/api/agent/v1/decision"


def post(client, agent, body: bytes, *, content_type="application/json", **headers):
    return client.generic("POST", POST, body, content_type=content_type,
                          **{**agent.headers(body), **headers})  # fmt: skip


def test_week_shows_the_frozen_universe_and_the_prompt_a_model_gets(client):
    agent = outside_agent()
    response = client.get(WEEK, **agent.headers())
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    week = response.json()
    assert (week["cohort"], week["week"], week["state"]) == (agent.cohort.pk, 1, "open")
    assert week["markets"] == agent.universe.markets and week["markets"]
    assert week["forecast_sample"] == agent.universe.forecast_sample
    assert week["cash"] == "10000.00" and week["positions"] == []
    assert week["limits"] == {"min_bet": "50.00", "max_bet_fraction": 0.25,
                              "max_total_bets": "2500.00"}  # fmt: skip
    frozen = agent.universe.frozen_at
    assert week["deadline"] == (frozen + timedelta(minutes=30)).isoformat()
    assert week["tries_left"] == 2 and week["signature_required"] is True
    first = agent.universe.markets[0]
    assert first["question"] in week["prompt"]["user"] and "BET" in week["prompt"]["system"]


def test_week_before_the_freeze_says_when_it_opens(client):
    agent = outside_agent()
    Universe.objects.all().delete()
    response = client.get(WEEK, **agent.headers())
    assert response.status_code == 409
    assert response.json()["error"].startswith("not open yet: week 1") and "opens_at" in response.json()


def test_tokens_wrong_revoked_in_a_url_or_of_another_competitor(client):
    agent, other = outside_agents(slugs=("team-agent", "other-agent"))
    assert client.get(WEEK).status_code == 401
    wrong = client.get(WEEK, HTTP_AUTHORIZATION="Bearer arena_AAAAAAAA_" + "x" * 43)
    assert wrong.status_code == 401 and list(wrong.json()) == ["error"]
    assert "\n" not in wrong.json()["error"]
    in_url = client.get(f"{WEEK}?token={agent.token}")
    assert in_url.status_code == 400 and "Authorization header" in in_url.json()["error"]
    body = agent.body(agent.valid_answer())
    accepted = post(client, agent, body)
    assert accepted.status_code == 201, accepted.json()
    decision_id = accepted.json()["decision"]["id"]
    own = client.get(f"/api/agent/v1/decisions/{decision_id}", **agent.headers())
    assert own.status_code == 200 and own.json()["submissions"][0]["signature_verified"] is True
    theirs = client.get(f"/api/agent/v1/decisions/{decision_id}", **other.headers())
    assert theirs.status_code == 403
    tokens.revoke(agent.competitor.tokens.get())
    revoked = client.get(WEEK, **agent.headers())
    assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]


def test_a_valid_answer_is_the_decision_and_trades_at_the_frozen_price(client):
    agent = outside_agent()
    bet = agent.first_market_bet()
    body = agent.body(agent.valid_answer([bet]))
    shown = client.get(WEEK, **agent.headers()).json()["prompt"]["user"]
    response = post(client, agent, body, HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 201, response.json()
    decision = Decision.objects.get(pk=response.json()["decision"]["id"])
    assert (decision.status, decision.action) == ("done", "BET")
    # The prompt recorded is the one GET week showed (the same minute: the prompt names it).
    assert decision.user_prompt.splitlines()[1:] == shown.splitlines()[1:]
    trade = Trade.objects.get(decision=decision)
    assert trade.price == Decimal(agent.universe.markets[0]["prices"]["Yes"])  # the frozen price
    assert Forecast.objects.filter(decision=decision).count() >= len(agent.universe.forecast_sample)

    again = post(client, agent, body, HTTP_IDEMPOTENCY_KEY="k1")  # a retry: the same answer
    assert again.status_code == 201 and again.json()["decision"]["id"] == decision.pk
    assert again.json()["replayed"] is True
    later = post(client, agent, body, HTTP_IDEMPOTENCY_KEY="k2")
    assert later.status_code == 409 and f"decision {decision.pk}" in later.json()["error"]
    rows = AgentSubmission.objects.order_by("pk")
    assert [r.http_status for r in rows] == [201, 201, 409]
    assert bytes(rows[0].body) == body and rows[0].token_prefix == agent.token[:14]
    assert agent.token not in json.dumps(list(rows.values("response", "problems")), default=str)


def test_an_invalid_answer_gets_every_problem_and_one_more_try(client):
    agent = outside_agent()
    bad = {"action": "BET", "bets": [{"market_id": "999999", "outcome": "Yes", "amount": 1}],
           "forecasts": []}  # fmt: skip
    first = post(client, agent, agent.body(bad))
    assert first.status_code == 422 and first.json()["tries_left"] == 1
    assert len(first.json()["problems"]) >= 2  # the unknown market and the missing sample
    assert not Decision.objects.exists()
    second = post(client, agent, agent.body(bad))
    assert second.status_code == 422 and second.json()["tries_left"] == 0
    decision = Decision.objects.get()
    assert decision.action == "HOLD" and decision.hold_reason.startswith("invalid decision")
    assert [e["phase"] for e in decision.validation_errors] == ["initial", "repair"]
    assert decision.submissions.count() == 2
    assert post(client, agent, agent.body(agent.valid_answer())).status_code == 409


def test_an_invalid_try_then_a_valid_one(client):
    agent = outside_agent()
    assert post(client, agent, agent.body({"action": "HOLD"})).status_code == 422
    ok = post(client, agent, agent.body(agent.valid_answer()))
    assert ok.status_code == 201
    decision = Decision.objects.get()
    assert decision.action == "HOLD" and decision.validation_errors[0]["phase"] == "initial"


def test_signatures_bind_the_body_to_competitor_cohort_and_week(client):
    agent = outside_agent()
    body = agent.body(agent.valid_answer())
    unsigned = post(client, agent, body, HTTP_ARENA_SIGNATURE="")
    assert unsigned.status_code == 401 and "Arena-Signature" in unsigned.json()["error"]
    # Signed for week 2: the same bytes replayed for week 1 do not verify.
    replay = client.generic("POST", POST, body, content_type="application/json",
                            **agent.headers(body, week=2))  # fmt: skip
    assert replay.status_code == 401 and "does not verify" in replay.json()["error"]
    rows = AgentSubmission.objects.order_by("pk")
    assert [r.signature_verified for r in rows] == [False, False]
    assert post(client, agent, body).status_code == 201


def test_after_the_deadline_410_and_the_week_is_held_no_submission(client):
    agent = outside_agent(frozen_ago=31, with_baseline=True)
    late = post(client, agent, agent.body(agent.valid_answer()))
    assert late.status_code == 410
    assert late.json()["deadline"] == (agent.universe.frozen_at + timedelta(minutes=30)).isoformat()
    assert AgentSubmission.objects.get().http_status == 410
    decide(agent.cohort, 1, sync=True)
    held = Decision.objects.get(entry=agent.entry)
    assert (held.action, held.hold_reason) == ("HOLD", "no submission")


def test_the_weekly_run_leaves_an_outside_entry_alone_inside_its_window(client):
    agent = outside_agent(with_baseline=True)
    decide(agent.cohort, 1, at=clock.now(), sync=True)
    assert not Decision.objects.filter(entry=agent.entry).exists()
    assert Decision.objects.count() == 1  # the baseline's
    assert post(client, agent, agent.body(agent.valid_answer())).status_code == 201


@pytest.mark.parametrize(
    ("body", "content_type", "status", "words"),
    [
        (b"{not json", "application/json", 400, "not JSON"),
        (b"[" * 5000 + b"]" * 5000, "application/json", 400, "deeper than"),
        (b'{"cohort": 1, "week": 1, "answer": "\\u0000"}', "application/json", 400, "NUL"),
        (b'{"cohort": 1, "week": 1, "answer": "\\ud800"}', "application/json", 400, "surrogate"),
        (b"\xff\xfe", "application/json", 400, "not UTF-8"),
        (b"cohort=1", "application/x-www-form-urlencoded", 415, "application/json"),
        (b'{"cohort": "1", "week": 1, "answer": {}}', "application/json", 400, "cohort is"),
        (b"NaN", "application/json", 400, "not JSON"),
        (b"x" * (64 * 1024 + 1), "application/json", 413, "at most 65536"),
    ],
)
def test_bad_input_is_a_clear_4xx_with_its_audit_row(client, body, content_type, status, words):
    agent = outside_agent(signed=False)
    response = post(client, agent, body, content_type=content_type)
    assert response.status_code == status and words in response.json()["error"]
    row = AgentSubmission.objects.get()
    assert row.http_status == status and row.body_bytes == len(body)
    assert bytes(row.body) == (body if status != 413 else b"")


def test_the_sealed_record_carries_the_signed_submission_and_verify_checks_it(client):
    agent = outside_agent()
    assert post(client, agent, agent.body({"action": "HOLD"})).status_code == 422
    body = agent.body(agent.valid_answer())
    assert post(client, agent, body).status_code == 201
    decision = Decision.objects.get()
    page = client.get(f"/decisions/{decision.pk}/").content.decode()
    assert "Submissions" in page and "verified with key" in page and agent.token not in page
    assert verify_database(agent.cohort.pk).ok  # the agent was the cohort's only entry: sealed

    doc = json.loads("".join(export_chunks(agent.cohort.pk)))
    assert agent.token not in json.dumps(doc)
    record = doc["cohorts"][0]["weeks"][0]["digests"][0]["record"]
    assert record["format"] == "arena-seal/3" and record["release"]["agent_version"] == "1.0"
    first, second = record["submissions"]
    assert (first["outcome"], second["outcome"]) == ("invalid", "accepted")
    assert base64.b64decode(second["body_base64"]) == body
    assert second["signed_as"] == {"competitor": "team-agent", "cohort": agent.cohort.pk,
                                   "week": 1}  # fmt: skip
    assert verify_export(doc).ok

    # A record claiming a signature verified when it does not is caught from the record alone.
    second["body_base64"] = base64.b64encode(body.replace(b"a test agent", b"forged")).decode()
    assert "does not verify" in signature_problem(record)
    # The live body changed after sealing: the database no longer rebuilds the sealed record.
    AgentSubmission.objects.filter(pk=second["id"]).update(body=b"{}")
    assert not verify_database(agent.cohort.pk).ok


class _OneInstant:
    """django-ratelimit's clock, held still: it counts in fixed one-minute windows, so three
    requests that straddle a window's end (a second apart on a loaded machine) would start the
    count again and never reach the limit."""

    now = time.time()

    @classmethod
    def time(cls) -> float:
        return cls.now


def test_a_token_over_its_rate_gets_429_another_token_does_not(client, monkeypatch):
    agent, other = outside_agents(slugs=("team-agent", "other-agent"))
    agent.competitor.tokens.update(rate_per_minute=2)
    monkeypatch.setattr(django_ratelimit.core, "time", _OneInstant)
    statuses = [client.get(WEEK, **agent.headers()).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert client.get(WEEK, **other.headers()).status_code == 200
