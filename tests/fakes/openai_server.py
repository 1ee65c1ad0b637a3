"""A fake OpenAI-compatible / OpenRouter server: a real HTTP server on 127.0.0.1.

Use it as a context manager or through the fixtures in tests/fixtures.py (`openai_server`, a
bare one; `model_server`, one the operator allows):

    with FakeOpenAIServer() as server:
        server.enqueue(rate_limited(retry_after=2), success('{"action": "HOLD"}'))
        client = LLMClient(server.base_url, "sk-test", timeout=5)
        ...
        server.chat_requests[0].headers["Authorization"]

POST .../chat/completions answers from the scripted queue (one FakeResponse per request), then
from `default_responder(request)` when the queue is empty (benchmarks), else with a 500 that
says nothing was scripted. GET .../models serves `server.models` (string pricing) and
GET .../generation?id= answers 404 `generation_not_ready` times per id, then 200, like
OpenRouter's eventually consistent lookup. Every request is recorded.

The body builders below follow EXTERNAL_APIS.md §3.3-3.4 (real shapes and messages).
Delays wait on an event that `stop()` sets, and handler threads are daemons, so a response
scripted to arrive after the client's timeout never holds up the test run.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DEFAULT_MODEL = "openai/gpt-4o-mini"
API_PREFIX = "/api/v1"  # as OpenRouter; clients get base_url, which includes it
USER_ID = "user_3ACTuIpdW2g1KbGLjUNXYh4CxGO"


@dataclass
class FakeResponse:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str/bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    # Seconds between bytes: the whole answer, status line included, sent one byte at a time.
    trickle: float = 0.0


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    json: Any  # the parsed body, or None when it was not JSON


Responder = Callable[[RecordedRequest], FakeResponse]


class FakeOpenAIServer:
    """Serves under /api/v1 (like OpenRouter); `base_url` is what a client is given."""

    def __init__(self, default_responder: Responder | None = None) -> None:
        self.default_responder = default_responder
        self.requests: list[RecordedRequest] = []
        self.models: list[dict] = [
            model_entry(DEFAULT_MODEL, "0.00000015", "0.0000006"),
            model_entry("meta-llama/llama-3.3-70b-instruct:free", "0", "0"),
        ]
        self.generations: dict[str, dict] = {}
        self.generation_not_ready = 1
        self._generation_lookups: dict[str, int] = {}
        self._queue: deque[FakeResponse] = deque()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting --------------------------------------------------------------------------

    def enqueue(self, *responses: FakeResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == f"{API_PREFIX}/chat/completions"]

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{API_PREFIX}"

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        # A short poll interval keeps stop() (and so each test) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers still sitting in a delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- request handling (called from handler threads) --------------------------------------

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def respond(self, request: RecordedRequest) -> FakeResponse:
        route = (request.method, request.path.rstrip("/"))
        if route == ("POST", f"{API_PREFIX}/chat/completions"):
            return self._chat(request)
        if route == ("GET", f"{API_PREFIX}/models"):
            return FakeResponse(200, {"data": self.models})
        if route == ("GET", f"{API_PREFIX}/generation"):
            return self._generation(request.query.get("id", [""])[0])
        return FakeResponse(404, error_body(404, f"no route {request.method} {request.path}"))

    def _chat(self, request: RecordedRequest) -> FakeResponse:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None and self.default_responder is not None:
            scripted = self.default_responder(request)
        if scripted is None:
            return FakeResponse(500, error_body(500, "fake server: no response scripted"))
        self._remember_generation(scripted)
        return scripted

    def _remember_generation(self, response: FakeResponse) -> None:
        body = response.body
        if response.status != 200 or not isinstance(body, dict) or "id" not in body:
            return
        usage = body.get("usage") or {}
        with self._lock:
            self.generations[body["id"]] = {
                "id": body["id"],
                "model": body.get("model"),
                "total_cost": usage.get("cost"),
                "usage": usage.get("cost"),
                "tokens_prompt": usage.get("prompt_tokens"),
                "tokens_completion": usage.get("completion_tokens"),
                "native_tokens_reasoning": (usage.get("completion_tokens_details") or {}).get(
                    "reasoning_tokens"
                ),
                "provider_name": body.get("provider"),
                "finish_reason": (body.get("choices") or [{}])[0].get("finish_reason"),
                "latency": 442,
                "generation_time": 457,
                "created_at": "2026-03-03T15:58:17.433273+00:00",
            }

    def _generation(self, generation_id: str) -> FakeResponse:
        with self._lock:
            seen = self._generation_lookups.get(generation_id, 0)
            self._generation_lookups[generation_id] = seen + 1
            data = self.generations.get(generation_id)
        if data is None or seen < self.generation_not_ready:
            return FakeResponse(404, error_body(404, f"Generation {generation_id} not found"))
        return FakeResponse(200, {"data": data})


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no idle keep-alive threads outlive a test.
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    def _handle(self) -> None:
        fake: FakeOpenAIServer = self.server.fake  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        url = urlsplit(self.path)
        request = RecordedRequest(
            method=self.command,
            path=url.path,
            query=parse_qs(url.query),
            headers=dict(self.headers.items()),
            raw=raw,
            json=parsed,
        )
        fake.record(request)
        response = fake.respond(request)
        if response.delay and fake.stopping.wait(response.delay):
            return  # the server is stopping: drop the connection
        # The client may have given up (timeout) before we answer: expected in slow tests.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._send(response)

    def _send(self, response: FakeResponse) -> None:
        body = response.body
        if isinstance(body, bytes):
            payload = body
        elif isinstance(body, str):
            payload = body.encode()
        else:
            payload = json.dumps(body).encode()
        if response.trickle:
            self._trickle(response, payload)
            return
        self.send_response(response.status)
        headers = {"Content-Type": "application/json", **response.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _trickle(self, response: FakeResponse, payload: bytes) -> None:
        fake: FakeOpenAIServer = self.server.fake  # type: ignore[attr-defined]
        head = f"HTTP/1.0 {response.status} OK\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(payload)}\r\n\r\n"
        for byte in head.encode() + payload:
            if fake.stopping.wait(response.trickle):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()


# --- body builders (EXTERNAL_APIS.md §3.3-3.5) ------------------------------------------------


def generation_id() -> str:
    return f"gen-{int(time.time())}-{secrets.token_hex(10)}"


def success_body(
    content: str | None,
    *,
    model: str = DEFAULT_MODEL,
    cost: float | None = 0.00384,
    prompt_tokens: int = 52,
    completion_tokens: int = 38,
    reasoning_tokens: int = 0,
    finish_reason: str = "stop",
    gen_id: str | None = None,
) -> dict:
    """A non-streaming completion as OpenRouter sends it; `cost=None` drops usage.cost."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "is_byok": False,
        "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning_tokens,
            "image_tokens": 0,
            "audio_tokens": 0,
        },
    }
    if cost is not None:
        usage["cost"] = cost
        usage["cost_details"] = {
            "upstream_inference_cost": cost,
            "upstream_inference_prompt_cost": round(cost * 0.4, 8),
            "upstream_inference_completions_cost": round(cost * 0.6, 8),
        }
    return {
        "id": gen_id or generation_id(),
        "provider": "OpenAI",
        "model": model,
        "object": "chat.completion",
        "created": int(time.time()),
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "logprobs": None,
                "finish_reason": finish_reason,
                "native_finish_reason": finish_reason,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "reasoning": None,
                },
            }
        ],
        "usage": usage,
    }


