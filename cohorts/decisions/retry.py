"""Rounds of a decision: when a model phase lost to a provider outage runs again, and when not.

A provider that is down (HTTP 408, 429 or 5xx after the client's own retries, timeouts, refused
or reset connections) says nothing about the competitor, so losing the week to it would score
an outage rather than a forecaster. Such a decision ends RETRYABLE with the reason and a
`retry_after` time, and the 15-minute catch-up (cohorts.decisions.run.decide) claims it again once
that time has come. Each claim of it is a round, run through the normal path (so a late round
re-prices under the universe price window like any late decision).

Rounds stop, ending the decision FAILED with the reason, at the first of:
- ARENA_DECISION_MAX_ROUNDS rounds (default 4) lost to outages;
- the week's decision window: the catch-up decides a cohort week only while it is the cohort's
  current week (services.cohort_week), so a round whose next try would come after the week has
  ended is not scheduled, and a retryable decision still waiting when it ends is finalised by
  the catch-up (`expire_overdue`);
- any answer or any error that is not transient (400/401/402/403/404, a malformed or empty body,
  a missing key, an unknown model): those fail at once, as a repeat cannot cure them.
Only live-path cohorts get rounds: a replay or the demo runs each week once on its own clock,
with no catch-up to come back.

`retry_rounds` counts the rounds lost to outages (0 for a decision that never met one), so a
decision done on its third round shows 2. The pure functions come first; the queries after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings
from django.db.models import Q

from agents.attempts import CONNECTION, HTTP, TIMEOUT
from agents.llm import RETRYABLE_STATUSES
from cohorts.models import Decision

S = Decision.Status
# The wait after a round lost to an outage when the provider named none: 5, 10, 20 ... minutes.
BACKOFF_BASE = timedelta(minutes=5)
TRANSIENT_KINDS = frozenset({TIMEOUT, CONNECTION})


class CallOutcome(Protocol):
    """What the policy reads of one HTTP attempt (an agents Attempt)."""

    error_kind: str | None
    http_status: int | None
    retry_after: float | None
    quota_reset: float | None


@dataclass(frozen=True)
class Verdict:
    """How a round lost to an outage ends: RETRYABLE until `retry_after`, or FAILED."""

    status: str
    retry_after: datetime | None
    reason: str


# --- pure policy ---------------------------------------------------------------------------


def transient(call: CallOutcome) -> bool:
    """A failed attempt that the same request may cure later: the provider, not the request."""
    if call.error_kind in TRANSIENT_KINDS:
        return True
    return call.error_kind == HTTP and call.http_status in RETRYABLE_STATUSES


def outage(calls: Sequence[CallOutcome]) -> bool:
    """Every attempt of the phase failed, and each for a transient reason."""
    return bool(calls) and all(c.error_kind is not None and transient(c) for c in calls)


def max_rounds() -> int:
    return max(1, int(getattr(settings, "ARENA_DECISION_MAX_ROUNDS", 4)))


def backoff(round_number: int) -> timedelta:
    """The wait after the `round_number`-th round (1-based) lost to an outage."""
    return BACKOFF_BASE * 2 ** (max(1, round_number) - 1)


def provider_wait(calls: Sequence[CallOutcome]) -> timedelta | None:
    """The wait the provider asked for on its last answer (Retry-After, or a spent quota's
    reset, whichever is later), if it asked."""
    if not calls:
        return None
    last = calls[-1]
    waits = [w for w in (last.retry_after, last.quota_reset) if w is not None]
    return timedelta(seconds=max(waits)) if waits else None


def next_try(now: datetime, round_number: int, calls: Sequence[CallOutcome]) -> datetime:
    wait = provider_wait(calls)
    return now + (wait if wait is not None else backoff(round_number))


def window_end(week_start: datetime, week: int) -> datetime:
    """When the catch-up stops deciding `week`: the end of that cohort week (the instant from
    which services.cohort_week gives week + 1)."""
    return week_start + timedelta(days=7 * week)


def after_outage(
    *,
    now: datetime,
    rounds: int,
    limit: int,
    closes: datetime,
    calls: Sequence[CallOutcome],
    error: str,
) -> Verdict:
    """The end of round `rounds` (1-based, this one included) lost to an outage."""
    lost = f"provider unavailable for {rounds} round{'s' if rounds != 1 else ''}"
    if rounds >= limit:
        return Verdict(S.FAILED, None, f"{lost} (the most a decision gets): {error}")
    when = next_try(now, rounds, calls)
    if when >= closes:
        return Verdict(
            S.FAILED,
            None,
            f"{lost}; the next round ({_ts(when)}) would fall after the week's decision window "
            f"closes ({_ts(closes)}): {error}",
        )
    return Verdict(S.RETRYABLE, when, f"{lost} of {limit}; next round after {_ts(when)}: {error}")


def expired_reason(rounds: int, closes: datetime) -> str:
    return (
        f"provider unavailable for {rounds} round{'s' if rounds != 1 else ''}; the week's "
        f"decision window closed ({_ts(closes)}) before the next round"
    )


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


# --- queries -------------------------------------------------------------------------------


def due(now: datetime) -> Q:
    """Retryable rows that may be claimed now: a round's wait is over, or there is none (a
    transient database error, a staff re-run)."""
    return Q(status=S.RETRYABLE) & (Q(retry_after__isnull=True) | Q(retry_after__lte=now))


def waiting(now: datetime) -> Q:
    """Retryable rows whose next round is not due yet: nothing for the catch-up to send."""
    return Q(status=S.RETRYABLE, retry_after__gt=now)


def expire_overdue(now: datetime, live_kind: str) -> list[Decision]:
    """Finalise FAILED every live retryable decision still waiting for a round when its week's
    decision window has closed (the catch-up no longer decides that week). Each row moves by a
    conditional UPDATE, so a round claimed meanwhile is left to finish."""
    expired = []
    rows = Decision.objects.filter(
        status=S.RETRYABLE, retry_after__isnull=False, entry__cohort__kind=live_kind
    ).select_related("entry__cohort")
    for d in rows:
        closes = window_end(d.entry.cohort.week_start, d.week)
        if now < closes:
            continue
        moved = Decision.objects.filter(pk=d.pk, status=S.RETRYABLE, retry_after=d.retry_after)
        if moved.update(
            status=S.FAILED,
            retry_after=None,
            finished_at=now,
            error=expired_reason(d.retry_rounds, closes),
        ):
            d.refresh_from_db()
            expired.append(d)
    return expired
