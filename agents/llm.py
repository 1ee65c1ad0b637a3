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
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import requests

from agents.context_errors import ContextRefusal, context_refusal
from core import clock
from core.http import parse_retry_after

DEFAULT_USER_AGENT = "forecasting-arena/0.1 (paper trading research)"
APP_URL = "https://github.com/forecasting-arena"
APP_TITLE = "Forecasting Arena"

# Raw responses are stored for the audit; above this a body is kept truncated (and cannot parse).
MAX_RAW_BYTES = 2_000_000
MAX_ERROR_CHARS = 300
RETRYABLE_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
# Error kinds, as stored on LLMCall rows.
TIMEOUT, CONNECTION, HTTP, IN_BAND, EMPTY, LENGTH, MALFORMED, CONTEXT = (
    "timeout",
    "connection",
    "http",
    "in_band",
    "empty",
    "length",
    "malformed",
    "context_full",
)
# Content-level failures: retried, but only a couple of times (see module docstring).
CONTENT_KINDS = frozenset({IN_BAND, EMPTY, MALFORMED})
# Words of a 429 about a spent quota rather than a momentary rate (OpenRouter: "Rate limit
# exceeded: free-models-per-day").
QUOTA_MARKERS = ("per-day", "per day", "daily", "quota")
MILLION = Decimal(1_000_000)
# An attempt needs at least this much of its phase left to be worth starting.
MIN_ATTEMPT_SECONDS = 1.0


class LLMError(Exception):
    """A helper call (models list, generation lookup) failed; the message is one line."""


@dataclass
class Attempt:
    """One HTTP attempt, exactly as it happened (one LLMCall row)."""

    number: int
    url: str
    request_body: dict
    started_at: datetime
    http_status: int | None = None
    raw_response: str = ""
    content: str | None = None
    error: str = ""
    error_kind: str | None = None
    retryable: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: Decimal | None = None
    cost_source: str | None = None
    latency_ms: int = 0
    served_model: str = ""
    generation_id: str = ""
    finish_reason: str = ""
    retry_after: float | None = None
    quota_reset: float | None = None  # seconds until an exhausted rate-limit quota refills
    n_ctx: int | None = None  # the server's context size, when it refused a prompt as too long

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def fail(self, kind: str, message: str, retryable: bool) -> None:
        self.error_kind = kind
        self.error = one_line(message)
        self.retryable = retryable


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


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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
            prompt = _decimal_or_none(pricing.get("prompt"))
            completion = _decimal_or_none(pricing.get("completion"))
            if prompt is None or completion is None or prompt < 0 or completion < 0:
                continue
            prices[model["id"]] = (prompt * MILLION, completion * MILLION)
        return prices

    def generation(self, generation_id: str) -> dict | None:
        """`GET /generation?id=...` data, or None while OpenRouter has not recorded it (404).

        The endpoint is eventually consistent: a 404 right after a completion is normal, so the
        caller decides when to look again.
        """
        payload = self._get_json("/generation", {"id": generation_id}, missing_ok=True)
        data = payload.get("data") if payload else None
        return data if isinstance(data, dict) else None

    def _get_json(self, path: str, query: dict, missing_ok: bool = False) -> dict | None:
        try:
            response = self.session.get(
                f"{self.base_url}{path}", params=query, headers=self.headers, timeout=self.timeout
            )
        except requests.RequestException as exc:
            raise LLMError(one_line(f"GET {path} failed: {exc}")) from exc
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code != 200:
            detail = _error_message(response.text) or response.text[:200]
            raise LLMError(one_line(f"GET {path}: HTTP {response.status_code}: {detail}"))
        try:
            payload = response.json()
        except ValueError as exc:
            raise LLMError(f"GET {path}: response is not JSON") from exc
        if not isinstance(payload, dict):
            raise LLMError(f"GET {path}: response JSON is not an object")
        return payload

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
            attempt.quota_reset = _quota_reset(response.headers)
            if truncated:
                attempt.fail(MALFORMED, f"response body larger than {MAX_RAW_BYTES} bytes", False)
            elif response.status_code != 200:
                self._read_http_error(attempt, raw)
            else:
                self._read_success(attempt, raw, prices)
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
        encoding = _declared_charset(response) or "utf-8"
        try:
            text = data[:MAX_RAW_BYTES].decode(encoding, errors="replace")
        except LookupError:
            text = data[:MAX_RAW_BYTES].decode("utf-8", errors="replace")
        return text, truncated

    def _read_http_error(self, attempt: Attempt, raw: str) -> None:
        status = attempt.http_status or 0
        message = _error_message(raw) or raw.strip()[:200] or "(empty body)"
        if status in (400, 413) and (refusal := context_refusal(raw, message)) is not None:
            _fail_context(attempt, refusal, message)
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
        if not isinstance(payload, dict):
            attempt.fail(MALFORMED, "response JSON is not an object", True)
            return
        _read_metadata(attempt, payload, prices)
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            message = _error_message(raw)
            if message:  # some servers answer 200 with an error object and no choices
                attempt.fail(IN_BAND, f"error in a 200 response: {message}", True)
            else:
                attempt.fail(MALFORMED, "response has no choices", True)
            return
        _read_choice(attempt, choices[0])


