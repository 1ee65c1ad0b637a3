"""LLMClient against a real fake OpenRouter on 127.0.0.1 (tests/fakes/openai_server.py).

The only thing injected is the client's `sleep` (recorded instead of slept) and its `random`
(seeded): the retry logic itself runs as in production.
"""

import json
import random
import socket
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime

import pytest
from django.conf import settings

from agents.llm import MAX_RAW_BYTES, LLMClient, LLMError, parse_retry_after
from agents.parsing import extract_json
from tests.fakes.openai_server import (
    FakeResponse,
    bad_gateway,
    bad_request,
    empty_content,
    fenced_json,
    forbidden,
    hold_decision_responder,
    http_error,
    in_band_error,
    malformed,
    not_found,
    payment_required,
    prose_around_json,
    rate_limited,
    request_timeout,
    success,
    success_body,
    truncated,
    unauthorized,
    unavailable,
)

API_KEY = "sk-or-v1-0123456789abcdef-secret"
MESSAGES = [{"role": "system", "content": "You trade."}, {"role": "user", "content": "Decide."}]
DECISION = {"action": "HOLD", "bets": [], "sells": [], "reasoning": "prices look fair {really}"}


def make_client(server, api_key=API_KEY, **kwargs):
    options = {"timeout": 5.0, "max_retries": 3, "backoff_base": 1.0, "max_backoff": 30.0}
    options.update(kwargs)
    client = LLMClient(server.base_url, api_key, **options)
    sleeps: list[float] = []
    client.sleep = sleeps.append
    client.random = random.Random(7)
    return client, sleeps


# --- success and cost ------------------------------------------------------------------------


def test_success_records_cost_tokens_model_and_the_exact_raw_response(openai_server):
    body = success_body(
        json.dumps(DECISION),
        model="stepfun/step-3.7-flash-20260528",
        cost=0.00384,
        prompt_tokens=1200,
        completion_tokens=340,
        reasoning_tokens=120,
    )
    openai_server.enqueue(FakeResponse(200, body))
    client, sleeps = make_client(openai_server)

    result = client.chat("stepfun/step-3.7-flash", MESSAGES, {"temperature": 0.2})

    assert result.ok and result.error == ""
    assert json.loads(result.content) == DECISION
    [attempt] = result.attempts
    assert attempt.number == 1 and attempt.http_status == 200 and attempt.error_kind is None
    assert attempt.raw_response == json.dumps(body)
    assert attempt.cost_usd == Decimal("0.00384") and attempt.cost_source == "usage"
    assert (attempt.prompt_tokens, attempt.completion_tokens, attempt.reasoning_tokens) == (
        1200,
        340,
        120,
    )
    assert attempt.served_model == "stepfun/step-3.7-flash-20260528"
    assert attempt.generation_id == body["id"]
    assert attempt.finish_reason == "stop"
    assert attempt.url == openai_server.base_url + "/chat/completions"
    assert attempt.started_at.tzinfo is not None and attempt.latency_ms >= 0
    assert result.cost_usd == Decimal("0.00384")
    assert sleeps == []


def test_request_carries_params_and_attribution_headers(openai_server):
    openai_server.enqueue(success("ok"))
    client, _ = make_client(openai_server)
    params = {
        "temperature": 0.3,
        "max_tokens": 2000,
        "reasoning": {"effort": "high"},
        "response_format": {"type": "json_object"},
        "provider": {"require_parameters": True, "data_collection": "deny"},
        "model": "params-must-not-override",
    }

    result = client.chat("openai/gpt-4o-mini", MESSAGES, params)

    [received] = openai_server.chat_requests
    assert received.json["model"] == "openai/gpt-4o-mini"
    assert received.json["messages"] == MESSAGES
    for key in ("temperature", "max_tokens", "reasoning", "response_format", "provider"):
        assert received.json[key] == params[key]
    assert result.attempts[0].request_body == received.json
    headers = {k.lower(): v for k, v in received.headers.items()}
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == settings.ARENA_USER_AGENT
    assert headers["x-title"] and headers["x-openrouter-title"] and headers["http-referer"]


def test_no_authorization_header_without_a_key(openai_server):
    openai_server.enqueue(success("ok"))
    client, _ = make_client(openai_server, api_key=None)

    assert client.chat("local/llama", MESSAGES).ok

    headers = {k.lower() for k in openai_server.chat_requests[0].headers}
    assert "authorization" not in headers


