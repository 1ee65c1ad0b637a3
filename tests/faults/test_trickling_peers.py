"""Attack: peers that answer one byte every 100 ms, or with far too much, through core.http.

A socket timeout counts one read, so before every outbound call had a total deadline a "3 s"
chat took 131 s against such a peer, a /props probe 49 s against 5 s, and a Gamma read 59 s
against 2 s; a decision's call outlived its claim and the model was called a second time. Each
test here holds a client to its stated bound against the real fake servers (tests/fakes/).
"""

from __future__ import annotations

import gzip
import threading
import time

import pytest

from agents.budget import PROBE_MAX_BYTES, Server
from agents.llm import DEADLINE_SLACK, LLMClient
from cohorts.decisions.run import claim_decision, run_decision
from cohorts.models import Decision, LLMCall
from core.http import BodyTooLarge, HttpTimeout, fetch
from markets.gamma import GammaClient, GammaUnavailable
from tests.agents.helpers import AT
from tests.agents.test_llama_budget import ROOT_PREFIX, FakeLlamaServer, _setup
from tests.fakes.gamma_server import FakeGamma, make_market
from tests.fakes.openai_server import FakeOpenAIServer, FakeResponse, RecordedRequest, success

TRICKLE = 0.1  # seconds per byte: the attack run's pace
SLACK = DEADLINE_SLACK + 0.3  # the watchdog's wake-up, on a loaded 2-core machine


def _timed(call):
    start = time.monotonic()
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - the caller asserts which
        result = exc
    return result, time.monotonic() - start


def test_a_trickled_answer_stops_at_the_total_deadline():
    with FakeOpenAIServer() as server:
        server.enqueue(FakeResponse(200, {"choices": []}, trickle=TRICKLE))
        url = f"{server.base_url}/chat/completions"
        result, took = _timed(lambda: fetch("POST", url, json_body={}, timeout=1, max_bytes=1000))
    assert isinstance(result, HttpTimeout)
    assert 0.9 < took < 1 + SLACK


def test_a_body_over_the_cap_is_refused_or_cut_before_parsing():
    big = b"[" * 3_000_000
    with FakeOpenAIServer() as server:
        server.enqueue(FakeResponse(200, big), FakeResponse(200, big))
        url = f"{server.base_url}/chat/completions"
        with pytest.raises(BodyTooLarge):
            fetch("POST", url, json_body={}, timeout=5, max_bytes=100_000)
        cut = fetch("POST", url, json_body={}, timeout=5, max_bytes=100_000, truncate=True)
    assert cut.truncated and len(cut.body) == 100_000


def test_a_compressed_bomb_is_capped_after_decompression():
    bomb = gzip.compress(b"0" * 50_000_000)  # 50 MB that travels as ~50 kB
    with FakeOpenAIServer() as server:
        server.enqueue(FakeResponse(200, bomb, {"Content-Encoding": "gzip"}))
        url = f"{server.base_url}/chat/completions"
        with pytest.raises(BodyTooLarge):
            fetch("POST", url, json_body={}, timeout=5, max_bytes=1_000_000)


def test_a_trickling_model_costs_one_timed_out_attempt_within_the_phase():
    with FakeOpenAIServer() as server:
        server.default_responder = lambda request: success("{}", trickle=TRICKLE)
        client = LLMClient(server.base_url, None, timeout=3, max_retries=3, phase_seconds=2)
        client.sleep = lambda s: None
        result, took = _timed(lambda: client.chat("m", [{"role": "user", "content": "hi"}]))
    assert not result.ok and result.attempts[0].error_kind == "timeout"
    assert took < client.worst_case_seconds() + 0.3
    assert len(server.chat_requests) == len(result.attempts)


class _TricklingLlama(FakeLlamaServer):
    def respond(self, request: RecordedRequest) -> FakeResponse:
        path = request.path.rstrip("/")
        if path == f"{ROOT_PREFIX}/props":
            return FakeResponse(200, {"n_ctx": 4096}, trickle=TRICKLE)
        if path == f"{ROOT_PREFIX}/tokenize":
            return FakeResponse(200, {"tokens": [1, 2]}, trickle=TRICKLE)
        return super().respond(request)


def test_trickling_probes_end_within_their_total():
    with _TricklingLlama() as server:
        probe = Server(LLMClient(server.base_url, None, timeout=5), total_seconds=1.5)
        (n_ctx, count), took = _timed(lambda: (probe.context_size(), probe.count("hello")))
    assert n_ctx is None and count is None
    assert took < 1.5 + 2 * SLACK


@pytest.mark.parametrize(
    "body",
    [b"{" + b" " * (PROBE_MAX_BYTES + 10) + b"}", b'{"a":' * 200_000],
    ids=["over the cap", "nested 200,000 deep"],
)
def test_a_hostile_props_body_is_no_context_size(body):
    class Hostile(FakeLlamaServer):
        def respond(self, request: RecordedRequest) -> FakeResponse:
            if request.path.rstrip("/") == f"{ROOT_PREFIX}/props":
                return FakeResponse(200, body)
            return super().respond(request)

    with Hostile() as server:
        assert Server(LLMClient(server.base_url, None, timeout=5)).context_size() is None


@pytest.mark.django_db
def test_a_trickling_gamma_is_unavailable_within_its_timeouts():
    with FakeGamma([make_market("1")]) as gamma:
        gamma.fail("trickle", path="/markets", delay=TRICKLE, times=2)
        client = GammaClient(gamma.url, timeout=1, retries=1, sleep=lambda s: None)
        result, took = _timed(lambda: client.get_market("1"))
    assert isinstance(result, GammaUnavailable)
    assert took < 2 * (1 + SLACK)


@pytest.mark.django_db(transaction=True)
def test_a_trickling_model_is_never_called_twice_for_one_decision(settings):
    """The decision's calls end within the claim timeout however slowly the model answers, so
    no other runner can take the claim over while one of its calls could still be reading."""
    settings.ARENA_CLAIM_TIMEOUT_SECONDS = 8  # the attack run's scaled-down settings
    settings.ARENA_LLM_TIMEOUT = 3
    settings.ARENA_LLM_MAX_RETRIES = 3
    settings.ARENA_LLM_BACKOFF_BASE = 0.01
    settings.ARENA_LLM_MAX_BACKOFF = 0.05
    settings.ARENA_DECISION_MAX_ROUNDS = 1
    others: list[object] = []
    lock = threading.Lock()

    def trickling(request: RecordedRequest) -> FakeResponse:
        with lock:  # in the server's thread, while the call is in flight: another runner tries
            others.append(claim_decision(entry.pk, 1))
        return success("{}", trickle=TRICKLE)

    with FakeLlamaServer(n_ctx=None) as server:
        server.default_responder = trickling
        entry, _ = _setup(server, settings, n_markets=10)
        decision, took = _timed(lambda: run_decision(entry.pk, 1, AT))
        asked = len(server.chat_requests)

    assert isinstance(decision, Decision), decision
    assert others and all(other is None for other in others)
    assert decision.status == Decision.Status.FAILED and "timed out" in decision.error
    assert took < settings.ARENA_CLAIM_TIMEOUT_SECONDS
    assert LLMCall.objects.filter(decision=decision).count() == asked == len(others)
    assert claim_decision(entry.pk, 1) is None
