"""The reference agent (docs/examples/outside_agent.py) plays a week as an outside team would run
it: its own Python process, isolated (-I, another directory: nothing of the arena importable),
over real HTTP to a running server with a frozen universe and a token. Its decision is recorded,
sealed and verifiable, signature included; a lost answer is retried safely."""

from __future__ import annotations

import base64
import http.client
import importlib.util
import json
import os
import subprocess
import sys
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)

from cohorts.models import AgentSubmission, Decision, Trade
from cohorts.seals.verify import export_chunks, signature_problem, verify_database, verify_export
from markets.models import Market
from tests.cohorts.agent_helpers import Agent, outside_agent

pytestmark = pytest.mark.django_db(transaction=True)
AGENT = Path(__file__).resolve().parents[2] / "docs" / "examples" / "outside_agent.py"


def run_agent(agent: Agent, url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-I", str(AGENT), "--url", url, "--backoff", "0.05", *args]
    if agent.key is not None:
        key = tmp_path / "agent-key.pem"
        key.write_bytes(agent.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
        argv += ["--key", str(key)]
    env = {"PATH": os.environ.get("PATH", ""), "ARENA_TOKEN": agent.token}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)  # fmt: skip


def test_the_reference_agent_decides_its_week_signed_sealed_and_verifiable(live_server, tmp_path):
    agent = outside_agent(markets=6)
    done = run_agent(agent, live_server.url, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    decision = Decision.objects.get(entry=agent.entry, week=1)
    assert done.stdout.startswith(f"decision {decision.pk}: {decision.action} ")
    assert decision.status == "done" and not decision.hold_reason
    # The rule keeps 80 % of each price: every sampled market has its forecast, each shrunk.
    prices = {str(m["market_id"]): m["prices"] for m in agent.universe.markets}
    for f in decision.forecasts.all():
        price = float(prices[str(f.market_id)][f.outcome])
        assert f.probability == pytest.approx(0.5 + 0.8 * (price - 0.5), abs=1e-4)
    if decision.action == "BET":
        trade = Trade.objects.get(decision=decision)
        frozen = prices[str(trade.position.market_id)][trade.position.outcome]
        assert trade.amount == 50 and trade.price == Decimal(frozen)  # at the frozen price
    (submission,) = AgentSubmission.objects.filter(decision=decision)
    assert submission.signature_verified is True and submission.idempotency_key
    assert agent.token not in done.stdout + done.stderr

    # Sealed (the agent is the cohort's only entry) and verifiable from the export alone.
    assert verify_database(agent.cohort.pk).ok
    doc = json.loads("".join(export_chunks(agent.cohort.pk)))
    assert verify_export(doc).ok
    record = doc["cohorts"][0]["weeks"][0]["digests"][0]["record"]
    (sealed,) = record["submissions"]
    assert sealed["signature_verified"] is True and signature_problem(record) == ""
    assert base64.b64decode(sealed["body_base64"]) == bytes(submission.body)

    # Run again: the week is decided, nothing more is submitted.
    again = run_agent(agent, live_server.url, tmp_path)
    assert again.returncode == 0 and again.stdout.startswith(f"decision {decision.pk}: ")
    assert AgentSubmission.objects.count() == 1


class LosesFirstAnswer:
    """A proxy in front of the server that forwards the first POST and then answers 502, as a
    load balancer does when the server's answer is lost on the way back."""

    def __init__(self, upstream: str):
        target = urlsplit(upstream)
        lost = threading.Event()
        self.posts: list[int] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                if self.command == "POST":
                    posts.append(answer.status)
                    if not lost.is_set():
                        lost.set()
                        answer, data = None, b'{"error": "bad gateway"}'
                self.send_response(answer.status if answer else 502)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = _forward

            def log_message(self, *args) -> None:  # quiet: the test reads its own record
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LosesFirstAnswer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_lost_answer_is_retried_with_its_key_and_decides_once(live_server, tmp_path):
    agent = outside_agent(markets=6)
    with LosesFirstAnswer(live_server.url) as proxy:
        done = run_agent(agent, proxy.url, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "HTTP 502; retrying" in done.stderr
    assert proxy.posts == [201, 201]  # the server decided once, then replayed its answer
    decision = Decision.objects.get(entry=agent.entry, week=1)
    first, retry = AgentSubmission.objects.order_by("pk")
    assert first.idempotency_key == retry.idempotency_key and retry.response["replayed"] is True
    assert first.decision_id == decision.pk and Decision.objects.count() == 1


def _example():
    spec = importlib.util.spec_from_file_location("outside_agent_example", AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_refused_bet_is_dropped_and_the_answer_sent_once_more(live_server, tmp_path, client):
    """The agent uses the one repair the arena allows: its first answer bets on a market that
    closed after the freeze (422, a try left, the market named); it decides again without that
    market and the second answer is accepted."""
    agent = outside_agent(markets=6)
    week = client.get("/api/agent/v1/week", HTTP_AUTHORIZATION=f"Bearer {agent.token}").json()
    first = _example().decide(week, 0.8)
    assert first["action"] == "BET", first  # the spread of prices leaves a gap to bet on
    refused = int(first["bets"][0]["market_id"])
    Market.objects.filter(pk=refused).update(status=Market.Status.CLOSED)

    done = run_agent(agent, live_server.url, tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"refused, deciding again without market(s) {refused}" in done.stderr
    decision = Decision.objects.get(entry=agent.entry, week=1)
    assert decision.status == "done" and not decision.hold_reason
    assert not Trade.objects.filter(decision=decision, position__market_id=refused).exists()
    outcomes = list(AgentSubmission.objects.filter(entry=agent.entry).order_by("pk")
                    .values_list("outcome", flat=True))  # fmt: skip
    assert outcomes == [AgentSubmission.Outcome.INVALID, AgentSubmission.Outcome.ACCEPTED]


def test_a_week_another_thread_is_sending_is_not_sent_twice(live_server):
    """--follow looks at the newest cohort both by its id and as "the newest": a week one thread
    is sending is left to it (two sends at once would spend the week's one repair on each
    other), then decided by that thread alone."""
    agent = outside_agent(markets=6)
    example = _example()
    client = example.Client(live_server.url, agent.token, tries=2, backoff=0.05, timeout=10)
    follower = example.Follower(client, shrink=0.8, poll=0.1, rate=1.0,
                                key=agent.key)  # fmt: skip
    follower.sending.add((agent.cohort.pk, 1))
    assert follower.one(None)[0] == "waiting"
    assert not AgentSubmission.objects.exists()
    follower.sending.clear()
    assert follower.one(agent.cohort.pk)[0] == "settled"
    assert AgentSubmission.objects.count() == 1
