"""A real local model through the whole decision path: llama.cpp's `llama-server` (built from
source by the `llama` dependency group) on 127.0.0.1 with SmolLM2-135M, started exactly as the
README's recipe says (scripts/llama_server.py) and allowed through ARENA_LLM_ENDPOINTS.

What is asserted is the arena's handling, never the model's wisdom: the audit trail of every
call, the context budget cutting the universe (the sample always shown), a prompt the server
refuses as over its context refitted to the size it names, and an answer cut off by max_tokens
repaired or held, never FAILED.

Selected only with ARENA_LLAMA_TESTS=1 (.ci/run's PostgreSQL pass: the build takes ~15 min of
CPU, too much for a newcomer's first `./run test`); selected without the build, it fails.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from cohorts.decisions.run import decide
from cohorts.models import Decision
from cohorts.universe import freeze_universe
from tests.agents.helpers import AT, llm_competitor, make_cohort, make_markets

pytestmark = [pytest.mark.llama, pytest.mark.django_db]

ROOT = Path(__file__).resolve().parents[2]
CTX = 2048
START_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines(stream, out: queue.Queue, log: Path) -> None:
    # Drained all along (a full pipe would stall the server) and kept for a failure's diagnosis.
    with log.open("w", encoding="utf-8") as kept:
        for line in iter(stream.readline, ""):
            kept.write(line)
            kept.flush()
            out.put(line)
    out.put(None)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """The README's command, in its own process group so that stopping it stops everything."""
    port = _free_port()
    cmd = [sys.executable, str(ROOT / "scripts" / "llama_server.py"), "--port", str(port)]
    cmd += ["--ctx-size", str(CTX)]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    threading.Thread(target=_lines, args=(proc.stdout, lines, log), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + START_SECONDS
    try:
        # Ready when the server says it listens (its log line), not after a guessed wait.
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"llama-server did not start in {START_SECONDS}s: {seen[-5:]}")
            if line is None:
                pytest.fail("llama-server exited: " + "".join(seen[-10:]))
            seen.append(line)
            if f"listening on http://127.0.0.1:{port}" in line:
                break
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    with pytest.raises(ProcessLookupError):  # nothing of the group is left running
        os.killpg(proc.pid, 0)


@pytest.mark.timeout(1800)  # a 135M model on 2 shared cores: minutes per decision
def test_real_decisions_through_llama_server(llama_server, settings):
    # As the README says: the server's base URL on the operator's allow-list, no key.
    settings.ARENA_LLM_ENDPOINTS = llama_server
    settings.ARENA_LLM_TIMEOUT = 600
    props = requests.get(llama_server.removesuffix("/v1") + "/props", timeout=10).json()
    assert props["default_generation_settings"]["n_ctx"] == CTX

    common = {"provider": "llama.cpp", "model_id": "smollm2", "base_url": llama_server}
    common |= {"api_key_env": "", "price_in_per_m": None, "price_out_per_m": None}
    # Context from the server's /props, answer shaped by a json_schema.
    fitted = llm_competitor(
        None,
        "smollm2-fitted",
        structured_output=True,
        params={"temperature": 0, "max_tokens": 200},
        **common,
    )
    # The operator claims a context the server does not have: the server refuses, names its
    # n_ctx, and the prompt is fitted to that and sent once more.
    overreach = llm_competitor(
        None,
        "smollm2-overreach",
        context_tokens=32768,
        structured_output=True,
        params={"temperature": 0, "max_tokens": 200},
        **common,
    )
    # Far too little room for the answer: cut off, repaired within as little room, held.
    cut = llm_competitor(None, "smollm2-cut", params={"temperature": 0, "max_tokens": 12}, **common)
    cohort = make_cohort([fitted, overreach, cut])
    markets = make_markets(40)
    universe = freeze_universe(cohort, 1, AT, markets=markets, sample_size=3)
    sample = [str(m) for m in universe.forecast_sample]

    assert decide(cohort, week=1, at=AT, sync=True) == 3

    decisions = {
        d.entry.competitor.slug: d
        for d in Decision.objects.filter(entry__cohort=cohort).select_related("entry__competitor")
    }
    for slug, decision in decisions.items():
        # Never failed for the week: finished, repaired or held with the reason.
        assert decision.status == Decision.Status.DONE, (slug, decision.error)
        calls = list(decision.llm_calls.order_by("attempt"))
        assert calls, slug
        for call in calls:  # the audit trail: every call kept with what it sent and got
            assert call.request["model"] == "smollm2" and call.request["messages"]
            assert call.raw_response and call.http_status in (200, 400)
            assert call.started_at is not None
            if call.http_status == 200:
                assert call.served_model == "smollm2"  # the alias, not the file path
                assert call.prompt_tokens and call.completion_tokens is not None
        budget = decision.prompt_budget
        # The budget cut: fewer markets than the universe, the forecast sample among them,
        # and the prompt as sent within the context with room for the answer.
        assert budget["context_tokens"] == CTX and budget["fits"], slug
        assert budget["markets_shown"] < budget["markets_total"] == 40
        assert budget["counted_by"] == "server"
        assert budget["prompt_tokens"] + budget["answer_tokens"] <= CTX
        cut_ids = set(budget["cut_market_ids"])
        assert cut_ids and not cut_ids & set(sample)
        for market_id in sample:
            assert f"[{market_id}]" in decision.user_prompt
        assert all(f"[{m}]" not in decision.user_prompt for m in cut_ids)
        for call in calls:
            if call.http_status == 200:
                assert call.prompt_tokens <= CTX

    assert decisions["smollm2-fitted"].prompt_budget["context_source"] == "server"
    fitted_call = decisions["smollm2-fitted"].llm_calls.order_by("attempt").first()
    schema = fitted_call.request["response_format"]["json_schema"]["schema"]
    prefix = schema["properties"]["forecasts"]["prefixItems"]
    assert [item["properties"]["market_id"]["const"] for item in prefix] == sample

    refused, *rest = decisions["smollm2-overreach"].llm_calls.order_by("attempt")
    assert refused.error_kind == "context_full" and refused.http_status == 400
    assert refused.prompt_tokens > CTX  # the tokens the server counted are kept
    assert f"{CTX}-token context" in refused.error
    assert rest and rest[0].phase == "refit" and rest[0].http_status == 200
    assert decisions["smollm2-overreach"].prompt_budget["context_source"] == "context refusal"
    assert decisions["smollm2-overreach"].tokens_in >= refused.prompt_tokens

    held = decisions["smollm2-cut"]
    phases = [(c.phase, c.finish_reason) for c in held.llm_calls.order_by("attempt")]
    assert phases[0] == ("initial", "length") and [p for p, _ in phases] == ["initial", "repair"]
    # The repair has as little room: cut off again, or a short answer that cannot carry the
    # sample's forecasts (the model decides which). Held with the reason either way, never FAILED.
    assert held.status != Decision.Status.FAILED and held.action == Decision.Action.HOLD
    if phases[1][1] == "length":
        assert "cut off" in held.hold_reason
    else:
        assert held.hold_reason and held.validation_errors
    assert held.validation_errors[0]["phase"] == "initial"
