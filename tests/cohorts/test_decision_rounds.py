"""A provider outage costs a decision a round, not its week (cohorts/decisions/retry.py).

The model is a real OpenAI-compatible server on 127.0.0.1 (tests/fakes/openai_server.py) that
answers 503/429/402 or a valid decision; the arena's clock of record is a simulated clock that
each test moves, so "the next catch-up after retry_after" is decide() called at that time, as
beat's 15-minute tick calls it.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.db import connection
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agents.attempts import LOST
from cohorts.decisions import retry as policy
from cohorts.decisions.claims import claim_decision
from cohorts.decisions.run import UNIVERSE_PRICE_WINDOW, decide, run_decision
from cohorts.llm_calls import CallRecorder
from cohorts.models import Decision, LLMCall, Trade
from cohorts.seals import sealing as seals
from cohorts.seals.models import DecisionDigest
from cohorts.universe import freeze_universe
from core import clock
from tests.agents.helpers import (
    AT,
    KEY_ENV,
    WEEK_START,
    allowed_endpoints,
    answer,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    payment_required,
    rate_limited,
    success,
    unavailable,
)

S = Decision.Status


# --- the policy's pure functions -------------------------------------------------------------


def call(kind=None, status=None, retry_after=None, quota_reset=None):
    return SimpleNamespace(
        error_kind=kind, http_status=status, retry_after=retry_after, quota_reset=quota_reset
    )


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        (call("http", 503), True),
        (call("http", 429), True),
        (call("http", 408), True),
        (call("http", 500), True),
        (call("timeout"), True),
        (call("connection"), True),
        (call("http", 400), False),
        (call("http", 401), False),
        (call("http", 402), False),
        (call("http", 403), False),
        (call("http", 404), False),
        (call("in_band", 200), False),
        (call("malformed", 200), False),
        (call("empty", 200), False),
        (call("context_full", 400), False),
        (call("length", 200), False),
    ],
)
def test_which_errors_are_transient(attempt, expected):
    assert policy.transient(attempt) is expected


def test_an_outage_is_a_phase_of_transient_failures_only():
    assert policy.outage([call("http", 503), call("timeout")])
    assert not policy.outage([])
    assert not policy.outage([call("http", 503), call("http", 402)])
    assert not policy.outage([call("http", 503), call(None, 200)])  # an answer is no outage


def test_backoff_doubles_from_five_minutes():
    assert [policy.backoff(n).total_seconds() / 60 for n in (1, 2, 3, 4)] == [5, 10, 20, 40]


def test_the_provider_wait_wins_over_the_backoff_and_the_later_of_its_two_counts():
    now = datetime(2026, 11, 22, tzinfo=UTC)
    assert policy.next_try(now, 1, [call("http", 503)]) == now + timedelta(minutes=5)
    assert policy.next_try(now, 3, [call("http", 503)]) == now + timedelta(minutes=20)
    assert policy.next_try(now, 1, [call("http", 503, retry_after=90)]) == now + timedelta(
        seconds=90
    )
    limited = call("http", 429, retry_after=60, quota_reset=7200)
    assert policy.next_try(now, 1, [limited]) == now + timedelta(hours=2)
    # Only the last answer counts: an earlier Retry-After is stale.
    assert policy.next_try(now, 1, [call("http", 429, 600), call("http", 503)]) == now + timedelta(
        minutes=5
    )


def test_the_window_is_the_end_of_the_cohort_week():
    assert policy.window_end(WEEK_START, 1) == WEEK_START + timedelta(days=7)
    assert policy.window_end(WEEK_START, 3) == WEEK_START + timedelta(days=21)


@hsettings(max_examples=60, deadline=None)
@given(
    rounds=st.integers(1, 10),
    limit=st.integers(1, 10),
    minutes_left=st.integers(0, 10_000),
    wait=st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False)),
)
def test_a_verdict_never_schedules_past_its_bounds(rounds, limit, minutes_left, wait):
    now = datetime(2026, 11, 22, tzinfo=UTC)
    closes = now + timedelta(minutes=minutes_left)
    verdict = policy.after_outage(
        now=now,
        rounds=rounds,
        limit=limit,
        closes=closes,
        calls=[call("http", 503, retry_after=wait)],
        error="HTTP 503: down",
    )
    assert verdict.reason.endswith("HTTP 503: down")
    assert f"provider unavailable for {rounds} round" in verdict.reason
    if verdict.status == S.RETRYABLE:
        assert rounds < limit
        assert now <= verdict.retry_after < closes
    else:
        assert verdict.status == S.FAILED and verdict.retry_after is None
        assert rounds >= limit or policy.next_try(now, rounds, verdict_calls(wait)) >= closes


def verdict_calls(wait):
    return [call("http", 503, retry_after=wait)]


# --- decisions against the fake provider ------------------------------------------------------

# The fake model server (tests/fixtures.py) with one client retry: a round is two calls.
pytestmark = pytest.mark.model_server(retries=1)


@pytest.fixture
def sim():
    """The clock of record, at the beat's Sunday decision time; tests move it forward."""
    simulated = clock.SimulatedClock(AT)
    with clock.running_on(simulated):
        yield simulated


