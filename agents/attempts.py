"""One HTTP attempt at a chat completion, as it happened (one LLMCall row), and how its body is
read. A response is untrusted input: a body nested 200,000 deep, a NUL byte, `prompt_tokens:
1e12` or a cost of twelve million dollars must still come back as an Attempt, or the audit trail
loses the call. Figures beyond what any real call reports are clamped (or dropped when negative)
with the reason in `Attempt.notes`; a body that cannot be read at all is a malformed attempt,
never an exception. The client that makes the attempts is agents/llm.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from agents.context_errors import ContextRefusal
from core import clock
from core.text import flat

MAX_ERROR_CHARS = 300

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
# A call's row before its answer is stored (cohorts/llm_calls.py): "sent" while the request may
# be out, "lost" once the run that sent it is gone without storing what came back.
SENT, LOST = "sent", "lost"
# Content-level failures: retried, but only a couple of times (see module docstring).
CONTENT_KINDS = frozenset({IN_BAND, EMPTY, MALFORMED})
# Words of a 429 about a spent quota rather than a momentary rate (OpenRouter: "Rate limit
# exceeded: free-models-per-day").
QUOTA_MARKERS = ("per-day", "per day", "daily", "quota")
MILLION = Decimal(1_000_000)
# No real call uses 100 million tokens or costs ten thousand dollars; a figure above is a bug or
# a lie, kept clamped so a decision's totals still fit their columns (with room for retries).
MAX_TOKEN_COUNT = 100_000_000
MAX_CALL_COST = Decimal(10_000)


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
    notes: list[str] = field(default_factory=list)  # figures clamped or dropped, and why
    n_ctx: int | None = None  # the server's context size, when it refused a prompt as too long

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def fail(self, kind: str, message: str, retryable: bool) -> None:
        self.error_kind = kind
        self.error = one_line(message)
        self.retryable = retryable


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    # Provider messages are untrusted: control and bidi characters go with the line breaks.
    line = flat(str(text))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def read_metadata(
    attempt: Attempt, payload: dict, prices: tuple[Decimal | None, Decimal | None]
) -> None:
    if isinstance(payload.get("model"), str):
        attempt.served_model = payload["model"]
    if isinstance(payload.get("id"), str) and payload["id"]:
        attempt.generation_id = payload["id"]
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    attempt.prompt_tokens = _count(usage.get("prompt_tokens"), "prompt_tokens", attempt)
    attempt.completion_tokens = _count(usage.get("completion_tokens"), "completion_tokens", attempt)
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        attempt.reasoning_tokens = _count(
            details.get("reasoning_tokens"), "reasoning_tokens", attempt
        )
    cost, attempt.cost_source = _cost(usage, attempt, prices)
    attempt.cost_usd = _bounded_cost(cost, attempt)


def _count(value: Any, name: str, attempt: Attempt) -> int | None:
    """A token count as reported, clamped to MAX_TOKEN_COUNT; None (with a note) when it is
    negative or not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # absent, or not a number: nothing usable was reported
    count = _int_or_none(value)
    if count is None:
        attempt.notes.append(f"{name} {_shown(value)} is not a finite count; not kept")
        return None
    if count < 0:
        attempt.notes.append(f"{name} {count} is negative; not kept")
        return None
    if count > MAX_TOKEN_COUNT:
        attempt.notes.append(f"{name} {_shown(value)} clamped to {MAX_TOKEN_COUNT}")
        return MAX_TOKEN_COUNT
    return count


def _bounded_cost(cost: Decimal | None, attempt: Attempt) -> Decimal | None:
    if cost is None:
        return None
    if cost < 0:
        attempt.notes.append(f"cost {_shown(cost)} is negative; not kept")
        return None
    if cost > MAX_CALL_COST:
        attempt.notes.append(f"cost {_shown(cost)} clamped to {MAX_CALL_COST}")
        return MAX_CALL_COST
    return cost


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _cost(
    usage: dict, attempt: Attempt, prices: tuple[Decimal | None, Decimal | None]
) -> tuple[Decimal | None, str | None]:
    reported = decimal_or_none(usage.get("cost"))
    if reported is not None:
        return reported, "usage"
    price_in, price_out = prices
    if price_in is None or price_out is None:
        return None, None
    if attempt.prompt_tokens is None or attempt.completion_tokens is None:
        return None, None
    cost = (attempt.prompt_tokens * price_in + attempt.completion_tokens * price_out) / MILLION
    return cost, "price_table"


def read_choice(attempt: Attempt, choice: dict) -> None:
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


def fail_context(attempt: Attempt, refusal: ContextRefusal, message: str) -> None:
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


def error_message(raw: str) -> str:
    """The message of an OpenRouter/OpenAI error body, or "" when the body is not one."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
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
    except (ValueError, RecursionError):
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


def quota_reset(headers) -> float | None:
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


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return int(value)
    except (OverflowError, ValueError):
        return None


def decimal_or_none(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        return None
    return result if result.is_finite() else None