def success(
    content: str,
    *,
    delay: float = 0.0,
    headers: dict | None = None,
    trickle: float = 0.0,
    **kw: Any,
):
    return FakeResponse(200, success_body(content, **kw), dict(headers or {}), delay, trickle)


def fenced_json(obj: Any, **kw: Any) -> FakeResponse:
    """What weaker models do despite response_format: JSON inside a ```json fence."""
    return success(f"```json\n{json.dumps(obj, indent=2)}\n```", **kw)


def prose_around_json(obj: Any, **kw: Any) -> FakeResponse:
    text = (
        "Let me think about the markets {carefully}.\n\nHere is my decision:\n"
        f"{json.dumps(obj)}\n\nI hope this helps!"
    )
    return success(text, **kw)


def empty_content(**kw: Any) -> FakeResponse:
    return success("   \n", **kw)


def truncated(content: str = '{"action": "BET", "bets": [{"market_id": "1', **kw: Any):
    return success(content, finish_reason="length", **kw)


def in_band_error(
    message: str = "Provider returned error", code: int = 502, provider: str = "DeepInfra"
) -> FakeResponse:
    """HTTP 200 with choices[0].error and finish_reason "error" (error after generation began)."""
    body = success_body("", finish_reason="error", cost=0.0001)
    body["choices"][0]["error"] = {
        "code": code,
        "message": message,
        "metadata": {"provider_name": provider, "raw": "upstream connection reset"},
    }
    return FakeResponse(200, body)