@pytest.fixture
def setup(db, model_server, sim):
    markets = make_markets(6)
    cohort = make_cohort([llm_competitor(model_server)])
    universe = freeze_universe(cohort, 1, AT)
    return cohort.entries.get(), universe, markets


def bet(market, amount=100):
    return {"market_id": str(market.pk), "outcome": "Yes", "amount": amount, "probability": 0.7}


def outage(model_server, n=2, **kw):
    """One round's worth of 503s: the client's first try and its one retry."""
    model_server.enqueue(*[unavailable(**kw) for _ in range(n)])


def the_decision(entry) -> Decision:
    return Decision.objects.get(entry=entry, week=1)


@pytest.mark.django_db
def test_an_outage_then_recovery_is_retryable_then_done_on_the_catch_up_after_retry_after(
    model_server, setup, sim
):
    entry, universe, markets = setup
    outage(model_server)

    assert decide(sync=True) == 1  # the beat's catch-up at Sunday 00:05

    d = the_decision(entry)
    assert (d.status, d.retry_rounds) == (S.RETRYABLE, 1)
    assert d.retry_after == AT + timedelta(minutes=5)
    assert "provider unavailable for 1 round of 4" in d.error and "HTTP 503" in d.error
    assert d.finished_at == AT and not Trade.objects.exists()
    first_calls = list(LLMCall.objects.order_by("attempt").values("id", "raw_response"))
    assert len(first_calls) == 2

    sim.set(AT + timedelta(minutes=4))  # a catch-up before retry_after: nothing is sent
    assert decide(sync=True) == 0
    assert len(model_server.chat_requests) == 2 and the_decision(entry).status == S.RETRYABLE

    sim.set(AT + timedelta(minutes=5))
    model_server.enqueue(success(answer(universe, bets=[bet(markets[1])])))
    assert decide(sync=True) == 1

    d = the_decision(entry)
    assert (d.status, d.action, d.retry_rounds, d.retry_after) == (S.DONE, "BET", 1, None)
    assert d.error == "" and d.claimed_at == AT + timedelta(minutes=5)
    # Every round's calls stay, numbered on; the first round's rows are untouched.
    calls = list(d.llm_calls.order_by("attempt"))
    assert [(c.attempt, c.http_status) for c in calls] == [(1, 503), (2, 503), (3, 200)]
    kept = list(LLMCall.objects.filter(pk__in=[c["id"] for c in first_calls]).order_by("attempt"))
    assert [c.raw_response for c in kept] == [c["raw_response"] for c in first_calls]
    assert Trade.objects.filter(decision=d).count() == 1


