"""An LLM call's fields, named once: the row stored from an agents `Attempt`, and the dict that
the sealed decision record and the decision API publish.

The sealed record (docs/verification.md) and /api/decisions/<id> show the same fields and differ
only in the forms of times and money, which each caller passes: the seal has its fixed forms
(cohorts/seal_canonical.py), the API ISO 8601 times and 6-10 place dollars. The seal adds the
row's id, which the API leaves out (it lists the calls of one decision by attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Max

from agents.llm import Attempt
from cohorts.models import Decision, LLMCall

# The published fields, in the order the API lists them.
FIELDS = (
    "attempt",
    "phase",
    "url",
    "request",
    "raw_response",
    "http_status",
    "error",
    "error_kind",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cost_usd",
    "cost_source",
    "latency_ms",
    "served_model",
    "generation_id",
    "finish_reason",
    "started_at",
)
# As stored: providers bill below a millionth of a dollar.
COST_PLACES = Decimal("0.0000000001")

TimeForm = Callable[[datetime | None], str | None]
MoneyForm = Callable[[Decimal | None], str | None]


def call_dict(
    call: LLMCall | Mapping[str, Any], *, time: TimeForm, money: MoneyForm
) -> dict[str, Any]:
    """The published fields of one call (a row, or its `.values()` dict), times and money put
    into the caller's forms."""
    if isinstance(call, LLMCall):
        out = {name: getattr(call, name) for name in FIELDS}
    else:
        out = {name: call[name] for name in FIELDS}
    out["cost_usd"] = money(out["cost_usd"])
    out["started_at"] = time(out["started_at"])
    return out


def stored_cost(value: Decimal | None) -> Decimal | None:
    """A cost as the money columns store it (10 places)."""
    return None if value is None else Decimal(value).quantize(COST_PLACES)


def store_calls(decision: Decision, attempts: list[Attempt], phase: str) -> None:
    """One LLMCall per HTTP attempt, numbered after any earlier ones (a reclaimed decision keeps
    the calls of the run it replaced: they happened and may have cost money)."""
    if not attempts:
        return
    start = LLMCall.objects.filter(decision=decision).aggregate(n=Max("attempt"))["n"] or 0
    LLMCall.objects.bulk_create(
        [call_row(decision, a, start + i, phase) for i, a in enumerate(attempts, 1)]
    )


def call_row(decision: Decision, attempt: Attempt, number: int, phase: str) -> LLMCall:
    """The unsaved row of one HTTP attempt, numbered `number` among the decision's calls; text
    cut to its column."""
    return LLMCall(
        decision=decision,
        attempt=number,
        phase=phase,
        url=attempt.url[:300],
        request=attempt.request_body,
        raw_response=attempt.raw_response,
        http_status=attempt.http_status,
        error=attempt.error,
        error_kind=attempt.error_kind or "",
        prompt_tokens=attempt.prompt_tokens,
        completion_tokens=attempt.completion_tokens,
        reasoning_tokens=attempt.reasoning_tokens,
        cost_usd=stored_cost(attempt.cost_usd),
        cost_source=attempt.cost_source or "",
        latency_ms=attempt.latency_ms,
        served_model=attempt.served_model[:200],
        generation_id=attempt.generation_id[:200],
        finish_reason=attempt.finish_reason[:40],
        started_at=attempt.started_at,
    )
