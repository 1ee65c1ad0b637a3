"""An LLM call's fields, named once: the row stored from an agents `Attempt`, and the dict that
the sealed decision record and the decision API publish.

Every HTTP call a decision run makes is on the record even when its worker dies: the run's
`CallRecorder` writes and commits the call's row (`error_kind` "sent") before the request leaves
(through the client's `before_send` hook) and completes it once the client returns. A worker killed between
the two leaves a "sent" row; whoever takes the decision over marks it "lost" (`mark_lost`), so the
audit trail shows the call with what is known (sent at, endpoint, request) and its tokens and
cost count as unknown. Each request carries an `Idempotency-Key` derived from the decision, its
round, the phase and the attempt within it: the same request sent again by the run that takes
over carries the same key, so a provider that honours keys answers it without a second charge
(servers that do not know the header ignore it).

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

from django.db import IntegrityError, transaction
from django.db.models import Max, Sum

from agents.attempts import LOST, SENT, Attempt
from cohorts.models import Decision, LLMCall
from core import clock
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

LOST_MESSAGE = "lost: the worker stopped before the answer was stored"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Columns an answer fills in; the row's decision, number and phase are set when it is sent.
ANSWER_COLUMNS = tuple(
    name for name in FIELDS if name not in ("attempt", "phase")
)

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


class CallRecorder:
    """The rows of one decision run's model calls. `sent()` writes and commits a call's row
    before its request leaves; `complete()` fills in the phase's rows from the client's
    attempts, in one transaction; `abandon()` marks the phase's unanswered rows lost."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.phase = "initial"
        self.open: list[int] = []  # this phase's rows, in the order their requests were sent

    def start(self, phase: str) -> None:
        self.phase, self.open = phase, []

    def sent(self, url: str, body: Mapping[str, Any]) -> str:
        """Commit the row of a request about to leave; returns its idempotency key."""
        row = _insert_numbered(
            self.decision,
            phase=self.phase,
            url=storable(url[:300]),
            request=storable_json(dict(body)),
            error_kind=SENT,
            started_at=clock.now(),
        )
        self.open.append(row.pk)
        return (
            f"arena-{self.decision.pk}-r{self.decision.retry_rounds}-{self.phase}-{len(self.open)}"
        )

    def complete(self, attempts: list[Attempt]) -> None:
        """Fill the phase's rows from the attempts (one per request sent, in order); an attempt
        without a row (its request never went through the session) gets a row of its own."""
        with transaction.atomic():
            for pk, attempt in zip(self.open, attempts, strict=False):
                row = call_row(self.decision, attempt, 0, self.phase)
                LLMCall.objects.filter(pk=pk).update(
                    **{name: getattr(row, name) for name in ANSWER_COLUMNS}
                )
            extra = attempts[len(self.open) :]
            if extra:
                store_calls(self.decision, extra, self.phase)
            unanswered = self.open[len(attempts) :]
        self.open = []
        if unanswered:
            _lose(LLMCall.objects.filter(pk__in=unanswered), LOST_MESSAGE)

    def abandon(self, why: str) -> None:
        """The client raised: the phase's rows still without an answer are lost, with why."""
        _lose(LLMCall.objects.filter(pk__in=self.open, error_kind=SENT), f"{LOST_MESSAGE} ({why})")
        self.open = []


def before_send(recorder: CallRecorder) -> Callable[[str, dict], dict[str, str]]:
    """The model client's `before_send` hook for a decision: every chat request is on the
    record (`CallRecorder.sent`) before it leaves, and carries its idempotency key."""

    def hook(url: str, body: dict) -> dict[str, str]:
        return {IDEMPOTENCY_HEADER: recorder.sent(url, body if isinstance(body, Mapping) else {})}

    return hook


def mark_lost(decision: Decision | int) -> int:
    """The calls of a decision still "sent" (their run is gone): lost. Returns how many."""
    return _lose(LLMCall.objects.filter(decision=decision, error_kind=SENT), LOST_MESSAGE)


def _lose(rows: Any, message: str) -> int:
    return rows.filter(error_kind=SENT).update(error_kind=LOST, error=message)


def _insert_numbered(decision: Decision, **fields: Any) -> LLMCall:
    """A row numbered after the decision's calls; a runner it was taken from may be numbering
    at the same moment, so a clash on the number is retried."""
    for _ in range(5):
        try:
            with transaction.atomic():
                last = LLMCall.objects.filter(decision=decision).aggregate(n=Max("attempt"))["n"]
                return LLMCall.objects.create(decision=decision, attempt=(last or 0) + 1, **fields)
        except IntegrityError:
            continue
    raise RuntimeError(f"no free call number for decision {decision.pk}")


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