@pytest.mark.django_db
def test_retry_after_is_honoured_and_a_late_round_trades_at_the_fresh_price(
    model_server, setup, sim
):
    entry, universe, markets = setup
    frozen = Decimal(markets[0].last_prices["Yes"])
    wait = UNIVERSE_PRICE_WINDOW + timedelta(minutes=10)  # past the frozen prices' window
    outage(model_server, retry_after=str(int(wait.total_seconds())))

    run_decision(entry.pk, 1)

    d = the_decision(entry)
    assert (d.status, d.retry_after) == (S.RETRYABLE, AT + wait)  # not the 5-minute backoff
    sim.set(AT + timedelta(minutes=5))
    assert decide(sync=True) == 0  # the backoff would have run it here
    assert len(model_server.chat_requests) == 2

    late = AT + wait
    sim.set(late)
    markets[0].last_prices = {"Yes": "0.95"}
    markets[0].last_priced_at = late - timedelta(minutes=2)
    markets[0].save()
    model_server.enqueue(success(answer(universe, bets=[bet(markets[0], 200)])))
    assert decide(sync=True) == 1

    d = the_decision(entry)
    assert (d.status, d.action, d.decided_at) == (S.DONE, "BET", late)
    trade = Trade.objects.get(decision=d)
    assert trade.price == Decimal("0.95") != frozen
    assert trade.quote["source"] == "market"
    assert Decimal(trade.quote["shown_price"]) == frozen


@pytest.mark.django_db
def test_a_spent_quota_waits_for_its_reset(model_server, setup, sim):
    entry, _, _ = setup
    model_server.enqueue(rate_limited(retry_after="5400"))  # a quota: one attempt, no client retry

    run_decision(entry.pk, 1)

    d = the_decision(entry)
    assert (d.status, d.retry_rounds) == (S.RETRYABLE, 1)
    assert d.retry_after == AT + timedelta(seconds=5400)
    assert "429" in d.error and d.llm_calls.count() == 1


@pytest.mark.django_db
def test_rounds_exhausted_end_failed_with_the_reason_and_every_call(
    model_server, setup, sim, settings
):
    settings.ARENA_DECISION_MAX_ROUNDS = 3
    entry, _, _ = setup
    model_server.default_responder = lambda request: unavailable()

    run_decision(entry.pk, 1)
    assert the_decision(entry).retry_after == AT + timedelta(minutes=5)
    sim.set(AT + timedelta(minutes=5))
    decide(sync=True)
    d = the_decision(entry)
    assert (d.status, d.retry_rounds) == (S.RETRYABLE, 2)
    assert d.retry_after == AT + timedelta(minutes=15)  # 10 minutes after the second round
    sim.set(AT + timedelta(minutes=15))
    decide(sync=True)

    d = the_decision(entry)
    assert (d.status, d.retry_rounds, d.retry_after) == (S.FAILED, 3, None)
    assert d.error.startswith("provider unavailable for 3 rounds (the most a decision gets)")
    assert "HTTP 503" in d.error
    assert d.llm_calls.count() == len(model_server.chat_requests) == 6
    sim.set(AT + timedelta(hours=1))
    assert decide(sync=True) == 0  # final: never run again
    assert len(model_server.chat_requests) == 6


@pytest.mark.django_db
def test_a_round_whose_next_try_would_miss_the_window_fails_at_once(model_server, setup, sim):
    entry, _, _ = setup
    closes = WEEK_START + timedelta(days=7)
    sim.set(closes - timedelta(minutes=3))
    outage(model_server)

    decide(sync=True)

    d = the_decision(entry)
    assert (d.status, d.retry_rounds, d.retry_after) == (S.FAILED, 1, None)
    assert "would fall after the week's decision window closes (2026-11-29 00:00 UTC)" in d.error


@pytest.mark.django_db
def test_a_retryable_decision_still_waiting_when_its_week_ends_is_finalised(
    model_server, setup, sim
):
    entry, _, _ = setup
    outage(model_server)
    run_decision(entry.pk, 1)
    assert the_decision(entry).status == S.RETRYABLE
    model_server.default_responder = lambda request: unavailable()

    # No catch-up ran until the week was over (beat down): the next one finalises it.
    sim.set(WEEK_START + timedelta(days=7, minutes=5))
    decide(sync=True)

    d = the_decision(entry)
    assert (d.status, d.retry_rounds, d.retry_after) == (S.FAILED, 1, None)
    assert d.error == (
        "provider unavailable for 1 round; the week's decision window closed "
        "(2026-11-29 00:00 UTC) before the next round"
    )
    assert d.llm_calls.count() == 2  # no round ran after the window
    assert Decision.objects.filter(entry=entry, week=2).exists()  # the catch-up moved on