def test_cost_falls_back_to_price_table_when_usage_has_no_cost(openai_server):
    openai_server.enqueue(success("ok", cost=None, prompt_tokens=1000, completion_tokens=250))
    client, _ = make_client(openai_server)

    result = client.chat(
        "m", MESSAGES, price_in_per_m=Decimal("0.15"), price_out_per_m=Decimal("0.6")
    )

    attempt = result.attempts[0]
    assert attempt.cost_source == "price_table"
    assert attempt.cost_usd == (1000 * Decimal("0.15") + 250 * Decimal("0.6")) / Decimal(10**6)


def test_cost_unknown_without_usage_cost_or_prices(openai_server):
    openai_server.enqueue(success("ok", cost=None))
    client, _ = make_client(openai_server)

    attempt = client.chat("m", MESSAGES).attempts[0]

    assert attempt.cost_usd is None and attempt.cost_source is None


def test_generation_id_from_header_when_body_has_none(openai_server):
    body = success_body("ok")
    del body["id"]
    openai_server.enqueue(
        FakeResponse(200, body, {"X-Generation-Id": "gen-1772553497-headerheaderheader"})
    )
    client, _ = make_client(openai_server)

    attempt = client.chat("m", MESSAGES).attempts[0]

    assert attempt.generation_id == "gen-1772553497-headerheaderheader"


@pytest.mark.parametrize("builder", [fenced_json, prose_around_json])
def test_fenced_or_prose_wrapped_json_reaches_the_parser_intact(openai_server, builder):
    openai_server.enqueue(builder(DECISION))
    client, _ = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert result.ok
    assert result.content.strip() != json.dumps(DECISION)  # really wrapped
    assert extract_json(result.content) == DECISION


# --- errors that must not be retried -----------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "status"),
    [
        (bad_request, 400),
        (unauthorized, 401),
        (payment_required, 402),
        (forbidden, 403),
        (not_found, 404),
    ],
)
def test_client_errors_are_not_retried(openai_server, builder, status):
    openai_server.enqueue(builder(), success("never fetched"))
    client, sleeps = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert not result.ok and result.content is None
    [attempt] = result.attempts
    assert attempt.http_status == status and attempt.error_kind == "http"
    assert not attempt.retryable
    assert f"HTTP {status}" in result.error and "\n" not in result.error
    assert len(openai_server.chat_requests) == 1 and sleeps == []


def test_402_message_is_kept_for_the_operator(openai_server):
    openai_server.enqueue(payment_required())
    client, _ = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert "requires more credits" in result.error


def test_length_truncation_is_reported_not_retried(openai_server):
    openai_server.enqueue(truncated('{"action": "BET", "bets": [{"market_id": "12'), success("x"))
    client, sleeps = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert not result.ok
    [attempt] = result.attempts
    assert attempt.error_kind == "length" and attempt.finish_reason == "length"
    assert not attempt.retryable and sleeps == []
    assert attempt.content.startswith('{"action": "BET"')  # kept for the audit
    assert "truncated" in result.error


# --- retried errors ----------------------------------------------------------------------------


def test_429_waits_exactly_the_retry_after_seconds(openai_server):
    openai_server.enqueue(rate_limited(retry_after="2"), success("ok"))
    client, sleeps = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert result.ok and len(result.attempts) == 2
    first = result.attempts[0]
    assert first.http_status == 429 and first.retryable and first.retry_after == 2.0
    assert "Rate limit exceeded" in first.error
    assert sleeps == [2.0]


def test_retry_after_as_http_date(openai_server):
    when = datetime.now(UTC) + timedelta(seconds=20)
    openai_server.enqueue(
        rate_limited(retry_after=format_datetime(when, usegmt=True)), success("ok")
    )
    client, sleeps = make_client(openai_server)

    assert client.chat("m", MESSAGES).ok

    [slept] = sleeps
    assert 15 < slept <= 20


def test_retry_after_is_capped_at_max_backoff(openai_server):
    openai_server.enqueue(unavailable(retry_after="120"), success("ok"))
    client, sleeps = make_client(openai_server, max_backoff=5.0)

    assert client.chat("m", MESSAGES).ok

    assert sleeps == [5.0]


def test_502_then_success(openai_server):
    openai_server.enqueue(bad_gateway(), success("ok"))
    client, sleeps = make_client(openai_server, backoff_base=1.0)

    result = client.chat("m", MESSAGES)

    assert result.ok and result.content == "ok"
    first, second = result.attempts
    assert (first.number, first.http_status, first.error_kind) == (1, 502, "http")
    assert "provider Together" in first.error
    assert (second.number, second.http_status, second.error_kind) == (2, 200, None)
    [slept] = sleeps
    assert 0.5 <= slept <= 1.0  # equal jitter around the first backoff step


