"""The simulated model endpoint, driven by the project's own LLM client and the real v1 prompt."""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import requests
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.attempts import LENGTH
from agents.endpoints import client_for
from agents.llm import LLMClient
from agents.models import Competitor
from agents.parsing import DecisionValidationError, parse_decision
from agents.prompts import (
    MIN_BET,
    PositionView,
    decision_context,
    max_allocation,
    repair_prompt,
    system_prompt,
    user_prompt,
)
from agents.simulated import simulated_endpoint
from simulations import prompt_view
from simulations.simllm import MAX_BODY_BYTES, MappingWorld, SimulatedLLMServer
from simulations.simmodels import CHARACTERS
from tests.fixtures import interruptible

ROOT = Path(__file__).resolve().parents[2]
MODELS = list(CHARACTERS)


@dataclass
class _Universe:
    """A frozen universe as agents.prompts reads it (the Protocol there)."""

    markets: list[dict]
    forecast_sample: list[int]
    pk: int = 1
    content_hash: str = field(default_factory=lambda: f"h{random.random()}")


def _universe(n: int = 30, sample: int = 8) -> _Universe:
    markets = [
        {
            "market_id": 100 + i,
            "question": f"Will event {i} | part {i} happen by March?",
            "outcomes": ["Yes", "No"],
            "prices": {"Yes": f"{0.05 + 0.03 * i:.3f}", "No": f"{0.95 - 0.03 * i:.3f}"},
            "volume": str(10_000 * (n - i)),
            "close_time": "2026-03-20T00:00:00Z",
            "days_to_close": 19,
            "rules": "Resolves Yes if it happens.",
        }
        for i in range(n)
    ]
    markets.append(
        {
            "market_id": 999,
            "question": "Who wins the final?",
            "outcomes": ["Red team", "Blue team", "Draw"],
            "prices": {"Red team": "0.5", "Blue team": "0.3", "Draw": "0.2"},
            "volume": "5000",
            "close_time": None,
            "days_to_close": None,
        }
    )
    return _Universe(markets, [100 + i for i in range(0, 2 * sample, 2)])


POSITIONS = [
    PositionView(7, 101, "Will event 1 happen?", "Yes", Decimal(50), Decimal("4.00"), Decimal("0.9"), "open"),
    PositionView(8, 55, "An old market", "No", Decimal(10), Decimal("5.00"), None, "closed"),
]  # fmt: skip


def _messages(universe: _Universe, cash: str = "10000") -> list[dict]:
    text = user_prompt(
        universe=universe,
        week=2,
        weeks=5,
        at=datetime(2026, 3, 1, 0, 5, tzinfo=UTC),
        cash=Decimal(cash),
        positions=POSITIONS,
    )
    return [{"role": "system", "content": system_prompt()}, {"role": "user", "content": text}]


@pytest.fixture
def world_server():
    outcomes = {str(100 + i): ("Yes" if i % 3 else "No") for i in range(30)}
    with SimulatedLLMServer(latency_scale=0, world=MappingWorld(outcomes)) as server:
        yield server


def _client(server) -> LLMClient:
    return LLMClient(server.base_url, None, timeout=10, max_retries=0)


def test_the_prompt_is_read_as_the_model_sees_it():
    universe = _universe()
    view = prompt_view.read_prompt(_messages(universe, cash="8123.45")[1]["content"])
    assert view is not None
    assert view.cash == Decimal("8123.45")
    assert view.max_allocation == max_allocation(Decimal("8123.45"))
    assert view.min_bet == MIN_BET
    assert view.sample == [str(m) for m in universe.forecast_sample]
    assert list(view.markets) == [str(m["market_id"]) for m in universe.markets]
    assert view.markets["103"].prices == {"Yes": 0.14, "No": 0.86}
    assert view.markets["103"].question == "Will event 3 | part 3 happen by March?"
    assert view.markets["999"].outcomes == ("Red team", "Blue team", "Draw")
    assert [
        (p.position_id, p.market_id, p.outcome, p.price, p.sellable) for p in view.positions
    ] == [
        ("7", "101", "Yes", 0.9, True),
        ("8", "55", "No", None, False),
    ]
    assert prompt_view.read_prompt("What is the capital of France?") is None