@pytest.mark.django_db
def test_payment_required_fails_at_once_even_after_a_503(model_server, setup, sim):
    entry, _, _ = setup
    model_server.enqueue(unavailable(), payment_required())

    run_decision(entry.pk, 1)

    d = the_decision(entry)
    assert (d.status, d.retry_rounds, d.retry_after) == (S.FAILED, 0, None)
    assert d.error.startswith("HTTP 402")
    assert list(d.llm_calls.values_list("http_status", flat=True).order_by("attempt")) == [
        503,
        402,
    ]
    sim.set(AT + timedelta(hours=1))
    assert decide(sync=True) == 0


@pytest.mark.django_db
def test_a_replay_cohort_gets_no_rounds(model_server, sim):
    make_markets(6)
    cohort = make_cohort([llm_competitor(model_server)], kind="replay")
    outage(model_server)

    decide(cohort=cohort, week=1, at=AT, sync=True)

    d = Decision.objects.get(entry__cohort=cohort)
    assert (d.status, d.retry_rounds) == (S.FAILED, 0)
    assert d.error.startswith("HTTP 503")


@pytest.mark.django_db
def test_a_replay_on_a_later_clock_leaves_live_retryable_decisions_alone(model_server, setup, sim):
    entry, _, _ = setup
    outage(model_server)
    run_decision(entry.pk, 1)
    replay = make_cohort([entry.competitor], kind="replay")
    model_server.default_responder = lambda request: unavailable()
    later = WEEK_START + timedelta(days=30)
    sim.set(later)  # a replay runs on a clock of its own, here past the live week

    decide(cohort=replay, week=1, at=later, sync=True)

    assert the_decision(entry).status == S.RETRYABLE
    assert Decision.objects.get(entry__cohort=replay).status == S.FAILED


@pytest.mark.django_db
def test_the_page_api_and_cli_show_the_rounds(model_server, setup, sim, client):
    entry, universe, markets = setup
    outage(model_server)
    out = StringIO()

    call_command(
        "arena", "decide", "--cohort", str(entry.cohort_id), "--week", "1", "--sync", stdout=out
    )  # exits 0: a retryable decision is no failure

    d = the_decision(entry)
    lines = out.getvalue().splitlines()
    assert lines[0] == "decided 1 entries: 1 retryable"
    assert lines[1].startswith(
        f"retryable: cohort={entry.cohort_id} week=1 competitor=gpt-test decision={d.pk} "
        "rounds=1 retry_after=2026-11-22T00:10:00+00:00 reason=provider unavailable for 1 round"
    )
    assert lines[2].startswith(
        "1 decision retryable after a provider outage, not counted as failed"
    )

    page = client.get(f"/decisions/{d.pk}/").content.decode()
    assert "1 round lost to a provider outage" in page
    assert "the next round runs at the first catch-up after 2026-11-22 00:10 UTC" in page
    body = client.get(f"/api/decisions/{d.pk}").json()
    assert (body["status"], body["retry_rounds"]) == ("retryable", 1)
    assert body["retry_after"] == "2026-11-22T00:10:00+00:00"

    sim.set(AT + timedelta(minutes=5))
    model_server.enqueue(success(answer(universe)))
    decide(sync=True)

    page = client.get(f"/decisions/{d.pk}/").content.decode()
    assert "1 round lost to a provider outage" in page and "decided on round 2" in page
    assert page.count("earlier round, provider unavailable") == 2
    assert "latest round" in page
    body = client.get(f"/api/decisions/{d.pk}").json()
    assert (body["status"], body["retry_rounds"], body["retry_after"]) == ("done", 1, None)
    assert len(body["llm_calls"]) == 3


@pytest.mark.django_db
def test_a_retried_decision_seals_as_an_amendment_and_verifies(model_server, setup, sim):
    entry, universe, markets = setup
    outage(model_server, retry_after=str(90 * 60))  # past the 60-minute seal deadline
    run_decision(entry.pk, 1)

    sim.set(AT + timedelta(minutes=61))
    seals.upkeep()  # the snapshot tick: the week is sealed with the entry pending
    assert list(DecisionDigest.objects.values_list("state", flat=True)) == ["pending"]

    sim.set(AT + timedelta(minutes=90))
    model_server.enqueue(success(answer(universe)))
    decide(sync=True)
    seals.upkeep()

    d = the_decision(entry)
    assert (d.status, d.retry_rounds) == (S.DONE, 1)
    digests = list(DecisionDigest.objects.order_by("seq"))
    assert [(x.state, x.amendment) for x in digests] == [("pending", False), ("final", True)]
    record = json.loads(digests[-1].record_bytes())
    assert record["decision"]["status"] == "done"
    # The sealed record holds every round's calls, the outage's 503s first.
    assert [c["http_status"] for c in record["llm_calls"]] == [503, 503, 200]
    out = StringIO()
    call_command("arena", "verify", stdout=out)
    assert out.getvalue().startswith("ok:")


