"""Fault: the worker dies (SIGKILL) in the middle of a decision, while the model is answering.

A real Celery worker (threads pool) takes the beat's `decide` task from Redis, claims the LLM
entry's Decision row and calls the fake OpenRouter, which holds its answer. We SIGKILL the
worker at that moment: the claim is left behind, nothing else written. A new worker (with a short
claim timeout) gets the next decide tick, which re-enqueues the stale claim; the claim is taken
over and the decision executes exactly once: one set of trades and ledger rows, cash == ledger.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from celery import Celery
from django.db.models import Sum
from django.utils import timezone

from cohorts.doctor import check_invariants
from cohorts.models import Decision, Entry, LedgerEntry, LLMCall, Trade
from cohorts.services import open_cohort, week_start_for
from cohorts.universe import freeze_universe
from core.models import JobRun
from markets.models import Market
from tests.agents.helpers import (
    KEY_ENV,
    allowed_endpoints,
    answer,
    baseline_competitor,
    llm_competitor,
)
from tests.factories import make_market
from tests.fakes.openai_server import FakeOpenAIServer, success
from tests.faults.conftest import child_env, wait_until, worker_args

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

CLAIM_TIMEOUT = 2  # seconds, for the restarted worker: the dead run's claim goes stale quickly


def _decide_runs_finished(n: int) -> bool:
    return JobRun.objects.filter(job="decide", status=JobRun.Status.OK).count() >= n


def test_killed_worker_mid_decision_is_reclaimed_and_decides_exactly_once(
    tmp_path, redis_server, procs
):
    now = timezone.now()
    markets = [
        make_market(source=Market.Source.POLYMARKET, volume=Decimal(1000 - i),
                    close_time=now + timedelta(days=30))
        for i in range(5)
    ]  # fmt: skip
    with FakeOpenAIServer() as server:
        llm = llm_competitor(server, slug="llm-killed")
        cohort, _ = open_cohort(
            week_start_for(now), competitors=[llm, baseline_competitor("favorite")], at=now
        )
        universe = freeze_universe(cohort, 1, now)  # the worker's decide reuses this one
        bet = {"market_id": str(markets[0].pk), "outcome": "Yes", "amount": 100, "probability": 0.7}
        text = answer(universe, bets=[bet])
        # The first call hangs (until the server stops); any later one answers at once.
        server.default_responder = lambda request: success(
            text, delay=120 if len(server.chat_requests) == 1 else 0
        )
        env = child_env(tmp_path, redis_server.url, **{KEY_ENV: "sk-or-v1-test"},
                        ARENA_LLM_ENDPOINTS=allowed_endpoints(server),
                        ARENA_LLM_TIMEOUT="60", ARENA_LLM_MAX_RETRIES="0")  # fmt: skip
        producer = Celery(broker=redis_server.url)

        first = procs("worker-1", worker_args("first"), env)
        producer.send_task("cohorts.tasks.decide")
        wait_until(lambda: server.chat_requests, 60, "the model call", procs=(first,))
        first.kill()

        llm_entry = Entry.objects.get(cohort=cohort, competitor=llm)
        stuck = Decision.objects.get(entry=llm_entry, week=1)
        assert stuck.status == Decision.Status.CLAIMED
        assert not Trade.objects.filter(entry=llm_entry).exists()

        second = procs(
            "worker-2",
            worker_args("second"),
            {**env, "ARENA_CLAIM_TIMEOUT_SECONDS": str(CLAIM_TIMEOUT)},
        )
        # The next tick only re-enqueues a claim once it is stale for the new worker.
        wait_until(
            lambda: timezone.now() - stuck.claimed_at > timedelta(seconds=CLAIM_TIMEOUT + 1),
            10, "the dead claim to go stale",
        )  # fmt: skip
        producer.send_task("cohorts.tasks.decide")
        done = wait_until(
            lambda: Decision.objects.filter(entry=llm_entry, status=Decision.Status.DONE).first(),
            60, "the reclaimed decision to finish", procs=(second,),
        )  # fmt: skip
        assert done.claim_token != stuck.claim_token  # taken over, not the dead run's claim

        # A third tick finds nothing left to do (no second call to the model, no new trades).
        wait_until(lambda: _decide_runs_finished(2), 30, "the second decide run", procs=(second,))
        producer.send_task("cohorts.tasks.decide")
        wait_until(lambda: _decide_runs_finished(3), 30, "the third decide run", procs=(second,))
        third = JobRun.objects.filter(job="decide").order_by("-started_at").first()
        assert third.summary["entries"] == 0
        model_calls = len(server.chat_requests)

    assert model_calls == 2  # the killed run's call and the reclaimed run's call
    assert LLMCall.objects.filter(decision=done).count() == 1  # the dead run stored none
    assert Decision.objects.filter(entry__cohort=cohort).count() == 2
    assert set(Decision.objects.values_list("status", flat=True)) == {Decision.Status.DONE}

    trades = Trade.objects.filter(entry=llm_entry)
    assert [(t.side, t.amount) for t in trades] == [("BUY", Decimal("100.00"))]
    kinds = sorted(LedgerEntry.objects.filter(entry=llm_entry).values_list("kind", flat=True))
    assert kinds == [LedgerEntry.Kind.BUY, LedgerEntry.Kind.DEPOSIT]
    llm_entry.refresh_from_db()
    ledger = LedgerEntry.objects.filter(entry=llm_entry).aggregate(s=Sum("amount"))["s"]
    assert llm_entry.cash == ledger == llm_entry.initial_balance - Decimal("100.00")
    assert check_invariants() == []
