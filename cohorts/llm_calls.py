"""An LLM call's fields, named once: the row stored from an agents `Attempt`, and the dict that
the sealed decision record and the decision API publish.

The sealed record (docs/verification.md) and /api/decisions/<id> show the same fields and differ
only in the forms of times and money, which each caller passes: the seal has its fixed forms
(cohorts/seals/canonical.py), the API ISO 8601 times and 6-10 place dollars. The seal adds the
row's id, which the API leaves out (it lists the calls of one decision by attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Max, Sum

from agents.attempts import Attempt
from cohorts.models import Decision, LLMCall
from core.text import has_unstorable, storable, storable_json

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
# The columns' ranges (PositiveIntegerField; DecimalField(16, 10)). The client already clamps
# what a server reports far below these; this guards every other source of an Attempt and the
# sums over a decision's attempts.
MAX_COUNT = 2_147_483_647
MAX_COST = Decimal("999999.9999999999")

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
    cut to its column, NUL bytes and lone surrogates (which no database column takes) replaced
    by U+FFFD, figures out of their column's range clamped, and every change said in `error`."""
    notes = list(attempt.notes)
    raw = attempt.raw_response
    if has_unstorable(raw):
        raw = storable(raw)
        notes.append("NUL bytes or lone surrogates in the raw response stored as U+FFFD")
    return LLMCall(
        decision=decision,
        attempt=number,
        phase=phase,
        url=storable(attempt.url[:300]),
        request=storable_json(attempt.request_body),
        raw_response=raw,
        http_status=attempt.http_status,
        error="; ".join(storable(t) for t in [attempt.error, *notes] if t),
        error_kind=attempt.error_kind or "",
        prompt_tokens=_count(attempt.prompt_tokens),
        completion_tokens=_count(attempt.completion_tokens),
        reasoning_tokens=_count(attempt.reasoning_tokens),
        cost_usd=stored_cost(_cost(attempt.cost_usd)),
        cost_source=attempt.cost_source or "",
        latency_ms=min(max(attempt.latency_ms, 0), MAX_COUNT),
        served_model=storable(attempt.served_model[:200]),
        generation_id=storable(attempt.generation_id[:200]),
        finish_reason=storable(attempt.finish_reason[:40]),
        started_at=attempt.started_at,
    )


def call_totals(decision: Decision) -> dict[str, Any]:
    """A decision's tokens, cost and latency over every call it made, each within its column:
    the calls of earlier rounds lost to a provider outage and of a run its reclaim replaced
    count too (they happened and may have cost money). Read from the stored rows, which hold
    every call (store_calls), so the totals and the audit page's list of calls always agree."""
    sums = LLMCall.objects.filter(decision=decision).aggregate(
        tokens_in=Sum("prompt_tokens", default=0),
        tokens_out=Sum("completion_tokens", default=0),
        cost_usd=Sum("cost_usd", default=Decimal(0)),
        latency_ms=Sum("latency_ms", default=0),
    )
    return {
        "tokens_in": min(sums["tokens_in"], MAX_COUNT),
        "tokens_out": min(sums["tokens_out"], MAX_COUNT),
        "cost_usd": stored_cost(min(max(Decimal(sums["cost_usd"]), -MAX_COST), MAX_COST)),
        "latency_ms": min(sums["latency_ms"], MAX_COUNT),
    }


def _count(value: int | None) -> int | None:
    if value is None or value < 0:
        return None
    return min(value, MAX_COUNT)


def _cost(value: Decimal | None) -> Decimal | None:
    if value is None or not Decimal(value).is_finite():
        return None
    return max(min(Decimal(value), MAX_COST), -MAX_COST)