def test_408_is_retried(openai_server):
    openai_server.enqueue(request_timeout(), success("ok"))
    client, _ = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert result.ok and [a.http_status for a in result.attempts] == [408, 200]


def test_backoff_grows_and_gives_up_after_max_retries(openai_server):
    openai_server.enqueue(*[unavailable() for _ in range(5)])
    client, sleeps = make_client(openai_server, max_retries=3, backoff_base=1.0, max_backoff=3.0)

    result = client.chat("m", MESSAGES)

    assert not result.ok and len(result.attempts) == 4 and len(openai_server.chat_requests) == 4
    assert "HTTP 503" in result.error
    ceilings = [1.0, 2.0, 3.0]  # 1, 2, then 4 capped at max_backoff
    assert len(sleeps) == 3
    for slept, ceiling in zip(sleeps, ceilings):
        assert ceiling / 2 <= slept <= ceiling


def test_in_band_error_then_success(openai_server):
    openai_server.enqueue(in_band_error("Provider returned error"), success("ok", cost=0.002))
    client, sleeps = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert result.ok
    first, second = result.attempts
    assert first.http_status == 200 and first.error_kind == "in_band" and first.retryable
    assert first.finish_reason == "error" and "Provider returned error" in first.error
    assert second.ok and len(sleeps) == 1
    # The failed attempt was billed too; the total keeps it.
    assert result.cost_usd == first.cost_usd + second.cost_usd == Decimal("0.0021")


def test_empty_content_is_retried_only_a_couple_of_times(openai_server):
    openai_server.enqueue(*[empty_content() for _ in range(6)])
    client, sleeps = make_client(openai_server, max_retries=5)

    result = client.chat("m", MESSAGES)

    assert not result.ok and "empty content" in result.error
    assert len(result.attempts) == 1 + client.max_content_retries
    assert all(a.error_kind == "empty" and a.http_status == 200 for a in result.attempts)
    assert len(sleeps) == client.max_content_retries


def test_malformed_body_is_recorded_raw_and_retried(openai_server):
    broken = '{"id": "gen-1", "choices": [{"message": '
    openai_server.enqueue(malformed(broken), FakeResponse(200, {"id": "gen-2"}), success("ok"))
    client, _ = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    assert result.ok
    first, second, third = result.attempts
    assert first.error_kind == "malformed" and first.raw_response == broken
    assert second.error_kind == "malformed" and "no choices" in second.error
    assert third.ok


def test_non_json_error_page_is_described(openai_server):
    openai_server.enqueue(FakeResponse(502, "<html><body>Bad gateway</body></html>"), success("ok"))
    client, _ = make_client(openai_server)

    first = client.chat("m", MESSAGES).attempts[0]

    assert first.error_kind == "http" and "Bad gateway" in first.error


def test_oversized_body_is_truncated_and_not_retried(openai_server):
    huge = '{"pad": "' + "x" * (MAX_RAW_BYTES + 500_000) + '"}'
    openai_server.enqueue(FakeResponse(200, huge), success("never fetched"))
    client, sleeps = make_client(openai_server)

    result = client.chat("m", MESSAGES)

    [attempt] = result.attempts
    assert attempt.error_kind == "malformed" and not attempt.retryable
    assert len(attempt.raw_response) == MAX_RAW_BYTES
    assert huge.startswith(attempt.raw_response)


def test_slow_response_past_the_timeout_is_a_timeout_attempt(openai_server):
    openai_server.enqueue(success("too late", delay=3.0), success("ok"))
    client, sleeps = make_client(openai_server, timeout=0.3, max_retries=1)

    result = client.chat("m", MESSAGES)

    assert result.ok
    first, second = result.attempts
    assert first.error_kind == "timeout" and first.retryable and first.http_status is None
    assert first.raw_response == "" and first.latency_ms >= 250
    assert second.ok and len(sleeps) == 1


def test_timeout_on_every_attempt_fails_with_one_line_error(openai_server):
    openai_server.enqueue(success("late", delay=3.0), success("late", delay=3.0))
    client, _ = make_client(openai_server, timeout=0.3, max_retries=1)

    result = client.chat("m", MESSAGES)

    assert not result.ok and [a.error_kind for a in result.attempts] == ["timeout", "timeout"]
    assert "timed out" in result.error and "\n" not in result.error


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = LLMClient(f"http://127.0.0.1:{port}/v1", API_KEY, timeout=1.0, max_retries=2)
    sleeps: list[float] = []
    client.sleep = sleeps.append

    result = client.chat("m", MESSAGES)

    assert not result.ok
    assert [a.error_kind for a in result.attempts] == ["connection"] * 3
    assert len(sleeps) == 2