def malformed(text: str = '{"id": "gen-1", "choices": [{"message": ') -> FakeResponse:
    return FakeResponse(200, text)


def error_body(code: int, message: str, metadata: dict | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if metadata is not None:
        error["metadata"] = metadata
    return {"error": error, "user_id": USER_ID}


def http_error(
    status: int, message: str, metadata: dict | None = None, headers: dict | None = None
) -> FakeResponse:
    return FakeResponse(status, error_body(status, message, metadata), dict(headers or {}))


def bad_request(model: str = "openai/gpt-nonexistent") -> FakeResponse:
    return http_error(400, f"{model} is not a valid model ID", {"provider_name": None})


def unauthorized() -> FakeResponse:
    return FakeResponse(401, {"error": {"message": "No auth credentials found", "code": 401}})


def payment_required() -> FakeResponse:
    return http_error(
        402,
        "This request requires more credits, or fewer max_tokens. You requested up to 8192 "
        "tokens, but can only afford 7527. To increase, visit "
        "https://openrouter.ai/settings/credits and upgrade to a paid account",
        {"provider_name": None},
    )


def forbidden() -> FakeResponse:
    return http_error(
        403,
        "Input was flagged by moderation",
        {
            "reasons": ["harassment"],
            "flagged_input": "...",
            "provider_name": "OpenAI",
            "model_slug": DEFAULT_MODEL,
        },
    )


def not_found(model: str = DEFAULT_MODEL) -> FakeResponse:
    return http_error(404, f"No endpoints found for {model}.")


def request_timeout() -> FakeResponse:
    return http_error(408, "Request timed out")


def rate_limited(retry_after: str | None = "2", reset_ms: int = 1788825600000) -> FakeResponse:
    """Platform free-tier 429, with Retry-After and X-RateLimit-* headers."""
    limits = {
        "X-RateLimit-Limit": "50",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": str(reset_ms),
    }
    headers = dict(limits)
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return http_error(
        429,
        "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model "
        "requests per day",
        {"headers": limits},
        headers,
    )


def bad_gateway(provider: str = "Together") -> FakeResponse:
    return http_error(
        502,
        "Provider returned error",
        {"provider_name": provider, "raw": "upstream returned an invalid response"},
    )


def unavailable(retry_after: str | None = None) -> FakeResponse:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return http_error(503, "No available providers meet your routing requirements", None, headers)


def model_entry(model_id: str, prompt: str, completion: str) -> dict:
    """A /models entry; prices are strings in USD per token, as OpenRouter sends them."""
    return {
        "id": model_id,
        "canonical_slug": model_id,
        "name": model_id,
        "created": 1721260800,
        "context_length": 128000,
        "architecture": {"modality": "text->text", "tokenizer": "GPT", "instruct_type": None},
        "pricing": {
            "prompt": prompt,
            "completion": completion,
            "request": "0",
            "image": "0",
            "web_search": "0",
            "internal_reasoning": "0",
        },
        "top_provider": {"context_length": 128000, "max_completion_tokens": 16384},
        "supported_parameters": ["max_tokens", "temperature", "response_format"],
    }


def hold_decision_responder(delay: float = 0.0) -> Responder:
    """Default responder for benchmarks: after `delay` s, a valid HOLD decision for the model
    the request named (served model echoed, usage with cost)."""

    def respond(request: RecordedRequest) -> FakeResponse:
        body = request.json if isinstance(request.json, dict) else {}
        content = json.dumps({"action": "HOLD", "bets": [], "sells": [], "reasoning": "bench"})
        return success(content, delay=delay, model=str(body.get("model") or DEFAULT_MODEL))

    return respond