@pytest.mark.parametrize("model", MODELS)
def test_each_model_answers_the_real_prompt_through_the_project_client(world_server, model):
    universe = _universe()
    client = _client(world_server)
    result = client.chat(model, _messages(universe), params={"max_tokens": 32000})
    assert result.ok, result.error
    (attempt,) = result.attempts
    assert attempt.http_status == 200 and attempt.served_model == model
    assert attempt.generation_id.startswith("gen-sim-")
    # Usage is counted from the text actually exchanged, and nothing is billed.
    assert attempt.completion_tokens >= prompt_view.count_tokens(result.content) > 0
    assert attempt.prompt_tokens == prompt_view.count_prompt_tokens(_messages(universe))
    assert attempt.cost_usd == 0 and attempt.cost_source == "usage"
    assert json.loads(attempt.raw_response)["usage"]["cost"] == 0
    ctx = decision_context(universe, POSITIONS)
    try:
        parsed = parse_decision(result.content, ctx)
    except DecisionValidationError as exc:
        assert model == "simulated/sloppy", exc.problems  # only the sloppy one breaks the format
        return
    assert {f.market_id for f in parsed.forecasts} >= set(ctx.forecast_sample)
    if model == "simulated/chatty":
        assert "```json" in result.content and not result.content.startswith("{")


def test_same_prompt_same_answer_and_another_seed_differs(world_server):
    client = _client(world_server)
    messages = _messages(_universe())
    first = client.chat("simulated/copier", messages).content
    assert client.chat("simulated/copier", messages).content == first
    assert client.chat("simulated/copier", messages, params={"seed": 5}).content != first


def test_the_sloppy_model_breaks_the_format_and_repairs_it(world_server):
    client = _client(world_server)
    universe = _universe()
    ctx = decision_context(universe, POSITIONS)
    outcomes = []
    for cash in range(9000, 9040):  # 40 prompts (the cash line differs): both kinds show
        messages = _messages(universe, cash=str(cash))
        first = client.chat("simulated/sloppy", messages).content
        try:
            parse_decision(first, ctx)
            outcomes.append("valid")
            continue
        except DecisionValidationError as exc:
            problems = exc.problems
        repair = [
            *messages,
            {"role": "assistant", "content": first},
            {"role": "user", "content": repair_prompt(problems)},
        ]
        try:
            parse_decision(client.chat("simulated/sloppy", repair).content, ctx)
            outcomes.append("repaired")
        except DecisionValidationError:
            outcomes.append("still broken")
    assert outcomes.count("valid") >= 10 and outcomes.count("repaired") >= 10
    assert outcomes.count("repaired") > outcomes.count("still broken")


def test_the_skilled_model_leans_toward_the_registered_outcomes_only_when_there_is_a_world():
    universe = _universe()
    messages = _messages(universe)
    outcomes = {str(100 + i): ("Yes" if i % 3 else "No") for i in range(30)}

    def yes_forecasts(world):
        with SimulatedLLMServer(latency_scale=0, world=world) as server:
            content = _client(server).chat("simulated/skilled", messages).content
        items = json.loads(content)["forecasts"]
        return {f["market_id"]: f["probability"] for f in items if f["outcome"] == "Yes"}

    price = {str(m["market_id"]): float(m["prices"]["Yes"]) for m in universe.markets[:30]}
    informed = yes_forecasts(MappingWorld(outcomes))
    toward = [
        (informed[m] > price[m]) == (outcomes[m] == "Yes") for m in price if informed[m] != price[m]
    ]
    assert sum(toward) >= 0.8 * len(toward) >= 20
    blind = yes_forecasts(None)  # the stand-alone endpoint: no world, the market's prices
    assert all(blind[m] == pytest.approx(price[m], abs=0.001) for m in price)


def test_max_tokens_cuts_the_answer_and_the_client_reports_it(world_server):
    result = _client(world_server).chat(
        "simulated/skilled", _messages(_universe()), params={"max_tokens": 200}
    )
    assert not result.ok and result.attempts[0].error_kind == LENGTH
    body = json.loads(result.attempts[0].raw_response)
    assert body["usage"]["completion_tokens"] == 200
    assert body["choices"][0]["finish_reason"] == "length"


def test_models_list_prices_everything_at_zero(world_server):
    assert _client(world_server).model_prices() == {m: (Decimal(0), Decimal(0)) for m in MODELS}


