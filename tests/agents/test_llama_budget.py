"""Context budgets, context refusals, cut-off answers and phase time bounds, against a real
HTTP fake of llama.cpp's server (the fake OpenAI server plus `/props` and `/tokenize`).

The real server runs in tests/agents/test_llama_server.py (ARENA_LLAMA_TESTS=1); these cover
each path exactly and fast, on every `./run test`.
"""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agents import endpoints
from agents.budget import CHARS_PER_TOKEN, Counter, estimate_tokens, fit
from agents.llm import LLMClient
from cohorts.decisions.run import claim_decision, run_decision
from cohorts.models import Decision
from cohorts.universe import freeze_universe
from core import clock
from tests.agents.helpers import AT, answer, llm_competitor, make_cohort, make_markets
from tests.fakes.openai_server import (
    API_PREFIX,
    FakeOpenAIServer,
    FakeResponse,
    RecordedRequest,
    success,
    truncated,
)

pytestmark = pytest.mark.django_db
ROOT_PREFIX = API_PREFIX.removesuffix("/v1")


class FakeLlamaServer(FakeOpenAIServer):
    """The fake with llama.cpp's extras beside /v1: its context size and a tokenizer that
    counts one token per 3 characters (so the estimate, at 2.8, runs slightly high)."""

    def __init__(self, n_ctx: int | None = 4096) -> None:
        super().__init__()
        self.n_ctx = n_ctx

    def respond(self, request: RecordedRequest) -> FakeResponse:
        path = request.path.rstrip("/")
        if (request.method, path) == ("GET", f"{ROOT_PREFIX}/props") and self.n_ctx:
            return FakeResponse(200, {"default_generation_settings": {"n_ctx": self.n_ctx}})
        if (request.method, path) == ("POST", f"{ROOT_PREFIX}/tokenize") and self.n_ctx:
            content = (request.json or {}).get("content", "")
            return FakeResponse(200, {"tokens": [1] * (len(content) // 3)})
        return super().respond(request)

    def prompt_tokens(self, request: RecordedRequest) -> int:
        return sum(len(m["content"]) // 3 for m in request.json["messages"])


def context_refusal(n_prompt: int, n_ctx: int) -> FakeResponse:
    """llama.cpp's answer to a prompt over its context (real body, EXTERNAL_APIS-style)."""
    return FakeResponse(
        400,
        {
            "error": {
                "code": 400,
                "message": f"request ({n_prompt} tokens) exceeds the available context size "
                f"({n_ctx} tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": n_prompt,
                "n_ctx": n_ctx,
            }
        },
    )


@pytest.fixture(autouse=True)
def fast_llm(settings):
    settings.ARENA_LLM_TIMEOUT = 5
    settings.ARENA_LLM_BACKOFF_BASE = 0.01
    settings.ARENA_LLM_MAX_BACKOFF = 0.05


def _setup(server, settings, n_markets: int = 60, sample_size: int = 3, **competitor):
    settings.ARENA_LLM_ENDPOINTS = server.base_url  # a local server: no key
    kw = {"provider": "llama.cpp", "model_id": "smollm2", "api_key_env": ""}
    kw |= {"price_in_per_m": None, "price_out_per_m": None, "params": {"max_tokens": 300}}
    kw |= competitor
    comp = llm_competitor(server, "local", **kw)
    cohort = make_cohort([comp])
    markets = make_markets(n_markets)
    universe = freeze_universe(cohort, 1, AT, markets=markets, sample_size=sample_size)
    return cohort.entries.get(), universe


def test_the_prompt_shows_what_fits_the_servers_context(settings):
    with FakeLlamaServer(n_ctx=4096) as server:
        entry, universe = _setup(server, settings)
        server.enqueue(success(answer(universe)))
        decision = run_decision(entry.pk, 1, AT)
        [request] = server.chat_requests

    budget = decision.prompt_budget
    assert decision.status == Decision.Status.DONE and decision.error == ""
    assert budget["context_tokens"] == 4096 and budget["context_source"] == "server"
    assert budget["counted_by"] == "server" and budget["fits"]
    assert 3 <= budget["markets_shown"] < budget["markets_total"] == 60
    # The server's own count of what was sent is within the context with room for the answer.
    assert server.prompt_tokens(request) + 300 <= 4096
    assert request.json["max_tokens"] == 300
    cut = set(budget["cut_market_ids"])
    assert len(cut) == 60 - budget["markets_shown"]
    sample = {str(m) for m in universe.forecast_sample}
    assert not cut & sample  # the forecast sample is always shown
    assert all(f"[{m}]" in decision.user_prompt for m in sample)
    assert not any(f"[{m}]\n" in decision.user_prompt for m in cut)
    # The first N of the universe's order (plus the sample): nothing skipped in between.
    order = [str(item["market_id"]) for item in universe.markets]
    shown = [m for m in order if m not in cut]
    first_n = [m for m in order[: len(shown)]]
    assert set(shown) - set(first_n) <= sample


def test_a_bet_on_a_market_that_was_cut_is_refused(settings):
    with FakeLlamaServer(n_ctx=4096) as server:
        entry, universe = _setup(server, settings)
        # The sample is drawn from the seeded universe and is always shown, so the market
        # that is cut is the last one outside it (the sample can hold the very last market).
        sample = {str(m) for m in universe.forecast_sample}
        cut_id = next(
            item["market_id"]
            for item in reversed(universe.markets)
            if str(item["market_id"]) not in sample
        )
        bet = [{"market_id": str(cut_id), "outcome": "Yes", "amount": 60, "probability": 0.9}]
        server.enqueue(success(answer(universe, bets=bet)), success(answer(universe, bets=bet)))
        decision = run_decision(entry.pk, 1, AT)

    assert str(cut_id) in decision.prompt_budget["cut_market_ids"]
    assert decision.action == Decision.Action.HOLD and str(cut_id) in decision.hold_reason
    assert not decision.trades.exists()


def test_a_prompt_that_cannot_fit_is_never_sent(settings):
    with FakeLlamaServer(n_ctx=900) as server:
        entry, universe = _setup(server, settings, sample_size=10)
        decision = run_decision(entry.pk, 1, AT)
        chats = server.chat_requests

    assert chats == []
    assert decision.status == Decision.Status.DONE
    assert decision.action == Decision.Action.HOLD
    assert "cannot fit the 900-token context" in decision.hold_reason
    assert decision.prompt_budget["fits"] is False
    assert not decision.llm_calls.exists()


def test_a_context_refusal_is_its_own_kind_and_the_prompt_is_refitted(settings):
    # No /props (a server that does not say), and the operator set no context: the whole
    # universe goes out, the server refuses it naming its n_ctx, the prompt is fitted to that.
    with FakeLlamaServer(n_ctx=None) as server:
        entry, universe = _setup(server, settings)
        server.enqueue(context_refusal(24531, 4096), success(answer(universe)))
        decision = run_decision(entry.pk, 1, AT)
        first, second = server.chat_requests

    refused, refit = decision.llm_calls.order_by("attempt")
    assert refused.error_kind == "context_full" and refused.http_status == 400
    assert refused.prompt_tokens == 24531 and refused.completion_tokens == 0
    assert "24531 tokens do not fit the 4096-token context" in refused.error
    assert refit.phase == "refit" and refit.error_kind == ""
    assert decision.status == Decision.Status.DONE and decision.error == ""
    assert decision.tokens_in >= 24531  # what the server counted is kept
    budget = decision.prompt_budget
    assert budget["context_source"] == "context refusal" and budget["counted_by"] == "estimate"
    assert len(second.raw) < len(first.raw)
    assert estimate_tokens(json.dumps(second.json["messages"])) + 300 <= 4096


def test_a_refusal_without_a_context_size_holds_with_the_reason(settings):
    with FakeLlamaServer(n_ctx=None) as server:
        entry, _ = _setup(server, settings)
        body = {"error": {"code": "context_length_exceeded", "message": "prompt is too long"}}
        server.enqueue(FakeResponse(400, body))
        decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.DONE and decision.action == "HOLD"
    assert decision.hold_reason.startswith("context full")
    assert decision.llm_calls.get().error_kind == "context_full"


def test_a_cut_off_answer_is_repaired(settings):
    with FakeLlamaServer(n_ctx=4096) as server:
        entry, universe = _setup(server, settings)
        long_answer = '{"action": "HOLD", "reasoning": "' + "very long " * 400
        server.enqueue(truncated(long_answer), success(answer(universe)))
        decision = run_decision(entry.pk, 1, AT)
        first, repair = server.chat_requests

    assert decision.status == Decision.Status.DONE and decision.hold_reason == ""
    assert decision.validation_errors[0]["phase"] == "initial"
    assert "cut off" in decision.validation_errors[0]["problems"][0]
    # The repair quotes only the start of the cut answer and still fits the context.
    quoted = repair.json["messages"][2]["content"]
    assert quoted.endswith("[...]") and len(quoted) < len(long_answer)
    assert server.prompt_tokens(repair) + repair.json["max_tokens"] <= 4096


def test_an_answer_cut_off_twice_is_held_never_failed(settings):
    with FakeLlamaServer(n_ctx=4096) as server:
        entry, _ = _setup(server, settings)
        server.enqueue(truncated(), truncated())
        decision = run_decision(entry.pk, 1, AT)

    assert decision.status == Decision.Status.DONE
    assert decision.action == Decision.Action.HOLD and "cut off" in decision.hold_reason
    assert list(decision.llm_calls.values_list("error_kind", flat=True)) == ["length", "length"]


def test_structured_output_requires_exactly_the_sample(settings):
    with FakeLlamaServer(n_ctx=4096) as server:
        entry, universe = _setup(server, settings, structured_output=True)
        server.enqueue(success(answer(universe)))
        run_decision(entry.pk, 1, AT)
        [request] = server.chat_requests

    fmt = request.json["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    forecasts = schema["properties"]["forecasts"]
    ids = [item["properties"]["market_id"]["const"] for item in forecasts["prefixItems"]]
    assert ids == [str(m) for m in universe.forecast_sample]
    assert forecasts["minItems"] == forecasts["maxItems"] == 3
    shown = schema["properties"]["bets"]["items"]["properties"]["market_id"]["enum"]
    assert set(ids) <= set(shown) and len(shown) < 60
    assert schema["properties"]["reasoning"]["maxLength"] <= 1000
    assert schema["properties"]["sells"]["maxItems"] == 0  # no positions to sell


def test_a_hosted_endpoint_without_a_context_setting_is_not_probed(settings, monkeypatch):
    monkeypatch.setenv("ARENA_TEST_LLM_KEY", "sk-test")
    with FakeLlamaServer(n_ctx=4096) as server:
        settings.ARENA_LLM_BASE_URL = server.base_url  # the default endpoint (OpenRouter)
        settings.ARENA_LLM_API_KEY = "sk-test"
        comp = llm_competitor(None, "hosted", base_url="", api_key_env="")
        cohort = make_cohort([comp])
        universe = freeze_universe(cohort, 1, AT, markets=make_markets(20), sample_size=3)
        server.enqueue(success(answer(universe)))
        decision = run_decision(cohort.entries.get().pk, 1, AT)
        paths = [r.path for r in server.requests]

    assert paths == [f"{API_PREFIX}/chat/completions"]
    assert decision.prompt_budget == {} and decision.status == Decision.Status.DONE


# --- the estimate and the fit, without a server ---------------------------------------------


def test_the_estimate_is_high_for_id_and_price_heavy_text():
    text = "[1234567] Will event 42 happen?\n  Yes 0.41 · volume $999,958 · closes 2026-12-22"
    assert estimate_tokens(text) == -(-len(text) // CHARS_PER_TOKEN)
    assert estimate_tokens(text) > len(text) / 4


@hsettings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=40),
    sample_at=st.sets(st.integers(0, 39), max_size=5),
    limit=st.integers(0, 8000),
)
def test_fit_keeps_the_sample_and_the_longest_prefix_that_fits(sizes, sample_at, limit):
    markets = [{"market_id": i, "text": "x" * n} for i, n in enumerate(sizes)]
    sample = [i for i in sorted(sample_at) if i < len(markets)]

    def render(ms):
        return ["".join(m["text"] for m in ms)]

    result = fit(markets, sample, render, Counter(None), limit)
    shown_ids = [m["market_id"] for m in result.markets]
    assert set(sample) <= set(shown_ids)
    assert shown_ids == sorted(shown_ids)  # universe order
    counted = Counter(None)(render(result.markets))
    if result.fits:
        assert counted <= limit
        # One more market of the universe's order would not have fitted.
        nxt = next((m for m in markets if m["market_id"] not in shown_ids), None)
        if nxt is not None:
            bigger = sorted([*result.markets, nxt], key=lambda m: m["market_id"])
            prefix_grows = all(m["market_id"] in shown_ids for m in markets[: nxt["market_id"]])
            if prefix_grows:
                assert Counter(None)(render(bigger)) > limit
    else:
        assert shown_ids == sample and counted > limit
    assert result.cut_ids == [str(i) for i in range(len(markets)) if i not in shown_ids]


# --- time bounds: a decision's calls end before its claim could be taken over -----------------


@hsettings(max_examples=60, deadline=None)
@given(
    claim=st.integers(60, 24 * 3600),
    timeout=st.floats(1, 3600),
    retries=st.integers(0, 10),
    backoff=st.floats(0, 600),
    wanted=st.one_of(st.none(), st.floats(1, 7200)),
)
def test_every_phase_together_stays_under_the_claim_timeout(
    claim, timeout, retries, backoff, wanted
):
    from django.test import override_settings

    with override_settings(
        ARENA_CLAIM_TIMEOUT_SECONDS=claim,
        ARENA_LLM_TIMEOUT=timeout,
        ARENA_LLM_MAX_RETRIES=retries,
        ARENA_LLM_MAX_BACKOFF=backoff,
        ARENA_LLM_PHASE_SECONDS=wanted,
    ):
        client = endpoints._client("http://127.0.0.1:9/v1", "")
        worst = endpoints.PHASES_PER_DECISION * client.worst_case_seconds()
        assert worst + endpoints.probe_seconds() < claim


@pytest.mark.exclusive  # measures wall time: runs alone (tests/xdist_worker.py)
def test_a_phase_stops_retrying_at_its_total():
    late = FakeResponse(200, {}, {}, delay=30)
    with FakeOpenAIServer() as server:
        server.enqueue(*[late] * 10)
        client = LLMClient(server.base_url, None, timeout=0.4, max_retries=9, phase_seconds=1.5)
        client.sleep = lambda s: None
        start = time.monotonic()
        result = client.chat("m", [{"role": "user", "content": "hi"}])
        elapsed = time.monotonic() - start

    assert not result.ok and elapsed < 2 * 1.5
    assert 1 <= len(result.attempts) <= 4 and len(server.chat_requests) == len(result.attempts)
    assert "phase" in result.error or len(result.attempts) < 10


@pytest.mark.django_db(transaction=True)
def test_a_decision_cannot_be_claimed_twice_while_its_call_runs(settings):
    """A server that never answers in time: the call ends within its phase bound, long before
    the claim goes stale, and a second runner asking meanwhile gets nothing to run."""
    settings.ARENA_CLAIM_TIMEOUT_SECONDS = 12
    settings.ARENA_LLM_TIMEOUT = 600  # the operator's per-call timeout, far over the claim
    settings.ARENA_LLM_MAX_RETRIES = 3
    settings.ARENA_DECISION_MAX_ROUNDS = 1  # the timeouts are an outage: one round, then final
    seen: list[object] = []

    def while_running(request: RecordedRequest) -> FakeResponse:
        # In the server's thread, while the decision's call is in flight: another runner tries.
        try:
            seen.append(claim_decision(entry.pk, 1))
        finally:
            # That thread's own connection, closed: left open, PostgreSQL would refuse to drop
            # the test database at the end of the run ("accessed by other users").
            connection.close()
        return FakeResponse(200, {}, {}, delay=60)

    with FakeLlamaServer(n_ctx=None) as server:
        server.default_responder = while_running
        entry, _ = _setup(server, settings, n_markets=10)
        decision = run_decision(entry.pk, 1, AT)
        requests_seen = len(server.chat_requests)

    assert seen and all(other is None for other in seen)
    assert requests_seen == len(seen)
    assert decision.status == Decision.Status.FAILED and "timed out" in decision.error
    ran = (decision.finished_at - decision.claimed_at).total_seconds()
    assert ran < settings.ARENA_CLAIM_TIMEOUT_SECONDS
    # And once it is over, the final row is not reclaimable either.
    assert claim_decision(entry.pk, 1) is None
    assert clock.now() >= decision.finished_at


def test_the_decision_page_agrees_with_its_calls(settings, client):
    # llama.cpp reports no cost: the page says so rather than "$0.00", and the tokens the server
    # counted on a refusal are in the decision's total.
    with FakeLlamaServer(n_ctx=None) as server:
        entry, universe = _setup(server, settings)
        server.enqueue(context_refusal(24531, 4096), success(answer(universe), cost=None))
        decision = run_decision(entry.pk, 1, AT)

    html = client.get(f"/decisions/{decision.pk}/").content.decode()
    cost = html.split("<dt>Cost", 1)[1].split("</dd>", 1)[0]
    assert "$0.00" not in cost and "—" in cost and "no call reported a cost" in cost
    assert f"<dd>{decision.tokens_in} / {decision.tokens_out}</dd>" in html
    assert decision.tokens_in >= 24531
    assert "Context budget" in html and "(context refusal)" in html


def test_an_openai_style_context_refusal_is_read_from_its_message():
    from agents.context_errors import context_refusal

    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, you "
            "requested 9000 tokens (8000 in the messages, 1000 in the completion).",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    found = context_refusal(json.dumps(body), body["error"]["message"])
    assert found is not None and (found.n_ctx, found.n_prompt_tokens) == (8192, 9000)
    assert context_refusal('{"error": {"message": "bad model id"}}', "bad model id") is None
