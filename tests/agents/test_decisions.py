"""run_decision / decide against a real fake OpenRouter (tests/fakes/openai_server.py).

The competitor's base_url points at the fake server and its key comes from an env var, as an
operator would configure an outside endpoint. Retry timing is configured small through settings
so the real retry path runs quickly.
"""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.prompts import PROMPT_SHA256, PROMPT_VERSION
from cohorts.decisions.run import decide, run_decision
from cohorts.models import Decision, Entry, Forecast, LedgerEntry, LLMCall, Position, Trade
from cohorts.universe import freeze_universe
from markets.models import Market
from tests.agents.helpers import (
    AT,
    answer,
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import (
    bad_gateway,
    empty_content,
    fenced_json,
    in_band_error,
    payment_required,
    prose_around_json,
    rate_limited,
    success,
    unauthorized,
)

pytestmark = pytest.mark.django_db
INITIAL = Decimal("10000.00")


@pytest.fixture
def setup(model_server):
    """Six markets, one LLM entry; returns (entry, universe, markets)."""
    markets = make_markets(6)
    cohort = make_cohort([llm_competitor(model_server)])
    universe = freeze_universe(cohort, 1, AT)
    return cohort.entries.get(), universe, markets


def bet(market, amount=100, probability=0.7, outcome="Yes"):
    return {
        "market_id": str(market.pk),
        "outcome": outcome,
        "amount": amount,
        "probability": probability,
    }


def repair_message(model_server, index=1) -> str:
    return model_server.chat_requests[index].json["messages"][-1]["content"]


def test_success_with_usage_cost_stores_everything(model_server, setup):
    entry, universe, markets = setup
    model_server.enqueue(success(answer(universe, bets=[bet(markets[0], 250)]), cost=0.0123))

    decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.DONE
    assert decision.action == "BET"
    assert decision.universe_hash == universe.content_hash
    assert decision.prompt_version == PROMPT_VERSION
    assert decision.prompt_sha256 == PROMPT_SHA256
    assert decision.cash_before == INITIAL
    assert decision.cost_usd == Decimal("0.012300")
    assert (decision.tokens_in, decision.tokens_out) == (52, 38)
    call = decision.llm_calls.get()
    assert (call.attempt, call.phase, call.http_status, call.cost_source) == (
        1,
        "initial",
        200,
        "usage",
    )
    assert json.loads(call.raw_response)["usage"]["cost"] == 0.0123
    assert call.request["model"] == "openai/gpt-test"
    assert call.request["messages"][1]["content"] == decision.user_prompt
    # The request really carried the key from the competitor's env var.
    assert model_server.chat_requests[0].headers["Authorization"] == "Bearer sk-or-v1-test"

    trade = Trade.objects.get(decision=decision)
    assert (trade.side, trade.amount, trade.price) == (
        "BUY",
        Decimal("250.00"),
        Decimal(markets[0].last_prices["Yes"]),
    )
    entry.refresh_from_db()
    assert entry.cash == INITIAL - Decimal("250.00")
    assert (
        sum(LedgerEntry.objects.filter(entry=entry).values_list("amount", flat=True)) == entry.cash
    )

    forecasts = {(f.market_id, f.outcome): f for f in Forecast.objects.filter(decision=decision)}
    assert forecasts[(markets[0].pk, "Yes")].source == Forecast.Source.BET
    assert forecasts[(markets[0].pk, "Yes")].probability == 0.7
    assert forecasts[(markets[0].pk, "Yes")].market_price == float(markets[0].last_prices["Yes"])
    sampled = {m for (m, _), f in forecasts.items() if f.source == Forecast.Source.SAMPLE}
    assert sampled | {markets[0].pk} == set(universe.forecast_sample)


@pytest.mark.parametrize("wrap", [fenced_json, prose_around_json])
def test_fenced_or_prose_wrapped_json_is_accepted(model_server, setup, wrap):
    entry, universe, markets = setup
    model_server.enqueue(wrap(json.loads(answer(universe, bets=[bet(markets[1], 60)]))))

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "BET")
    assert decision.validation_errors == []
    assert Trade.objects.filter(decision=decision).count() == 1


