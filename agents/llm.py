"""A client for OpenAI-compatible chat completions (OpenRouter, vLLM, Ollama, llama.cpp server...).

One `LLMClient.chat()` call makes one or more HTTP attempts and returns a `ChatResult` that keeps
every attempt (`Attempt`) for the audit trail: the decision service stores one LLMCall row per
attempt, so nothing a model was asked or answered is ever lost, including failures.

Failure handling, and why:
- Timeouts, connection errors, 408, 429 and 5xx are transient: retried with exponential backoff
  and jitter, or after the server's `Retry-After` (seconds or an HTTP date), capped at
  `max_backoff` so one slow provider cannot stall a weekly decision run.
- Except a 429 that says the quota is spent until later than `max_backoff` (OpenRouter's
  daily free-model quota: `X-RateLimit-Remaining: 0` with a reset hours away, or a message
  about a per-day limit): retrying within the run cannot succeed, so one attempt.
- 400/401/402/403/404 (and other 4xx) are the caller's problem (bad model id, key, credits,
  moderation): retrying only burns time and, for 402, money. One attempt.
- OpenRouter reports errors that happen after generation started as HTTP 200 with
  `choices[0].error` / `finish_reason: "error"`; some providers return 200 with empty content or
  a body that is not JSON. Those are failed attempts too, retried at most `max_content_retries`
  times because a repeat often succeeds but a broken model never will.
- `finish_reason: "length"` means the answer ran out of room (max_tokens, or the context filled
  up); the same request would be cut off again, so it is reported, not retried: the decision
  service repairs it with a shorter request or holds with the reason.
- A prompt over the server's context is refused at once (llama.cpp: HTTP 400
  `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`; OpenAI-style servers:
  `context_length_exceeded`). It is its own kind, `context_full`, never retried as sent; the
  tokens the server counted are kept on the attempt and its context size (`n_ctx`) is reported so
  the caller can fit the prompt and ask again.

Time: one `chat()` call is one phase of a decision. Each attempt's timeout is a total for the
whole exchange, whatever pace the server answers at (core.http.fetch: a body trickled one byte at
a time stops at the deadline, not minutes later). Besides each attempt's own timeout, a phase
has a total (`phase_seconds`): no attempt starts, and no backoff sleeps, past it, so retries can
never stretch a phase beyond what the caller budgeted (the decision service keeps all its phases
under the claim timeout). A slow local server with a long timeout thus gets one attempt, not
three more queued behind the one it is still computing.

Cost: `usage.cost` (OpenRouter, USD) when present, else tokens x price per million when the
caller passes prices, else unknown (None). Money is Decimal.

A response is untrusted input: a body nested 200,000 deep, a NUL byte, `prompt_tokens: 1e12`
or a cost of twelve million dollars must still come back as an Attempt, or the audit trail
loses the call. Figures beyond what any real call reports are clamped (or dropped when
negative) and the reason is kept in `Attempt.notes`; a body that cannot be read at all is a
malformed attempt, never an exception.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agents.attempts import (
    CONNECTION,
    CONTENT_KINDS,
    HTTP,
    IN_BAND,
    MALFORMED,
    MILLION,
    QUOTA_MARKERS,
    TIMEOUT,
    Attempt,
    decimal_or_none,
    error_message,
    fail_context,
    one_line,
    quota_reset,
    read_choice,
    read_metadata,
)
from agents.context_errors import context_refusal
from agents.simulated import SIMULATED_LATENCY_FIELD
from core import clock
from core.http import HttpConnectionError, HttpError, HttpTimeout, fetch, parse_retry_after

log = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "forecasting-arena/0.1 (paper trading research)"
APP_URL = "https://github.com/forecasting-arena"
APP_TITLE = "Forecasting Arena"

# Raw responses are stored for the audit; above this a body is kept truncated (and cannot parse).
MAX_RAW_BYTES = 2_000_000
# The models list and generation lookups: OpenRouter's full list is a few megabytes.
MAX_HELPER_BYTES = 20_000_000
RETRYABLE_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
# How late a total deadline may be noticed (thread wake-up, closing the socket): seconds.
DEADLINE_SLACK = 0.5
# An attempt needs at least this much of its phase left to be worth starting.
MIN_ATTEMPT_SECONDS = 1.0


class LLMError(Exception):
    """A helper call (models list, generation lookup) failed; the message is one line."""


@dataclass
class ChatResult:
    ok: bool
    content: str | None
    error: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def cost_usd(self) -> Decimal | None:
        """Total known cost over all attempts (failed attempts can be billed too)."""
        costs = [a.cost_usd for a in self.attempts if a.cost_usd is not None]
        return sum(costs, Decimal(0)) if costs else None


def default_user_agent() -> str:
    # Django is optional here: the client also runs from plain scripts (bench/).
    from django.conf import settings

    if settings.configured:
        return getattr(settings, "ARENA_USER_AGENT", DEFAULT_USER_AGENT) or DEFAULT_USER_AGENT
    return DEFAULT_USER_AGENT


class LLMClient:
    """Chat completions with retries; see the module docstring for the failure policy.

    `sleep` and `random` are plain attributes so tests (and benchmarks) can inject a recorder
    or a seeded generator; the defaults really sleep.
    """

    max_content_retries = 2

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: float,
        max_retries: int = 3,
        backoff_base: float = 1.0,
        max_backoff: float = 30.0,
        phase_seconds: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        # None: a phase is bounded by its attempts' timeouts and backoffs only.
        self.phase_seconds = phase_seconds
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.sleep: Callable[[float], Any] = time.sleep
        self.random = random.Random()
        # Called with (url, body) just before each chat request leaves, so its caller can put
        # the request on the record first (cohorts/llm_calls.py); returns headers to add (the
        # request's idempotency key).
        self.before_send: Callable[[str, dict], Mapping[str, str]] | None = None
        # A simulated competitor's client: the latency recorded is what the simulated endpoint
        # states its model took, and calls are recorded under `record_base` when one is set
        # (agents/simulated.py): a simulation's records never depend on the machine's timing.
        self.states_latency = False
        self.record_base: str | None = None
        self.headers = {
            "Content-Type": "application/json",
            "User-Agent": default_user_agent(),
            "HTTP-Referer": APP_URL,
            # Older OpenRouter docs use X-Title, current ones X-OpenRouter-Title; both are harmless.
            "X-Title": APP_TITLE,
            "X-OpenRouter-Title": APP_TITLE,
        }
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    # --- helper endpoints ---------------------------------------------------------------

    def model_prices(self) -> dict[str, tuple[Decimal, Decimal]]:
        """`GET /models` as {model id: (USD per million prompt tokens, per million completion)}.

        OpenRouter gives prices as strings in USD per token; models without usable prices are
        skipped rather than priced at zero, so an unknown cost stays unknown.
        """
        payload = self._get_json("/models", {}) or {}  # None only for a missing_ok 404
        prices: dict[str, tuple[Decimal, Decimal]] = {}
        for model in payload.get("data") or []:
            if not isinstance(model, dict) or not isinstance(model.get("id"), str):
                continue
            pricing = model.get("pricing")
            if not isinstance(pricing, dict):
                pricing = {}
            prompt = decimal_or_none(pricing.get("prompt"))
            completion = decimal_or_none(pricing.get("completion"))
            if prompt is None or completion is None or prompt < 0 or completion < 0:
                continue
            prices[model["id"]] = (prompt * MILLION, completion * MILLION)
        return prices

    def model_catalog(self, max_bytes: int = MAX_HELPER_BYTES) -> list:
        """`GET /models`'s `data` list as sent (each entry still unchecked), read within the
        client's timeout in total and refused above `max_bytes`; LLMError otherwise."""
        payload = self._get_json("/models", {}, max_bytes=max_bytes) or {}
        data = payload.get("data")
        if not isinstance(data, list):
            raise LLMError("GET /models: no `data` list in the response")
        return data

    def generation(self, generation_id: str) -> dict | None:
        """`GET /generation?id=...` data, or None while OpenRouter has not recorded it (404).

        The endpoint is eventually consistent: a 404 right after a completion is normal, so the
        caller decides when to look again.
        """
        payload = self._get_json("/generation", {"id": generation_id}, missing_ok=True)
        data = payload.get("data") if payload else None
        return data if isinstance(data, dict) else None

    def _get_json(
        self, path: str, query: dict, missing_ok: bool = False, max_bytes: int = MAX_HELPER_BYTES
    ) -> dict | None:
        try:
            reply = fetch(
                "GET",
                f"{self.base_url}{path}",
                params=query,
                headers=self.headers,
                timeout=self.timeout,
                max_bytes=max_bytes,
            )
        except HttpError as exc:
            raise LLMError(one_line(f"GET {path} failed: {exc}")) from exc
        if reply.status == 404 and missing_ok:
            return None
        text = reply.text()
        if reply.status != 200:
            detail = error_message(text) or text[:200]
            raise LLMError(one_line(f"GET {path}: HTTP {reply.status}: {detail}"))
        try:
            payload = reply.json()
        except ValueError as exc:
            raise LLMError(f"GET {path}: response is not JSON") from exc
        if not isinstance(payload, dict):
            raise LLMError(f"GET {path}: response JSON is not an object")
        return payload

    def chat(
        self,
        model: str,
        messages: list[dict],
        params: dict | None = None,
        price_in_per_m: Decimal | None = None,
        price_out_per_m: Decimal | None = None,
    ) -> ChatResult:
        # model/messages win over params so a stray params key cannot change what is asked.
        body = {**(params or {}), "model": model, "messages": messages}
        prices = (price_in_per_m, price_out_per_m)
        attempts: list[Attempt] = []
        content_retries = 0
        phase_start = time.monotonic()
        while True:
            timeout = self._attempt_timeout(phase_start)
            attempt = self._attempt(len(attempts) + 1, body, prices, timeout)
            attempts.append(attempt)
            if attempt.ok:
                return ChatResult(True, attempt.content, "", attempts)
            retries_used = len(attempts) - 1
            if attempt.error_kind in CONTENT_KINDS:
                content_retries += 1
                may_retry = content_retries <= self.max_content_retries
            else:
                may_retry = True
            if not (attempt.retryable and may_retry and retries_used < self.max_retries):
                return ChatResult(False, None, attempt.error, attempts)
            delay = self._delay(attempt, retries_used + 1)
            if self._left(phase_start) - delay < MIN_ATTEMPT_SECONDS:
                note = f" (no retry: the phase's {self.phase_seconds:g}s are spent)"
                return ChatResult(False, None, one_line(attempt.error + note), attempts)
            self.sleep(delay)

    def worst_case_seconds(self) -> float:
        """The longest one chat() call can take. Each attempt's deadline is total and holds on
        the wire (core.http.fetch), and no attempt or backoff starts past the phase's end, so
        with a phase total that is the bound; without one, every attempt timing out with the
        longest backoff. The watchdog that enforces a deadline may fire a moment late, hence
        DEADLINE_SLACK."""
        if self.phase_seconds is not None:
            return self.phase_seconds + DEADLINE_SLACK
        attempts = self.max_retries + 1
        return attempts * (self.timeout + DEADLINE_SLACK) + self.max_retries * self.max_backoff

    def _left(self, phase_start: float) -> float:
        if self.phase_seconds is None:
            return float("inf")
        return self.phase_seconds - (time.monotonic() - phase_start)

    def _attempt_timeout(self, phase_start: float) -> float:
        return max(0.001, min(self.timeout, self._left(phase_start)))

    def _delay(self, attempt: Attempt, retry_number: int) -> float:
        if attempt.retry_after is not None:
            return min(attempt.retry_after, self.max_backoff)
        ceiling = min(self.max_backoff, self.backoff_base * 2 ** (retry_number - 1))
        # "Equal jitter": at least half the backoff, so retries stay spaced, plus a random half
        # so many workers hitting one rate limit do not retry in lockstep.
        return ceiling / 2 + self.random.uniform(0, ceiling / 2)

    def _attempt(
        self,
        number: int,
        body: dict,
        prices: tuple[Decimal | None, Decimal | None],
        timeout: float | None = None,
    ) -> Attempt:
        timeout = self.timeout if timeout is None else timeout
        url = f"{self.base_url}/chat/completions"
        attempt = Attempt(
            number=number,
            url=f"{self.record_base}/chat/completions" if self.record_base else url,
            request_body=copy.deepcopy(body),
            started_at=clock.now(),
        )
        headers = self.headers
        if self.before_send is not None:
            headers = {**headers, **self.before_send(attempt.url, body)}  # the URL as recorded
        start = time.monotonic()
        try:
            reply = fetch(
                "POST",
                url,
                json_body=body,
                headers=headers,
                timeout=timeout,
                max_bytes=MAX_RAW_BYTES,
                truncate=True,
            )
        except HttpTimeout as exc:
            attempt.fail(TIMEOUT, f"timed out after {timeout:g}s: {exc}", True)
        except HttpConnectionError as exc:
            attempt.fail(CONNECTION, f"{CONNECTION} error: {exc}", True)
        except HttpError as exc:
            attempt.fail(CONNECTION, f"request failed: {exc}", True)
        else:
            attempt.http_status = reply.status
            attempt.raw_response = reply.text()
            attempt.generation_id = reply.headers.get("X-Generation-Id", "")
            attempt.retry_after = parse_retry_after(reply.headers.get("Retry-After"))
            attempt.quota_reset = quota_reset(reply.headers)
            if reply.truncated:
                attempt.fail(MALFORMED, f"response body larger than {MAX_RAW_BYTES} bytes", False)
            else:
                self._read_body(attempt, attempt.raw_response, prices)
        attempt.latency_ms = int((time.monotonic() - start) * 1000)
        if self.states_latency:
            attempt.latency_ms = _stated_latency(attempt.raw_response, attempt.latency_ms)
        return attempt

    def _read_body(
        self, attempt: Attempt, raw: str, prices: tuple[Decimal | None, Decimal | None]
    ) -> None:
        try:
            if attempt.http_status != 200:
                self._read_http_error(attempt, raw)
            else:
                self._read_success(attempt, raw, prices)
        except Exception as exc:  # noqa: BLE001 - whatever the body holds, the attempt is kept
            log.exception("unreadable chat response from %s", attempt.url)
            attempt.fail(MALFORMED, f"response could not be read: {type(exc).__name__}", True)

    def _read_http_error(self, attempt: Attempt, raw: str) -> None:
        status = attempt.http_status or 0
        message = error_message(raw) or raw.strip()[:200] or "(empty body)"
        if status in (400, 413) and (refusal := context_refusal(raw, message)) is not None:
            fail_context(attempt, refusal, message)
            return
        if status == 429 and self._quota_spent(attempt, message):
            wait = attempt.quota_reset or attempt.retry_after
            when = f"; it refills in about {wait / 3600:.1f} h" if wait else ""
            attempt.fail(HTTP, f"HTTP 429: quota exhausted, not retried{when}: {message}", False)
            return
        attempt.fail(HTTP, f"HTTP {status}: {message}", status in RETRYABLE_STATUSES)

    def _quota_spent(self, attempt: Attempt, message: str) -> bool:
        """A 429 that no wait within this run can cure (see the module docstring)."""
        waits = [w for w in (attempt.quota_reset, attempt.retry_after) if w is not None]
        if waits:  # the server said when: believe it
            return max(waits) > self.max_backoff
        text = message.lower()
        return any(marker in text for marker in QUOTA_MARKERS)

    def _read_success(
        self, attempt: Attempt, raw: str, prices: tuple[Decimal | None, Decimal | None]
    ) -> None:
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            attempt.fail(MALFORMED, f"response is not JSON: {exc}", True)
            return
        except RecursionError:
            attempt.fail(MALFORMED, "response is not JSON: nested too deeply to read", True)
            return
        if not isinstance(payload, dict):
            attempt.fail(MALFORMED, "response JSON is not an object", True)
            return
        read_metadata(attempt, payload, prices)
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            message = error_message(raw)
            if message:  # some servers answer 200 with an error object and no choices
                attempt.fail(IN_BAND, f"error in a 200 response: {message}", True)
            else:
                attempt.fail(MALFORMED, "response has no choices", True)
            return
        read_choice(attempt, choices[0])


def _stated_latency(raw: str, measured: int) -> int:
    """The latency a simulated endpoint states in its answer, else the measured one."""
    try:
        stated = json.loads(raw).get(SIMULATED_LATENCY_FIELD)
    except (ValueError, TypeError, AttributeError):
        return measured
    return stated if isinstance(stated, int) and stated >= 0 else measured
