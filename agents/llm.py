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

Time: one `chat()` call is one phase of a decision. Besides each attempt's own timeout, a phase
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
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import requests
import urllib3

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
    declared_charset,
    error_message,
    fail_context,
    one_line,
    quota_reset,
    read_choice,
    read_metadata,
)
from agents.context_errors import context_refusal
from core import clock
from core.http import parse_retry_after

log = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "forecasting-arena/0.1 (paper trading research)"
APP_URL = "https://github.com/forecasting-arena"
APP_TITLE = "Forecasting Arena"

# Raw responses are stored for the audit; above this a body is kept truncated (and cannot parse).
MAX_RAW_BYTES = 2_000_000
RETRYABLE_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
# A helper endpoint's body (the models catalog) is read up to this, and refused above it.
MAX_HELPER_BYTES = 20_000_000
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
        session: requests.Session | None = None,
        phase_seconds: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        # None: a phase is bounded by its attempts' timeouts and backoffs only.
        self.phase_seconds = phase_seconds
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.session = session or requests.Session()
        self.sleep: Callable[[float], Any] = time.sleep
        self.random = random.Random()
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
        start = time.monotonic()
        try:
            response = self.session.get(
                f"{self.base_url}{path}",
                params=query,
                headers=self.headers,
                timeout=self.timeout,
                stream=True,
            )
            try:
                text, truncated = self._read_helper_body(response, start, max_bytes)
            finally:
                response.close()
        except requests.RequestException as exc:
            raise LLMError(one_line(f"GET {path} failed: {exc}")) from exc
        if truncated:
            raise LLMError(f"GET {path}: response body larger than {max_bytes} bytes")
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code != 200:
            detail = error_message(text) or text[:200]
            raise LLMError(one_line(f"GET {path}: HTTP {response.status_code}: {detail}"))
        try:
            payload = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise LLMError(f"GET {path}: response is not JSON") from exc
        if not isinstance(payload, dict):
            raise LLMError(f"GET {path}: response JSON is not an object")
        return payload

    def _read_helper_body(
        self, response: requests.Response, start: float, max_bytes: int
    ) -> tuple[str, bool]:
        """The body, capped at `max_bytes` before anything parses it, within the timeout counted
        from the request: each read returns what has arrived (read1), so a peer trickling a byte
        at a time is cut off at the deadline instead of holding a fixed-size read open."""
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            if time.monotonic() - start > self.timeout:
                raise requests.Timeout(f"response body not received within {self.timeout:g}s")
            try:
                chunk = response.raw.read1(65536, decode_content=True)
            except (urllib3.exceptions.HTTPError, OSError) as exc:  # urllib3's, not requests'
                raise requests.ConnectionError(str(exc)) from exc
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
        encoding = declared_charset(response) or "utf-8"
        try:
            text = data[:max_bytes].decode(encoding, errors="replace")
        except LookupError:
            text = data[:max_bytes].decode("utf-8", errors="replace")
        return text, size > max_bytes

    # --- chat -------------------------------------------------------------------------------

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
        """The longest one chat() call can take: with a phase total, twice that (an attempt stops
        at the phase's end, but a body trickling in can hold one socket read, up to the attempt's
        timeout, past it); without one, every attempt timing out with the longest backoff."""
        if self.phase_seconds is not None:
            return 2 * self.phase_seconds
        attempts = self.max_retries + 1
        return attempts * self.timeout + self.max_retries * self.max_backoff

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
            url=url,
            request_body=copy.deepcopy(body),
            started_at=clock.now(),
        )
        start = time.monotonic()
        try:
            response = self.session.post(
                url, json=body, headers=self.headers, timeout=timeout, stream=True
            )
            try:
                raw, truncated = self._read_capped(response, start, timeout)
            finally:
                response.close()
        except requests.Timeout as exc:
            attempt.fail(TIMEOUT, f"timed out after {timeout:g}s: {exc}", True)
        except requests.ConnectionError as exc:
            # requests reports a read timeout while streaming the body as a ConnectionError.
            kind = TIMEOUT if "timed out" in str(exc).lower() else CONNECTION
            attempt.fail(kind, f"{kind} error: {exc}", True)
        except requests.RequestException as exc:
            attempt.fail(CONNECTION, f"request failed: {exc}", True)
        else:
            attempt.http_status = response.status_code
            attempt.raw_response = raw
            attempt.generation_id = response.headers.get("X-Generation-Id", "")
            attempt.retry_after = parse_retry_after(response.headers.get("Retry-After"))
            attempt.quota_reset = quota_reset(response.headers)
            if truncated:
                attempt.fail(MALFORMED, f"response body larger than {MAX_RAW_BYTES} bytes", False)
            else:
                self._read_body(attempt, raw, prices)
        attempt.latency_ms = int((time.monotonic() - start) * 1000)
        return attempt

    def _read_capped(
        self, response: requests.Response, start: float, timeout: float | None = None
    ) -> tuple[str, bool]:
        """Read at most MAX_RAW_BYTES (+1 to detect overflow) within the overall timeout."""
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_content(chunk_size=65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RAW_BYTES:
                break
            # requests' timeout is per socket read; a server trickling bytes must not hold us.
            if time.monotonic() - start > (self.timeout if timeout is None else timeout):
                raise requests.Timeout("response body not received within the timeout")
        data = b"".join(chunks)
        truncated = len(data) > MAX_RAW_BYTES
        # JSON is UTF-8 unless the server says otherwise; never let requests guess (slow, wrong).
        encoding = declared_charset(response) or "utf-8"
        try:
            text = data[:MAX_RAW_BYTES].decode(encoding, errors="replace")
        except LookupError:
            text = data[:MAX_RAW_BYTES].decode("utf-8", errors="replace")
        return text, truncated

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