def _read_metadata(
    attempt: Attempt, payload: dict, prices: tuple[Decimal | None, Decimal | None]
) -> None:
    if isinstance(payload.get("model"), str):
        attempt.served_model = payload["model"]
    if isinstance(payload.get("id"), str) and payload["id"]:
        attempt.generation_id = payload["id"]
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    attempt.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
    attempt.completion_tokens = _int_or_none(usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        attempt.reasoning_tokens = _int_or_none(details.get("reasoning_tokens"))
    attempt.cost_usd, attempt.cost_source = _cost(usage, attempt, prices)


def _cost(
    usage: dict, attempt: Attempt, prices: tuple[Decimal | None, Decimal | None]
) -> tuple[Decimal | None, str | None]:
    reported = _decimal_or_none(usage.get("cost"))
    if reported is not None:
        return reported, "usage"
    price_in, price_out = prices
    if price_in is None or price_out is None:
        return None, None
    if attempt.prompt_tokens is None or attempt.completion_tokens is None:
        return None, None
    cost = (attempt.prompt_tokens * price_in + attempt.completion_tokens * price_out) / MILLION
    return cost, "price_table"


def _read_choice(attempt: Attempt, choice: dict) -> None:
    finish = choice.get("finish_reason")
    attempt.finish_reason = finish if isinstance(finish, str) else ""
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    attempt.content = _content_text(message.get("content"))
    error = choice.get("error")
    if error or attempt.finish_reason == "error":
        detail = _describe_error(error) if error else "finish_reason is 'error'"
        attempt.fail(IN_BAND, f"in-band error: {detail}", True)
    elif attempt.finish_reason == "length":
        attempt.fail(
            LENGTH,
            "answer truncated (finish_reason 'length'): it ran out of max_tokens or of the "
            f"context ({attempt.completion_tokens if attempt.completion_tokens is not None else '?'}"
            " tokens written)",
            False,
        )
    elif not (attempt.content or "").strip():
        attempt.fail(EMPTY, "empty content", True)


def _fail_context(attempt: Attempt, refusal: ContextRefusal, message: str) -> None:
    """A prompt refused for not fitting the context; what the server counted is kept."""
    attempt.n_ctx = refusal.n_ctx
    if refusal.n_prompt_tokens is not None:
        attempt.prompt_tokens = refusal.n_prompt_tokens
        attempt.completion_tokens = 0
    counted = (
        f"{refusal.n_prompt_tokens} tokens" if refusal.n_prompt_tokens is not None else "the prompt"
    )
    size = f"the {refusal.n_ctx}-token context" if refusal.n_ctx else "the server's context"
    attempt.fail(
        CONTEXT,
        f"context full: {counted} do not fit {size} (HTTP {attempt.http_status}): {message}",
        False,
    )


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": "..."}]
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def _error_message(raw: str) -> str:
    """The message of an OpenRouter/OpenAI error body, or "" when the body is not one."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return ""
    if isinstance(payload, dict) and payload.get("error"):
        return _describe_error(payload["error"])
    return ""


def _describe_error(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    message = str(error.get("message") or "(no message)")
    metadata = error.get("metadata")
    if isinstance(metadata, dict) and metadata.get("provider_name"):
        message += f" (provider {metadata['provider_name']})"
    if isinstance(metadata, dict) and metadata.get("raw"):
        # OpenRouter's "Provider returned error" says nothing; the provider's reason is here.
        raw = metadata["raw"]
        message += f": {_raw_reason(raw if isinstance(raw, str) else json.dumps(raw))}"
    code = error.get("code")
    return f"{message} [code {code}]" if code is not None else message


def _raw_reason(raw: str) -> str:
    """The provider's own message inside metadata.raw (often a JSON error body), else the text."""
    try:
        inner = json.loads(raw)
    except ValueError:
        return one_line(raw, 200)
    if isinstance(inner, dict):
        err = inner.get("error")
        if isinstance(err, dict) and err.get("message"):
            return one_line(str(err["message"]), 200)
        if isinstance(err, str):
            return one_line(err, 200)
        if inner.get("message"):
            return one_line(str(inner["message"]), 200)
    return one_line(raw, 200)


def _quota_reset(headers) -> float | None:
    """Seconds until a spent rate-limit quota refills (X-RateLimit-Remaining 0 with an
    X-RateLimit-Reset in epoch milliseconds or seconds), else None."""
    if headers.get("X-RateLimit-Remaining", "").strip() != "0":
        return None
    try:
        reset = float(headers.get("X-RateLimit-Reset", ""))
    except ValueError:
        return None
    if reset > 1e11:  # milliseconds, as OpenRouter sends
        reset /= 1000
    # The server's quota runs on real time, whatever clock the arena runs on.
    return max(0.0, reset - clock.wall().timestamp())


def _declared_charset(response: requests.Response) -> str | None:
    content_type = response.headers.get("Content-Type", "")
    for part in content_type.split(";")[1:]:
        key, _, val = part.strip().partition("=")
        if key.lower() == "charset" and val:
            return val.strip('"')
    return None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return int(value)
    except (OverflowError, ValueError):
        return None


def _decimal_or_none(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        return None
    return result if result.is_finite() else None