def test_invalid_json_then_valid_uses_one_repair_quoting_the_error(model_server, setup):
    entry, universe, markets = setup
    model_server.enqueue(
        success('{"action": "BET", "bets": [ oops'),
        success(answer(universe, bets=[bet(markets[0], 100)])),
    )

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "BET")
    calls = list(decision.llm_calls.order_by("attempt"))
    assert [(c.attempt, c.phase) for c in calls] == [(1, "initial"), (2, "repair")]
    problem = decision.validation_errors[0]["problems"][0]
    assert "never closed" in problem or "not valid JSON" in problem
    assert problem in repair_message(model_server)
    # The repair conversation carries the model's own bad answer back to it.
    assert model_server.chat_requests[1].json["messages"][-2] == {
        "role": "assistant",
        "content": '{"action": "BET", "bets": [ oops',
    }
    assert decision.tokens_in == 104  # both calls counted


def test_invalid_twice_holds_with_the_reason_and_keeps_both_calls(model_server, setup):
    entry, universe, _ = setup
    model_server.enqueue(success("I would rather not say."), success("still no JSON"))

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "HOLD")
    assert "no JSON object" in decision.hold_reason
    assert [e["phase"] for e in decision.validation_errors] == ["initial", "repair"]
    assert decision.llm_calls.count() == 2
    assert not Forecast.objects.filter(decision=decision).exists()
    assert not Trade.objects.filter(entry=entry).exists()
    entry.refresh_from_db()
    assert entry.cash == INITIAL


@pytest.mark.parametrize(
    "bad_bet, expected",
    [
        ({"amount": 3000}, "above 25%"),  # over the cap: a rule the parser cannot see
        ({"amount": 20}, "below the $50"),
        ({"market_id": "999999"}, "unknown market_id"),
        ({"probability": 1.5}, "between 0 and 1"),
        ({"amount": "lots"}, "must be a number"),
    ],
)
def test_rule_violations_get_one_repair(model_server, setup, bad_bet, expected):
    entry, universe, markets = setup
    model_server.enqueue(
        success(answer(universe, bets=[{**bet(markets[0]), **bad_bet}])),
        success(answer(universe, bets=[bet(markets[0], 100)])),
    )

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "BET")
    assert expected in repair_message(model_server)
    assert any(expected in p for p in decision.validation_errors[0]["problems"])
    assert Trade.objects.get(decision=decision).amount == Decimal("100.00")


def test_nan_amount_is_refused(model_server, setup):
    entry, universe, markets = setup
    text = answer(universe, bets=[bet(markets[0])]).replace('"amount": 100', '"amount": NaN')
    assert "NaN" in text
    model_server.enqueue(success(text), success(text))

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "HOLD")
    assert "finite" in decision.hold_reason
    assert not Trade.objects.filter(entry=entry).exists()


@pytest.mark.parametrize("response", [unauthorized, payment_required], ids=["401", "402"])
def test_auth_and_credit_errors_fail_after_one_call(model_server, setup, response):
    entry, _, _ = setup
    model_server.enqueue(response())

    decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.FAILED
    assert decision.action == ""
    call = decision.llm_calls.get()
    assert call.http_status == response().status
    assert call.error_kind == "http"
    assert str(call.http_status) in decision.error
    assert len(model_server.chat_requests) == 1
    assert not Forecast.objects.filter(decision=decision).exists()
    entry.refresh_from_db()
    assert entry.cash == INITIAL


@pytest.mark.parametrize(
    "first",
    [lambda: rate_limited(retry_after="0"), bad_gateway, in_band_error, empty_content],
    ids=["429-retry-after", "502", "in-band-error", "empty"],
)
def test_transient_failure_then_success(model_server, setup, first):
    entry, universe, markets = setup
    model_server.enqueue(first(), success(answer(universe, bets=[bet(markets[2], 75)])))

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "BET")
    calls = list(decision.llm_calls.order_by("attempt"))
    assert len(calls) == 2 and calls[0].error and not calls[1].error
    assert calls[0].phase == calls[1].phase == "initial"
    assert Trade.objects.get(decision=decision).amount == Decimal("75.00")


