"""The sealed bytes of a fixed week stay what they are.

A sealed record is a promise to outsiders: anyone holding an export recomputes these hashes with
docs/verification.md alone, so no change to the code that builds records may move a byte. The
week below is built row by row with fixed ids and times (a decision with a failed and a repaired
call, a forecast, a trade with its ledger row, and a skipped decision); its hashes are fixed
constants, so any change to a record's layout or fixed forms fails here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from agents.models import Competitor
from cohorts.models import (
    Cohort,
    Decision,
    Entry,
    Forecast,
    LedgerEntry,
    LLMCall,
    Position,
    Trade,
    Universe,
)
from cohorts.seals import sealing as seals
from cohorts.seals.models import DecisionDigest, WeekSeal
from markets.models import Market

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 1, tzinfo=UTC)
AT = START + timedelta(minutes=5, microseconds=250)

# Recorded from the week below with the code of commit 04e7fc3.
DONE_RECORD_HASH = "64a1dce3f4db5eec15fac22e518e0f035b5053e2c0e8c280bb9233239e1eb078"
SKIPPED_RECORD_HASH = "1204f62f4e72a6cb143c5aa173717896855c87d222f6d7fccb644ba11e1f4d98"
WEEK_ROOT = "596d0a57482b284158a4354b4d7a01c39cc35177234c36801fce70981df8a350"


def _week() -> Cohort:
    cohort = Cohort.objects.create(pk=41, kind=Cohort.Kind.LIVE, week_start=START)
    model = Competitor.objects.create(
        pk=51, slug="fixed-model", display_name="Fixed", kind=Competitor.Kind.LLM
    )
    baseline = Competitor.objects.create(
        pk=52, slug="fixed-baseline", display_name="Base", kind=Competitor.Kind.BASELINE
    )
    e1 = Entry.objects.create(pk=61, cohort=cohort, competitor=model, cash=Decimal("900.00"))
    e2 = Entry.objects.create(
        pk=62, cohort=cohort, competitor=baseline, replicate=2, cash=Decimal("1000")
    )
    market = Market.objects.create(
        pk=71,
        source=Market.Source.POLYMARKET,
        external_id="fixed-71",
        question="Will the fixed event happen?",
        outcomes=["Yes", "No"],
        last_prices={"Yes": "0.4"},
    )
    universe = Universe.objects.create(
        cohort=cohort,
        week=1,
        frozen_at=AT,
        content_hash="ab" * 32,
        markets=[{"market_id": 71, "outcomes": ["Yes", "No"], "prices": {"Yes": "0.4"}}],
        forecast_sample=[71],
    )
    done = Decision.objects.create(
        pk=81,
        entry=e1,
        week=1,
        status=Decision.Status.DONE,
        claim_token="t",
        claimed_at=AT,
        decided_at=AT,
        finished_at=AT + timedelta(seconds=9, microseconds=5),
        action=Decision.Action.BET,
        reasoning='The price is low. «naïve» \u2028 quotes " and \\ slashes',
        parsed={"action": "BET", "bets": [{"market_id": "71", "amount": 100}], "p": 0.1},
        validation_errors=[{"phase": "initial", "problems": ["no forecasts"]}],
        universe=universe,
        universe_hash=universe.content_hash,
        prompt_version="v1",
        prompt_sha256="cd" * 32,
        system_prompt="You are a forecaster.",
        user_prompt="Markets:\n[71] Will the fixed event happen?",
        forecast_sample=[71],
        cash_before=Decimal("1000"),
        tokens_in=1234,
        tokens_out=567,
        cost_usd=Decimal("0.0012345678"),
        latency_ms=4321,
    )
    LLMCall.objects.create(
        pk=92,
        decision=done,
        attempt=2,
        phase="repair",
        url="https://llm.example/v1/chat/completions",
        request={"model": "m", "messages": [{"role": "user", "content": "again"}]},
        raw_response='{"choices": []}',
        http_status=200,
        prompt_tokens=1000,
        completion_tokens=500,
        reasoning_tokens=None,
        cost_usd=Decimal("0.00000735"),
        cost_source="usage",
        latency_ms=3000,
        served_model="m-2026",
        generation_id="gen-2",
        finish_reason="stop",
        started_at=AT + timedelta(seconds=5),
    )
    LLMCall.objects.create(
        pk=91,
        decision=done,
        attempt=1,
        phase="initial",
        url="https://llm.example/v1/chat/completions",
        request={"model": "m", "messages": [{"role": "user", "content": "go"}]},
        raw_response="not json",
        http_status=502,
        error="HTTP 502: bad gateway",
        error_kind="http",
        prompt_tokens=234,
        completion_tokens=67,
        reasoning_tokens=12,
        cost_usd=None,
        latency_ms=1321,
        started_at=AT + timedelta(seconds=1),
    )
    Forecast.objects.create(
        pk=101,
        decision=done,
        entry=e1,
        market=market,
        outcome="Yes",
        probability=0.1,
        market_price=0.4,
        source=Forecast.Source.BET,
        created_at=AT,
    )
    position = Position.objects.create(
        pk=111,
        entry=e1,
        market=market,
        outcome="Yes",
        shares=Decimal("250"),
        cost_basis=Decimal("100"),
        opened_at=AT,
    )
    trade = Trade.objects.create(
        pk=121,
        entry=e1,
        decision=done,
        position=position,
        side=Trade.Side.BUY,
        amount=Decimal("100"),
        shares=Decimal("250"),
        price=Decimal("0.4"),
        quote={"Yes": "0.4", "at": "2026-03-01T00:05:00Z"},
        executed_at=AT,
    )
    LedgerEntry.objects.create(
        pk=131,
        entry=e1,
        kind=LedgerEntry.Kind.BUY,
        amount=Decimal("-100"),
        trade=trade,
        memo="bet on [71] Yes",
        created_at=AT,
    )
    Decision.objects.create(
        pk=82,
        entry=e2,
        week=1,
        status=Decision.Status.SKIPPED,
        claimed_at=AT,
        decided_at=AT,
        finished_at=AT,
        error="no API key",
        user_prompt="not sealed for a skip",
    )
    return cohort


def test_a_fixed_week_seals_to_the_same_bytes_as_it_always_has():
    cohort = _week()
    seal = seals.seal_week(cohort.pk, 1)
    assert seal is not None and seal.reason == WeekSeal.Reason.COMPLETE
    digests = {d.decision_id: d for d in DecisionDigest.objects.filter(cohort=cohort)}
    done, skipped = digests[81], digests[82]
    for digest in (done, skipped):
        assert seals.sha256_hex(digest.record_bytes()) == digest.record_hash
    assert (done.record_hash, skipped.record_hash, seal.root) == (
        DONE_RECORD_HASH,
        SKIPPED_RECORD_HASH,
        WEEK_ROOT,
    )
    # What the record says about the calls: both attempts, in attempt order, with the fixed forms.
    calls = json.loads(done.record_bytes())["llm_calls"]
    assert [c["id"] for c in calls] == [91, 92]
    assert calls[0]["started_at"] == "2026-03-01T00:05:01.000250Z"
    assert (calls[0]["cost_usd"], calls[1]["cost_usd"]) == (None, "0.000007")
