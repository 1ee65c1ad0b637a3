"""What a log line concerns (cohort, week, competitor, decision), carried with the work.

A service binds the fields once around a piece of work (`with bound(cohort=..., decision=...)`)
and every line logged inside it, by the service, the HTTP client, the parser or Celery, carries
them: the formatter (arena/logfmt.py) reads `current()`. A context variable, so the fields stay
with the thread or task that bound them and never leak into another worker thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_fields: ContextVar[dict[str, Any] | None] = ContextVar("arena_log_fields", default=None)


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Add `fields` (None values skipped) to every log line inside the block."""
    merged = {**(_fields.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _fields.set(merged)
    try:
        yield
    finally:
        _fields.reset(token)


def current() -> dict[str, Any]:
    return dict(_fields.get() or {})