def test_in_band_errors_every_time_fail_the_decision(model_server, setup):
    entry, _, _ = setup
    model_server.enqueue(*[in_band_error() for _ in range(6)])

    decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.FAILED
    assert "in-band" in decision.error
    assert decision.llm_calls.count() == len(model_server.chat_requests) >= 2
    assert set(decision.llm_calls.values_list("error_kind", flat=True)) == {"in_band"}


def test_slow_response_past_the_timeout_fails(model_server, setup, settings):
    settings.ARENA_LLM_TIMEOUT = 0.3
    settings.ARENA_LLM_MAX_RETRIES = 1
    settings.ARENA_DECISION_MAX_ROUNDS = 1  # a timeout is an outage: one round, then failed
    entry, universe, _ = setup
    late = success(answer(universe), delay=3)
    model_server.enqueue(late, late)

    decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.FAILED
    assert decision.error.startswith("provider unavailable for 1 round")
    assert list(decision.llm_calls.values_list("error_kind", flat=True)) == ["timeout", "timeout"]
    assert decision.llm_calls.first().http_status is None


def test_repair_call_failing_holds_and_keeps_the_decision_done(model_server, setup):
    entry, universe, markets = setup
    model_server.enqueue(success(answer(universe, bets=[bet(markets[0], 5000)])), unauthorized())

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.action) == ("done", "HOLD")
    assert "repair call failed" in decision.hold_reason
    assert list(decision.llm_calls.values_list("phase", flat=True)) == ["initial", "repair"]


def test_sell_in_a_later_week_sees_the_position(model_server, setup):
    entry, universe, markets = setup
    model_server.enqueue(success(answer(universe, bets=[bet(markets[0], 200, outcome="No")])))
    run_decision(entry.pk, 1, AT)
    position = Position.objects.get(entry=entry)
    week2 = AT + timedelta(days=7)
    universe2 = freeze_universe(entry.cohort, 2, week2)
    model_server.enqueue(
        success(answer(universe2, sells=[{"position_id": str(position.pk), "percentage": 100}]))
    )

    decision = run_decision(entry.pk, 2, week2)

    assert (decision.status, decision.action) == ("done", "SELL")
    assert f"position_id {position.pk}:" in decision.user_prompt
    no_price = Decimal(1) - Decimal(markets[0].last_prices["Yes"])
    assert f"current price {no_price.normalize()}" in decision.user_prompt
    position.refresh_from_db()
    assert position.status == Position.Status.EXITED
    sold = Trade.objects.get(decision=decision, side="SELL")
    assert abs(sold.amount - Decimal("200")) <= Decimal("0.01")  # same price; shares round down
    entry.refresh_from_db()
    assert entry.cash == INITIAL - Decimal("200") + sold.amount


def test_a_fresh_claim_is_left_alone(model_server, setup):
    entry, _, _ = setup
    Decision.objects.create(entry=entry, week=1, claim_token="other", claimed_at=timezone.now())

    decision = run_decision(entry.pk, 1, AT)

    assert (decision.status, decision.claim_token) == ("claimed", "other")
    assert model_server.chat_requests == []


def test_a_stale_claim_is_reclaimed(model_server, setup, settings):
    entry, universe, markets = setup
    old = timezone.now() - timedelta(seconds=settings.ARENA_CLAIM_TIMEOUT_SECONDS + 60)
    stale = Decision.objects.create(entry=entry, week=1, claim_token="dead", claimed_at=old)
    model_server.enqueue(success(answer(universe, bets=[bet(markets[0], 100)])))

    decision = run_decision(entry.pk, 1, AT)

    assert decision.pk == stale.pk
    assert decision.status == Decision.Status.DONE
    assert decision.claim_token != "dead"
    assert Trade.objects.filter(entry=entry).count() == 1


