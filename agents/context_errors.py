"""Recognising a prompt refused for not fitting the server's context, and what it counted.

llama.cpp answers HTTP 400 `{"error": {"type": "exceed_context_size_error", "n_prompt_tokens":
25978, "n_ctx": 8192, ...}}`; OpenAI-style servers say `context_length_exceeded` and put the
numbers in the message ("maximum context length is 8192 tokens ... you requested 9000 tokens").
Both become one `context_full` kind on the attempt (agents/llm.py), so the decision service can
fit the prompt to the size named and ask again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_CONTEXT_WORDS = re.compile(
    r"context (?:size|length|window)|exceeds? the (?:available )?context", re.IGNORECASE
)
_CONTEXT_LIMIT = re.compile(
    r"(?:maximum context length is|context size|context length of|context window of)\D{0,20}"
    r"(\d{2,9})",
    re.IGNORECASE,
)
_REQUESTED = re.compile(r"(?:request|requested|resulted in|prompt has)\D{0,12}(\d{1,9}) tokens")


@dataclass(frozen=True)
class ContextRefusal:
    n_prompt_tokens: int | None
    n_ctx: int | None


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def context_refusal(raw: str, message: str) -> ContextRefusal | None:
    """The refusal in an error body (`raw`, with its one-line `message`), or None if the error
    is about something else."""
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    error = error if isinstance(error, dict) else {}
    kind = f"{error.get('type') or ''} {error.get('code') or ''}"
    n_ctx = _count(error.get("n_ctx"))
    n_prompt = _count(error.get("n_prompt_tokens"))
    if not ("context" in kind or n_ctx is not None or _CONTEXT_WORDS.search(message)):
        return None
    if n_ctx is None and (found := _CONTEXT_LIMIT.search(message)):
        n_ctx = int(found.group(1))
    if n_prompt is None and (found := _REQUESTED.search(message)):
        n_prompt = int(found.group(1))
    return ContextRefusal(n_prompt, n_ctx if n_ctx else None)