# --- two workers claiming one due decision, on PostgreSQL -------------------------------------


def _at_once(fn, n):
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def run(i):
        try:
            barrier.wait(timeout=10)
            results[i] = (fn(), None)
        except Exception as exc:  # reported to the test
            results[i] = (None, exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_claims_of_a_due_round_have_one_winner(settings, monkeypatch):
    # Threads do not inherit the test's clock: the claims read the wall clock here.
    settings.ARENA_LLM_TIMEOUT = 10
    settings.ARENA_LLM_BACKOFF_BASE = 0.01
    monkeypatch.setenv(KEY_ENV, "sk-or-v1-test")
    markets = make_markets(6)
    with FakeOpenAIServer() as server:
        settings.ARENA_LLM_ENDPOINTS = allowed_endpoints(server)
        cohort = make_cohort([llm_competitor(server)])
        entry = cohort.entries.get()
        universe = freeze_universe(cohort, 1, AT)
        now = clock.now()
        d = Decision.objects.create(
            entry=entry,
            week=1,
            status=S.RETRYABLE,
            claim_token="round-1",
            claimed_at=now - timedelta(minutes=6),
            retry_rounds=1,
            retry_after=now + timedelta(minutes=1),
        )

        assert _at_once(lambda: claim_decision(entry.pk, 1), 2) == [(None, None), (None, None)]

        Decision.objects.filter(pk=d.pk).update(retry_after=now - timedelta(minutes=1))
        text = answer(universe, bets=[bet(markets[0])])
        server.default_responder = lambda request: success(text, delay=0.3)
        results = _at_once(lambda: run_decision(entry.pk, 1, AT), 2)
        requests = len(server.chat_requests)

    assert [exc for _, exc in results] == [None, None]
    d.refresh_from_db()
    assert (d.status, d.retry_rounds) == (S.DONE, 1)
    assert requests == 1 and d.llm_calls.count() == 1  # the loser never called the model
    assert Trade.objects.filter(entry=entry).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_of_a_due_retryable_row_have_one_winner():
    markets = make_markets(1)
    del markets
    cohort = make_cohort([llm_competitor(None, slug="no-server")])
    entry = cohort.entries.get()
    past = clock.now() - timedelta(minutes=1)
    Decision.objects.create(
        entry=entry, week=1, status=S.RETRYABLE, claimed_at=past, retry_rounds=2, retry_after=past
    )

    results = _at_once(lambda: claim_decision(entry.pk, 1), 4)

    assert [exc for _, exc in results] == [None] * 4
    won = [r for r, _ in results if r is not None]
    assert len(won) == 1 and won[0].status == S.CLAIMED and won[0].retry_after is None
    assert won[0].retry_rounds == 2  # a claim keeps the count


@pytest.mark.django_db
def test_a_run_that_died_on_its_database_leaves_no_call_unanswered_when_its_retry_claims():
    """A run whose database connection was killed mid-call ends retryable (it cannot mark its
    own calls): the claim of its retry marks the call it had put on the record as lost."""
    make_markets(1)
    entry = make_cohort([llm_competitor(None, slug="no-server")]).entries.get()
    past = clock.now() - timedelta(minutes=1)
    died = Decision.objects.create(entry=entry, week=1, status=S.RETRYABLE, claimed_at=past,
                                   error="transient database error; will retry")  # fmt: skip
    CallRecorder(died).sent("http://127.0.0.1:9/v1/chat/completions", {"model": "m"})

    again = claim_decision(entry.pk, 1)

    assert again is not None and again.pk == died.pk and again.status == S.CLAIMED
    assert list(died.llm_calls.values_list("error_kind", flat=True)) == [LOST]
    assert again.takeovers == []  # not taken from a live claim: no take-over to report