def test_a_decisions_totals_count_every_call_it_made_including_a_dead_runs(
    model_server, setup, settings
):
    """The worker that claimed first got an answer, billed, then died: its call is kept, and
    the decision's tokens and cost count it with the reclaiming run's, as the audit page lists
    both (the provider billed both)."""
    entry, universe, markets = setup
    old = timezone.now() - timedelta(seconds=settings.ARENA_CLAIM_TIMEOUT_SECONDS + 60)
    stale = Decision.objects.create(entry=entry, week=1, claim_token="dead", claimed_at=old)
    stale.llm_calls.create(
        attempt=1,
        phase="decide",
        raw_response="{}",
        http_status=200,
        prompt_tokens=1000,
        completion_tokens=200,
        cost_usd=Decimal("0.0125"),
        latency_ms=4000,
        started_at=old,
    )
    model_server.enqueue(
        success(answer(universe, bets=[bet(markets[0], 100)]), prompt_tokens=52, cost=0.00384)
    )

    decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.DONE
    calls = list(decision.llm_calls.order_by("attempt"))
    assert [c.prompt_tokens for c in calls] == [1000, 52]
    assert decision.tokens_in == 1052
    assert decision.tokens_out == 200 + calls[1].completion_tokens
    assert decision.cost_usd == Decimal("0.0125") + calls[1].cost_usd
    assert decision.latency_ms == 4000 + calls[1].latency_ms


def test_done_decision_is_not_run_again(model_server, setup):
    entry, universe, markets = setup
    model_server.enqueue(success(answer(universe, bets=[bet(markets[0], 100)])))
    first = run_decision(entry.pk, 1, AT)

    again = run_decision(entry.pk, 1, AT)

    assert again.pk == first.pk
    assert len(model_server.chat_requests) == 1
    assert Trade.objects.filter(entry=entry).count() == 1


def test_without_api_key_llm_entries_are_skipped_and_baselines_decide(settings):
    settings.ARENA_LLM_API_KEY = ""
    make_markets(30)
    llm = llm_competitor(None, slug="no-key")  # default endpoint, default key: none set
    cohort = make_cohort([llm, baseline_competitor("favorite"), baseline_competitor("market")])

    count = decide(cohort=cohort, at=AT, sync=True)

    assert count == 3
    by_slug = {
        d.entry.competitor.slug: d for d in Decision.objects.select_related("entry__competitor")
    }
    assert by_slug["no-key"].status == Decision.Status.SKIPPED
    assert "OPENROUTER_API_KEY" in by_slug["no-key"].error
    assert not by_slug["no-key"].llm_calls.exists()
    assert by_slug["baseline-favorite"].status == Decision.Status.DONE
    assert by_slug["baseline-favorite"].action == "BET"
    assert by_slug["baseline-market"].action == "HOLD"
    assert Forecast.objects.filter(decision=by_slug["baseline-market"]).count() == 20


def test_skipped_llm_entry_runs_once_a_key_is_set(model_server, settings):
    settings.ARENA_LLM_API_KEY = ""
    settings.ARENA_LLM_ENDPOINTS = f"{model_server.base_url}|ARENA_MISSING_KEY"
    make_markets(4)
    cohort = make_cohort([llm_competitor(model_server, api_key_env="ARENA_MISSING_KEY")])
    entry = cohort.entries.get()
    assert run_decision(entry.pk, 1, AT).status == Decision.Status.SKIPPED

    settings.ARENA_LLM_API_KEY = "unused"  # the competitor's own env var is what counts
    import os

    os.environ["ARENA_MISSING_KEY"] = "sk-now-set"
    try:
        universe = entry.cohort.universes.get(week=1)
        model_server.enqueue(success(answer(universe)))
        decision = run_decision(entry.pk, 1, AT)
    finally:
        del os.environ["ARENA_MISSING_KEY"]

    assert (decision.status, decision.action) == ("done", "HOLD")


