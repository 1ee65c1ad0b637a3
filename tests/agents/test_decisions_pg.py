"""Concurrency on PostgreSQL: two decide() runs at once make one decision per entry.

Real threads, real transactions (transaction=True), the fake OpenRouter answering slowly enough
that the two runs overlap.
"""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from cohorts.decisions.run import decide, run_decision
from cohorts.models import Decision, Entry, LedgerEntry, LLMCall, Trade
from cohorts.universe import freeze_universe
from tests.agents.helpers import (
    AT,
    KEY_ENV,
    allowed_endpoints,
    answer,
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import FakeOpenAIServer, success

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fast_llm(settings, monkeypatch):
    settings.ARENA_LLM_TIMEOUT = 10
    settings.ARENA_LLM_BACKOFF_BASE = 0.01
    monkeypatch.setenv(KEY_ENV, "sk-or-v1-test")


def _run_in_threads(target, n=2):
    errors = []
    barrier = threading.Barrier(n)

    def worker():
        try:
            barrier.wait()
            target()
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


def test_two_concurrent_decides_make_one_decision_and_one_set_of_trades_per_entry(settings):
    markets = make_markets(10)
    with FakeOpenAIServer() as server:
        settings.ARENA_LLM_ENDPOINTS = allowed_endpoints(server)
        competitors = [llm_competitor(server, slug=f"llm-{i}") for i in range(3)]
        competitors += [baseline_competitor("favorite"), baseline_competitor("random")]
        cohort = make_cohort(competitors)
        universe = freeze_universe(cohort, 1, AT)
        bets = [
            {"market_id": str(markets[0].pk), "outcome": "Yes", "amount": 100, "probability": 0.6}
        ]
        text = answer(universe, bets=bets)
        server.default_responder = lambda request: success(text, delay=0.2)

        _run_in_threads(lambda: decide(cohort=cohort.pk, at=AT, sync=True))

        llm_requests = len(server.chat_requests)

    entries = list(Entry.objects.filter(cohort=cohort))
    assert Decision.objects.filter(entry__cohort=cohort).count() == len(entries) == 5
    assert set(Decision.objects.values_list("status", flat=True)) == {"done"}
    # Each LLM entry was asked exactly once: the loser of a claim never calls the model.
    assert llm_requests == 3
    assert LLMCall.objects.filter(decision__entry__competitor__kind="llm").count() == 3
    for entry in entries:
        decision = Decision.objects.get(entry=entry)
        trades = Trade.objects.filter(entry=entry)
        assert all(t.decision_id == decision.pk for t in trades)
        ledger_sum = sum(LedgerEntry.objects.filter(entry=entry).values_list("amount", flat=True))
        assert entry.cash == ledger_sum
        spent = sum((t.amount for t in trades), Decimal(0))
        assert entry.cash == entry.initial_balance - spent
    # Each LLM entry made its one bet once. Named by kind: without an ORDER BY, PostgreSQL
    # returns rows in heap order, which the entries' cash updates change, so the first three
    # entries read above need not be the LLM ones (a baseline may bet on several markets).
    llm_entries = Entry.objects.filter(cohort=cohort, competitor__kind="llm")
    assert llm_entries.count() == 3
    for entry in llm_entries:
        assert Trade.objects.filter(entry=entry).count() == 1


def test_concurrent_reclaim_of_a_stale_claim_has_one_winner(settings):
    make_markets(5)
    cohort = make_cohort([baseline_competitor("favorite")])
    entry = cohort.entries.get()
    freeze_universe(cohort, 1, AT)
    old = timezone.now() - timedelta(seconds=settings.ARENA_CLAIM_TIMEOUT_SECONDS + 5)
    Decision.objects.create(entry=entry, week=1, claim_token="dead", claimed_at=old)

    _run_in_threads(lambda: run_decision(entry.pk, 1, AT), n=4)

    decision = Decision.objects.get(entry=entry)
    assert decision.status == "done"
    assert decision.llm_calls.count() == 1  # one synthetic baseline "call": one runner
    assert Trade.objects.filter(entry=entry).count() == len(decision.parsed["bets"]) > 0