def test_bad_requests_get_one_clear_4xx(world_server):
    url = world_server.base_url
    client = _client(world_server)
    unknown = client.chat("openai/gpt-5.1", _messages(_universe()))
    assert len(unknown.attempts) == 1 and unknown.attempts[0].http_status == 404
    assert "not served here" in unknown.error
    with_key = LLMClient(url, "sk-real-key", timeout=10, max_retries=0).chat(
        "simulated/skilled", _messages(_universe())
    )
    assert with_key.attempts[0].http_status == 400 and "no API key" in with_key.error
    assert world_server.refused_keys == 1
    cases = [
        (requests.post(f"{url}/chat/completions", data=b"{not json", timeout=5), 400),
        (requests.post(f"{url}/chat/completions", json=[1, 2], timeout=5), 400),
        (requests.post(f"{url}/chat/completions", json={"model": MODELS[0]}, timeout=5), 400),
        (requests.post(f"{url}/chat/completions", json={"model": MODELS[0], "messages": [1]}, timeout=5), 400),
        (requests.get(f"{url}/nothing", timeout=5), 404),
        (requests.delete(f"{url}/chat/completions", timeout=5), 405),
    ]  # fmt: skip
    for response, status in cases:
        assert response.status_code == status
        assert isinstance(response.json()["error"]["message"], str)
    # A body announced over the cap is refused before it is read.
    conn = http.client.HTTPConnection("127.0.0.1", int(url.split(":")[2].split("/")[0]), timeout=5)
    conn.putrequest("POST", "/v1/chat/completions")
    conn.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
    conn.endheaders()
    assert conn.getresponse().status == 413
    conn.close()
    # A chat that is not the arena's decision prompt still gets a valid (HOLD) answer.
    chat = client.chat("simulated/chatty", [{"role": "user", "content": "hello"}])
    assert chat.ok and json.loads(chat.content)["action"] == "HOLD"


# --- competitors: keys, endpoints, the lineup ------------------------------------------------


@pytest.mark.django_db
def test_a_simulated_competitor_never_sends_a_key_and_only_calls_loopback(settings, monkeypatch):
    settings.ARENA_LLM_API_KEY = "sk-or-real"
    monkeypatch.setenv("SOME_KEY", "sk-other")
    sim = Competitor(
        slug="s", kind=Competitor.Kind.LLM, model_id="simulated/skilled", simulated=True
    )
    client, reason = client_for(sim)
    assert client is None and "arena simulated-llm" in reason  # no endpoint, never OpenRouter
    with simulated_endpoint("http://127.0.0.1:9/v1"):
        client, _ = client_for(sim)
    assert client.base_url == "http://127.0.0.1:9/v1" and "Authorization" not in client.headers
    sim.base_url, sim.api_key_env = "http://localhost:8765/v1", "SOME_KEY"  # a bad admin edit
    client, _ = client_for(sim)
    assert client.base_url == "http://localhost:8765/v1" and "Authorization" not in client.headers
    sim.base_url = "https://openrouter.ai/api/v1"
    client, reason = client_for(sim)
    assert client is None and "loopback" in reason
    with pytest.raises(ValidationError) as exc:
        sim.full_clean()
    assert {"api_key_env", "base_url"} <= set(exc.value.message_dict)


@pytest.mark.django_db
def test_the_simulated_lineup_is_created_inactive_and_refuses_a_real_namesake():
    from simulations.simllm import ensure_simulated_competitors

    sims = ensure_simulated_competitors()
    assert len(sims) == len(CHARACTERS) >= 4
    assert all(c.simulated and not c.active and c.is_llm and not c.api_key_env for c in sims)
    assert {c.model_id for c in sims} == set(CHARACTERS)
    assert ensure_simulated_competitors() == sims  # idempotent
    Competitor.objects.filter(slug="sim-skilled").update(simulated=False)
    with pytest.raises(ValueError, match="not simulated"):
        ensure_simulated_competitors()


# --- the verb ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_verb_refuses_a_taken_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"cannot listen on 127.0.0.1:{port}"):
            call_command("arena", "simulated-llm", "--port", str(port))


def test_the_verb_serves_the_endpoint_until_interrupted(tmp_path):
    port = _free_port()
    env = {**os.environ, "ARENA_VAR_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "arena", "simulated-llm", "--port", str(port),
         "--latency-scale", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=interruptible,
    )  # fmt: skip
    try:
        banner = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in banner
        client = LLMClient(f"http://127.0.0.1:{port}/v1", None, timeout=10, max_retries=0)
        assert client.chat("simulated/copier", _messages(_universe())).ok
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "stopped" in out