def test_api_key_is_never_stored(openai_server):
    openai_server.enqueue(rate_limited(retry_after="0"), in_band_error(), success("ok"))
    client, _ = make_client(openai_server)

    result = client.chat("m", MESSAGES, {"temperature": 0})

    assert len(result.attempts) == 3
    for attempt in result.attempts:
        stored = json.dumps(attempt.request_body) + attempt.error + attempt.raw_response
        assert API_KEY not in stored
    # ...while it was really sent, in the header only.
    assert all(API_KEY in r.headers["Authorization"] for r in openai_server.chat_requests)


def test_default_responder_answers_when_nothing_is_scripted(openai_server):
    openai_server.default_responder = hold_decision_responder()
    client, _ = make_client(openai_server)

    result = client.chat("anthropic/claude-sonnet-4.5", MESSAGES)

    assert result.ok and extract_json(result.content)["action"] == "HOLD"
    assert result.attempts[0].served_model == "anthropic/claude-sonnet-4.5"


# --- helper endpoints --------------------------------------------------------------------------


def test_model_prices_are_per_million_decimals(openai_server):
    client, _ = make_client(openai_server)

    prices = client.model_prices()

    assert prices["openai/gpt-4o-mini"] == (Decimal("0.15"), Decimal("0.6"))
    assert prices["meta-llama/llama-3.3-70b-instruct:free"] == (Decimal(0), Decimal(0))


def test_generation_lookup_is_404_then_data(openai_server):
    openai_server.enqueue(success("ok", cost=0.0015))
    client, _ = make_client(openai_server)
    gen_id = client.chat("m", MESSAGES).attempts[0].generation_id

    assert client.generation(gen_id) is None  # not recorded yet
    data = client.generation(gen_id)

    assert data["id"] == gen_id and data["total_cost"] == 0.0015


def test_helper_endpoint_http_error_raises_one_line(openai_server):
    openai_server.models = []
    client, _ = make_client(openai_server)
    client.base_url += "/nope"  # unknown route: the fake answers 404 with an error body

    with pytest.raises(LLMError, match="HTTP 404"):
        client.model_prices()


# --- Retry-After parsing -----------------------------------------------------------------------


def test_parse_retry_after_forms():
    now = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    earlier = format_datetime(now - timedelta(seconds=90), usegmt=True)

    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(" 1.5 ", now) == 1.5
    assert parse_retry_after(later, now) == 90.0
    assert parse_retry_after(earlier, now) == 0.0
    assert parse_retry_after("-3", now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("nan", now) is None
    assert parse_retry_after(None, now) is None


def test_a_daily_quota_429_is_not_retried_and_says_when_it_refills(openai_server):
    # OpenRouter's free-models-per-day 429 was retried three times (each doomed) before.
    import time as _time

    refill_ms = int((_time.time() + 6 * 3600) * 1000)
    openai_server.enqueue(rate_limited(retry_after=None, reset_ms=refill_ms))
    result = make_client(openai_server)[0].chat("m", MESSAGES)
    assert not result.ok and len(result.attempts) == 1 and len(openai_server.chat_requests) == 1
    assert "quota exhausted, not retried; it refills in about 6.0 h" in result.error
    assert "free-models-per-day" in result.error


def test_a_quota_429_without_timing_headers_is_not_retried(openai_server):
    openai_server.enqueue(http_error(429, "Rate limit exceeded: free-models-per-day"))
    result = make_client(openai_server)[0].chat("m", MESSAGES)
    assert not result.ok and len(openai_server.chat_requests) == 1


def test_provider_returned_error_keeps_the_providers_reason(openai_server):
    # "Provider returned error" alone said nothing; the reason is in error.metadata.raw.
    raw = json.dumps({"error": {"message": "context length 131072 exceeded by 2048 tokens"}})
    openai_server.enqueue(http_error(400, "Provider returned error",
                              metadata={"provider_name": "DeepInfra", "raw": raw}))  # fmt: skip
    result = make_client(openai_server)[0].chat("m", MESSAGES)
    assert "Provider returned error (provider DeepInfra): context length 131072 exceeded" in (
        result.error
    )


def test_a_cost_below_a_millionth_keeps_its_digits(openai_server):
    openai_server.enqueue(success('{"action": "HOLD"}', cost=0.00000735))
    result = make_client(openai_server)[0].chat("m", MESSAGES)
    assert result.attempts[0].cost_usd == Decimal("0.00000735")