def test_decide_freezes_one_universe_shared_by_all_entries(model_server):
    make_markets(8)
    llm = llm_competitor(model_server, replicates=2)
    cohort = make_cohort([llm, baseline_competitor("cash")])
    text = answer(freeze_universe(cohort, 1, AT))  # decide() must reuse this universe
    model_server.default_responder = lambda request: success(text)

    assert decide(cohort=cohort, at=AT, sync=True) == 3

    decisions = Decision.objects.filter(entry__cohort=cohort)
    assert decisions.count() == 3
    assert {d.universe_hash for d in decisions} == {cohort.universes.get(week=1).content_hash}
    assert {d.status for d in decisions} == {"done"}
    # The universe part of the prompt is byte-identical for every entry.
    tails = {d.user_prompt.split("Universe:", 1)[1] for d in decisions}
    assert len(tails) == 1
    assert Entry.objects.filter(cohort=cohort, cash=INITIAL).count() == 3


def test_decide_enqueues_after_commit(model_server, django_capture_on_commit_callbacks):
    make_markets(3)
    cohort = make_cohort([baseline_competitor("cash")])

    from cohorts.tasks import enqueue_decisions

    with django_capture_on_commit_callbacks() as callbacks:
        assert decide(cohort=cohort.pk, at=AT, sync=False, enqueue=enqueue_decisions) == 1

    assert len(callbacks) == 1
    assert not Decision.objects.exists()  # nothing ran inline


def test_decision_market_closed_is_not_in_universe(model_server):
    make_markets(3)
    closed = Market.objects.first()
    Market.objects.filter(pk=closed.pk).update(status=Market.Status.CLOSED)
    cohort = make_cohort([baseline_competitor("cash")])

    decide(cohort=cohort, at=AT, sync=True)

    ids = {item["market_id"] for item in cohort.universes.get(week=1).markets}
    assert closed.pk not in ids and len(ids) == 2
    assert LLMCall.objects.get().url == "builtin:baseline/cash"


def test_run_decision_task_runs_the_service():
    from cohorts.tasks import run_decision as task

    make_markets(25)
    cohort = make_cohort([baseline_competitor("favorite")])
    entry = cohort.entries.get()

    result = task.apply(args=(entry.pk, 1, AT.isoformat())).get()

    assert result == "done"
    decision = Decision.objects.get(entry=entry)
    assert decision.decided_at == AT
    assert Trade.objects.filter(decision=decision).exists()


def test_an_endpoint_off_the_allow_list_is_never_called_and_says_why(
    model_server, settings, monkeypatch
):
    # Staff once could type base_url=<their listener> and api_key_env=SECRET_KEY: the app sent
    # the SECRET_KEY there as a Bearer token. Such a row (stored before the allow-list) fails
    # closed: skipped with the reason, no request made.
    monkeypatch.setenv("SECRET_KEY", "the-django-secret")
    make_markets(4)
    cohort = make_cohort([llm_competitor(model_server, api_key_env="SECRET_KEY")])
    decision = run_decision(cohort.entries.get().pk, 1, AT)
    assert decision.status == Decision.Status.SKIPPED
    assert "not in the operator's allow-list (ARENA_LLM_ENDPOINTS)" in decision.error
    assert not model_server.chat_requests
    assert "the-django-secret" not in decision.error


def test_the_operator_cannot_allow_the_arenas_own_secrets_as_keys(model_server, settings):
    settings.ARENA_LLM_ENDPOINTS = f"{model_server.base_url}|DATABASE_URL"
    make_markets(4)
    cohort = make_cohort([llm_competitor(model_server, api_key_env="DATABASE_URL")])
    decision = run_decision(cohort.entries.get().pk, 1, AT)
    assert decision.status == Decision.Status.SKIPPED
    assert "'DATABASE_URL' cannot hold a model key" in decision.error
    assert not model_server.chat_requests
