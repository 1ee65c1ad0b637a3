"""Fault: the worker dies (SIGKILL) at each point of a model call, and every call stays on the record.

A real Celery worker (threads pool) takes the beat's `decide` task from Redis, claims the LLM
entry's Decision row and calls the fake OpenRouter, which counts every request. We SIGKILL the
worker at one of four points of the call:

    before_send   its call's row cannot be written yet (the table is locked): nothing has left
    in_flight     the request is out and the model is still answering
    after_answer  the answer is back but its row cannot be completed yet (the table is locked)
    during_store  the store has completed the phase's first call and waits on the second's row

A new worker (with a short claim timeout) gets the next decide tick, takes the stale claim over
and decides exactly once. For every point the model server saw exactly as many requests as the
decision has call rows: the dead run's unanswered calls are "lost", shown as such on the
decision page, and the take-over is on the decision and in one log line naming both workers.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from celery import Celery
from django.db import connection, transaction
from django.db.models import Sum
from django.test import Client
from django.utils import timezone

from agents.attempts import LOST
from cohorts.doctor import check_invariants
from cohorts.llm_calls import IDEMPOTENCY_HEADER, LOST_MESSAGE
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
from tests.fakes.openai_server import FakeOpenAIServer, success, unavailable
from tests.faults.conftest import child_env, wait_until, worker_args

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

CLAIM_TIMEOUT = 2  # seconds, for the restarted worker: the dead run's claim goes stale quickly
# point: (requests the dead run sent, of them lost)
POINTS = {
    "before_send": (0, 0),
    "in_flight": (1, 1),
    "after_answer": (1, 1),
    "during_store": (2, 2),
}


def _decide_runs_finished(n: int) -> int:
    return JobRun.objects.filter(job="decide", status=JobRun.Status.OK).count() >= n


def _blocked_on_calls(verb: str) -> int:
    """Statements on the call table waiting for a lock (a worker stopped at our lock)."""
    with connection.cursor() as cur:
        # Inside a transaction the activity view is a snapshot unless cleared.
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query ILIKE %s",
            [f"{verb}%agents_llmcall%"],
        )
        return cur.fetchone()[0]


@pytest.mark.parametrize("point", list(POINTS))
def test_worker_killed_at_each_point_of_a_model_call_leaves_every_call_on_the_record(
    point, tmp_path, redis_server, procs
):
    now = timezone.now()
    markets = [
        make_market(source=Market.Source.POLYMARKET, volume=Decimal(1000 - i),
                    close_time=now + timedelta(days=30))
        for i in range(5)
    ]  # fmt: skip
    gate = threading.Event()  # the dead run's answer waits for it
    with FakeOpenAIServer() as server:
        llm = llm_competitor(server, slug="llm-killed")
        cohort, _ = open_cohort(
            week_start_for(now), competitors=[llm, baseline_competitor("favorite")], at=now
        )
        universe = freeze_universe(cohort, 1, now)  # the worker's decide reuses this one
        bet = {"market_id": str(markets[0].pk), "outcome": "Yes", "amount": 100, "probability": 0.7}
        text = answer(universe, bets=[bet])
        held = POINTS[point][0]  # the dead run's last request, whose answer is held

        def respond(request):
            n = len(server.chat_requests)
            if point == "during_store" and n == 1:
                return unavailable()  # retried at once: the phase has two calls
            if n == held:
                server.stopping.wait(120) if point == "in_flight" else gate.wait(60)
            return success(text)

        server.default_responder = respond
        env = child_env(tmp_path, redis_server.url, **{KEY_ENV: "sk-or-v1-test"},
                        ARENA_LLM_ENDPOINTS=allowed_endpoints(server),
                        ARENA_LLM_TIMEOUT="60", ARENA_LLM_MAX_RETRIES="1",
                        ARENA_LLM_BACKOFF_BASE="0.01")  # fmt: skip
        producer = Celery(broker=redis_server.url, set_as_current=False)

        with transaction.atomic():
            if point == "before_send":
                connection.cursor().execute("LOCK TABLE agents_llmcall IN EXCLUSIVE MODE")
            first = procs("worker-1", worker_args("first"), env)
            producer.send_task("cohorts.tasks.decide")
            if point == "before_send":  # both entries' first call rows wait for the lock
                wait_until(lambda: _blocked_on_calls("INSERT") >= 2, 60, "the blocked call rows",
                           procs=(first,))  # fmt: skip
            else:
                wait_until(lambda: len(server.chat_requests) >= held, 60, "the model call",
                           procs=(first,))  # fmt: skip
            if point == "after_answer":
                connection.cursor().execute("LOCK TABLE agents_llmcall IN EXCLUSIVE MODE")
            elif point == "during_store":
                connection.cursor().execute(
                    "SELECT id FROM agents_llmcall WHERE attempt = 2 FOR UPDATE"
                )
            if point in ("after_answer", "during_store"):
                gate.set()
                wait_until(lambda: _blocked_on_calls("UPDATE") >= 1, 60, "the blocked store",
                           procs=(first,))  # fmt: skip
            first.kill()
        gate.set()

        llm_entry = Entry.objects.get(cohort=cohort, competitor=llm)
        stuck = Decision.objects.get(entry=llm_entry, week=1)
        assert stuck.status == Decision.Status.CLAIMED
        assert stuck.claimed_by.startswith("first@")
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

        # A third tick finds nothing left to do (no further call to the model, no new trades).
        wait_until(lambda: _decide_runs_finished(2), 30, "the second decide run", procs=(second,))
        producer.send_task("cohorts.tasks.decide")
        wait_until(lambda: _decide_runs_finished(3), 30, "the third decide run", procs=(second,))
        third = JobRun.objects.filter(job="decide").order_by("-started_at").first()
        assert third.summary["entries"] == 0
        requests = list(server.chat_requests)
        second.stop()
        log = second.output()

    sent_by_dead, lost = POINTS[point]
    calls = list(LLMCall.objects.filter(decision=done).order_by("attempt"))
    assert len(requests) == len(calls) == sent_by_dead + 1  # every request seen is on the record
    assert [c.error_kind for c in calls[:lost]] == [LOST] * lost
    assert all(c.error == LOST_MESSAGE and c.url.endswith("/chat/completions") for c in calls[:lost])
    assert all(c.request.get("messages") for c in calls)  # what was asked is kept
    assert calls[-1].error_kind == "" and calls[-1].completion_tokens is not None
    # The same request sent again by the run that took over carries the same key.
    keys = [r.headers[IDEMPOTENCY_HEADER] for r in requests]
    assert keys[-1] == f"arena-{done.pk}-r0-initial-1"
    if point == "in_flight" or point == "after_answer":
        assert keys[0] == keys[-1]

    assert len(done.takeovers) == 1
    takeover = done.takeovers[0]
    assert takeover["from"] == stuck.claimed_by and takeover["to"].startswith("second@")
    assert takeover["lost_calls"] == lost
    lines = [line for line in log.splitlines() if 'msg="decision taken over"' in line]
    takeover_line = next(line for line in lines if f" decision={done.pk} " in line)
    assert f"old_worker={stuck.claimed_by}" in takeover_line
    assert f"new_worker={takeover['to']}" in takeover_line

    page = Client().get(f"/decisions/{done.pk}/").content.decode()
    assert "Taken over" in page
    assert page.count(LOST_MESSAGE) == lost
    if lost:
        assert f"+ {lost} call{'s' if lost > 1 else ''} with unknown tokens" in page

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
