"""The built-in simulated model endpoint: OpenAI-compatible chat completions on 127.0.0.1.

A small threaded HTTP server, part of the product (not a test fake): it lets an install without
an API key run the arena's whole model path for real. The arena's own client (agents/llm.py)
calls it exactly as it calls OpenRouter; the seeded forecasters of simulations/simmodels.py
answer. Served two ways:
- in-process by `arena demo` and `arena replay-forecastbench --simulated` (`simulated_llm()`),
  which register their world (each market's outcome, which only a simulation knows) so the
  skilled forecaster has something to peek at;
- by `arena simulated-llm --port N` for an operator testing a lineup: that server has no world
  and no way to receive one over HTTP, so nothing a simulation knows reaches live use.

Routes (under /v1): POST /chat/completions, GET /models (a catalog in OpenRouter's shape: ids,
names, context lengths, prices as strings in USD per token, creation times, so a rehearsal's
lineup review reads it as it reads OpenRouter's; `reprice()` changes a model's listed price and
`unlist()` takes one out). The answer has the OpenAI shape with
`usage` counted from the actual text (prompt_view.count_tokens), reasoning tokens for a thinking
character, `usage.cost` 0 (nothing is billed; the pages say "simulated"), and a finish_reason of
"length" when max_tokens cuts the answer. Latency is realistic (seconds to the first token plus
tokens over a per-character throughput, seeded) times `latency_scale`: 1 for real time, small
for the demo, 0 in tests. `latency_seconds=(low, high)` replaces that with a flat band: every call
waits a uniform draw in it, whatever the character writes (a provider's latency, for sizing the
workers that wait on it).

Bad requests get OpenAI-style error bodies and a 4xx: not JSON, no messages, an unknown model,
a body over MAX_BODY_BYTES, and any request carrying an API key (a simulated competitor never has
one; refusing it makes a misconfigured competitor fail loudly instead of working).

Faults a provider shows, for a rehearsal to inject (`fail()`; none unless queued): a status with
an optional Retry-After (429 rate limited, 402 out of credits, 5xx) and a stall (an answer held
past the client's timeout). Each queued fault is taken by the next chat request, in order.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents.models import Competitor
from agents.simulated import SIMULATED_LATENCY_FIELD, simulated_endpoint
from core import clock
from simulations import prompt_view, simmodels
from simulations.simmodels import CHARACTERS, World

DEFAULT_PORT = 8765
HOST = "127.0.0.1"
API_PREFIX = "/v1"
MAX_BODY_BYTES = 8_000_000
# Inside a simulation (demo, replay) the simulated models answer in a realistic time (seconds to
# a minute or two, from the tokens they write) times this, so a demo's few hundred calls add
# seconds, not hours; the latencies recorded are the scaled ones.
SIMULATION_LATENCY_SCALE = 0.005
OWNER = "simulated"
# What the catalog lists for every simulated model: they are free, take any prompt the arena
# writes, and were all "released" on one fixed day (a catalog that differs between runs would
# make a rehearsal's review differ too).
CATALOG_CONTEXT = 131072
CATALOG_CREATED = 1767225600  # 2026-01-01T00:00:00Z
FAULT_KINDS = ("status", "stall")


@dataclass
class ChatFault:
    kind: str  # "status" | "stall"
    status: int = 429
    retry_after: str | None = None
    stall: float = 0.0  # seconds held before answering normally, for "stall"


@dataclass(frozen=True)
class MappingWorld:
    """A world from {market id: winning outcome} ("" or missing: unknown or void)."""

    outcomes: Mapping[str, str]

    def outcome(self, market_id: str) -> str | None:
        return self.outcomes.get(market_id) or None


class SimulatedLLMServer:
    def __init__(
        self,
        port: int = 0,
        latency_scale: float = 1.0,
        world: World | None = None,
        latency_seconds: tuple[float, float] | None = None,
        now: clock.Clock | None = None,
    ) -> None:
        if latency_scale < 0:
            raise ValueError("latency_scale must be at least 0")
        if latency_seconds is not None and not 0 <= latency_seconds[0] <= latency_seconds[1]:
            raise ValueError("latency_seconds must be (low, high) with 0 <= low <= high")
        self.port = port
        # The time its answers are stamped with: a simulation passes its own clock, since the
        # handler threads do not see the scope clock the simulation runs on.
        self.now: clock.Clock = now or clock.now
        self.latency_scale = latency_scale
        self.latency_seconds = latency_seconds
        # Its own generator: the band's draws differ between identical prompts, as a provider's do.
        self._band_rng = random.Random()
        self.world = world
        self.stopping = threading.Event()
        self.served = 0
        self.requests = 0  # every chat request received, answered or not (a call's record count)
        self.refused_keys = 0  # requests that carried an Authorization header
        self.faults: list[ChatFault] = []
        self.faulted = 0  # chat requests answered with a queued fault (a stall counts at its start)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # The catalog's changes: {model id: (prompt, completion) USD per token as strings}, and
        # ids no longer listed. The chat route still answers them: a catalog is only a listing.
        self.listed_prices: dict[str, tuple[str, str]] = {}
        self.unlisted: set[str] = set()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://{HOST}:{self._httpd.server_address[1]}{API_PREFIX}"

    # --- lifecycle ------------------------------------------------------------------------------

    def bind(self) -> SimulatedLLMServer:
        """Open the socket (OSError when the port is taken) without serving yet."""
        self._httpd = ThreadingHTTPServer((HOST, self.port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.simulated = self  # type: ignore[attr-defined]
        return self

    def start(self) -> SimulatedLLMServer:
        if self._httpd is None:
            self.bind()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,  # type: ignore[union-attr]
            kwargs={"poll_interval": 0.05},
            name="simulated-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (the `arena simulated-llm` verb)."""
        if self._httpd is None:
            self.bind()
        try:
            self._httpd.serve_forever(poll_interval=0.2)  # type: ignore[union-attr]
        finally:
            self.stop()

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers sleeping out a simulated latency
        if self._httpd is not None:
            if self._thread is not None:
                self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SimulatedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- answering (handler threads) ---------------------------------------------------------

    def reprice(self, model_id: str, prompt: str, completion: str) -> None:
        """List `model_id` at these prices (USD per token, as strings) from now on."""
        with self._lock:
            self.listed_prices[model_id] = (prompt, completion)

    def unlist(self, model_id: str) -> None:
        with self._lock:
            self.unlisted.add(model_id)

    def models(self) -> dict:
        with self._lock:
            prices, unlisted = dict(self.listed_prices), set(self.unlisted)
        listed = []
        for c in CHARACTERS.values():
            if c.model_id in unlisted:
                continue
            prompt, completion = prices.get(c.model_id, ("0", "0"))
            listed.append(
                {
                    "id": c.model_id,
                    "object": "model",
                    "owned_by": OWNER,
                    "name": f"{c.name} (simulated)",
                    "created": CATALOG_CREATED,
                    "description": c.blurb,
                    "context_length": CATALOG_CONTEXT,
                    "pricing": {"prompt": prompt, "completion": completion},
                    "top_provider": {"context_length": CATALOG_CONTEXT},
                }
            )
        return {"data": listed}

    def chat(self, body: Any) -> tuple[int, dict]:
        """(status, payload) for a chat-completions request body."""
        if not isinstance(body, dict):
            return 400, error_body(400, "the request body must be a JSON object")
        model = body.get("model")
        messages = body.get("messages")
        character = CHARACTERS.get(model) if isinstance(model, str) else None
        if character is None:
            served = ", ".join(CHARACTERS)
            return 404, error_body(404, f"model {model!r} is not served here; models: {served}")
        if not isinstance(messages, list) or not messages:
            return 400, error_body(400, "messages must be a non-empty list")
        if not all(isinstance(m, dict) for m in messages):
            return 400, error_body(400, "each message must be an object")
        latency_rng = random.Random(simmodels.seed_for(model, messages, body.get("seed")))
        answer = simmodels.respond(character, messages, self.world, repr(body.get("seed")))
        text, finish = answer.text, "stop"
        completion = prompt_view.count_tokens(text)
        thinking = answer.thinking_tokens
        limit = _max_tokens(body)
        if limit is not None and completion + thinking > limit:
            kept = max(limit - thinking, 0)
            text = text[: len(text) * kept // max(completion, 1)]
            completion, thinking = kept, min(thinking, limit)
            finish = "length"
        seconds = self._wait(character, completion + thinking, latency_rng)
        with self._lock:
            self.served += 1
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_view.count_prompt_tokens(messages),
            "completion_tokens": completion + thinking,
            "cost": 0,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if thinking:
            usage["completion_tokens_details"] = {"reasoning_tokens": thinking}
        return 200, {
            # Drawn from the request's own generator: the same prompt gets the same answer, id
            # and stated time, so a simulation's records are the same on every run.
            "id": f"gen-sim-{latency_rng.getrandbits(96):024x}",
            "object": "chat.completion",
            "created": int(self.now().timestamp()),
            "model": model,
            "provider": "Simulated",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
            # How long the simulated model takes to answer at full scale, whatever share of it
            # was waited out: what a simulated competitor's call records as its latency
            # (agents/llm.py), so a shortened or skipped wait leaves the same record.
            SIMULATED_LATENCY_FIELD: round(seconds * 1000),
        }

    def _wait(self, character: simmodels.Character, tokens: int, rng: random.Random) -> float:
        """Sleep as long as the character would take to answer, times latency_scale (or a draw
        in the latency_seconds band when one is set); the full-scale seconds."""
        if self.latency_seconds is not None:
            with self._lock:
                seconds = self._band_rng.uniform(*self.latency_seconds)
            self.stopping.wait(seconds)
            return seconds
        seconds = rng.uniform(*character.first_token) + tokens / rng.uniform(
            *character.tokens_per_second
        )
        if self.latency_scale:
            self.stopping.wait(seconds * self.latency_scale)
        return seconds

    def fail(self, kind: str, *, times: int = 1, **how: Any) -> None:
        """Queue `times` faults of one kind for the next chat requests."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, not {kind!r}")
        with self._lock:
            self.faults += [ChatFault(kind, **how) for _ in range(times)]

    def take_fault(self) -> ChatFault | None:
        with self._lock:
            if not self.faults:
                return None
            self.faulted += 1
            return self.faults.pop(0)

    def note_request(self) -> None:
        with self._lock:
            self.requests += 1

    def note_key(self) -> None:
        with self._lock:
            self.refused_keys += 1


def _max_tokens(body: dict) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def error_body(status: int, message: str) -> dict:
    return {"error": {"message": message, "code": status}}


class _Handler(BaseHTTPRequestHandler):
    # One request per connection: no idle keep-alive threads outlive a run.
    protocol_version = "HTTP/1.0"
    server_version = "arena-simulated-llm"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the demo's and the verb's output is their own summary, not an access log

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") == f"{API_PREFIX}/models":
            self._send(200, self._sim.models())
        else:
            self._send(404, error_body(404, f"no route GET {self.path[:100]}"))

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/") != f"{API_PREFIX}/chat/completions":
            self._send(404, error_body(404, f"no route POST {self.path[:100]}"))
            return
        self._sim.note_request()
        if self.headers.get("Authorization"):
            self._sim.note_key()
            self._send(400, error_body(400, "the simulated endpoint takes no API key"))
            return
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError:
            self._send(411, error_body(411, "a Content-Length header is required"))
            return
        if length < 0 or length > MAX_BODY_BYTES:
            self._send(413, error_body(413, f"request body over {MAX_BODY_BYTES} bytes"))
            return
        try:
            body = json.loads(self.rfile.read(length))
        except (ValueError, UnicodeDecodeError):
            self._send(400, error_body(400, "the request body is not JSON"))
            return
        fault = self._sim.take_fault()
        if fault is not None and fault.kind == "stall":
            self._sim.stopping.wait(fault.stall)  # the client has given up by now
        if fault is not None and fault.kind == "status":
            message = {
                429: "rate limited: too many requests, retry after the given time",
                402: "insufficient credits: add credits to continue",
            }.get(fault.status, "provider error")
            extra = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            self._send(fault.status, error_body(fault.status, message), extra)
            return
        try:
            status, payload = self._sim.chat(body)
        except Exception as exc:  # a bug here must reach the caller as an answer, not a hang
            status, payload = 500, error_body(500, f"simulated endpoint error: {exc!r}"[:300])
        self._send(status, payload)

    def _not_allowed(self) -> None:
        self._send(405, error_body(405, f"method {self.command} not allowed"))

    do_PUT = do_PATCH = do_DELETE = _not_allowed

    @property
    def _sim(self) -> SimulatedLLMServer:
        return self.server.simulated  # type: ignore[attr-defined]

    def _send(self, status: int, payload: dict, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to tell it


# --- for simulations: the lineup and the in-process endpoint ---------------------------------


def simulated_competitor_specs() -> list[dict[str, Any]]:
    return [
        {
            "slug": f"sim-{c.slug}",
            "display_name": f"{c.name} (simulated)",
            "kind": Competitor.Kind.LLM,
            "family": "Simulated",
            "provider": "simulated",
            "model_id": c.model_id,
            "params": {"temperature": 0, "max_tokens": 32000},
            "price_in_per_m": 0,
            "price_out_per_m": 0,
            "simulated": True,
            # Never in the live lineup by default: simulations pass their competitors explicitly.
            "active": False,
            "notes": f"Simulated model (no real model is called). {c.blurb}",
        }
        for c in CHARACTERS.values()
    ]


def ensure_simulated_competitors() -> list[Competitor]:
    """The simulated competitors, created (inactive) when missing. A staff competitor that took
    one of their slugs without being simulated is refused rather than mixed in."""
    competitors = []
    for spec in simulated_competitor_specs():
        fields = dict(spec)
        competitor, _ = Competitor.objects.get_or_create(slug=fields.pop("slug"), defaults=fields)
        if not competitor.simulated:
            raise ValueError(
                f"competitor {competitor.slug!r} exists and is not simulated; rename it so the "
                "simulated lineup can use its slug"
            )
        competitors.append(competitor)
    return competitors


@contextmanager
def simulated_llm(
    world: World | None = None, latency_scale: float = 0.0, now: clock.Clock | None = None
) -> Iterator[SimulatedLLMServer]:
    """Serve the simulated endpoint in this process and route simulated competitors' calls made
    inside the block (in this thread) to it; stopped when the block ends. `now`: the clock its
    answers are stamped with (the simulation's)."""
    server = SimulatedLLMServer(latency_scale=latency_scale, world=world, now=now).start()
    try:
        with simulated_endpoint(server.base_url):
            yield server
    finally:
        server.stop()
