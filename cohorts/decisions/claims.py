"""Decision claims: the Decision row is the claim (UNIQUE(entry, week)); see cohorts/decisions/run.py.

Whoever inserts the row runs the decision; a claim whose runner died is reclaimed after
ARENA_CLAIM_TIMEOUT_SECONDS, and a skipped or retryable one (the latter once its round is due,
cohorts/decisions/retry.py) by the next catch-up, each by a conditional UPDATE that sets a new
claim_token (row count 1 = ours). A final status is written only while our token is on the row,
so a slow runner that lost its claim cannot write a second outcome.

Taking over a claimed decision (its runner presumed dead) is said three ways: the decision's
`takeovers` list gains {at, from, to, lost_calls}, the calls the dead run sent without storing
an answer are marked lost (cohorts/llm_calls.py), and one warning names the decision and the
old and new runner.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from cohorts.decisions import retry as decision_retry
from cohorts.llm_calls import mark_lost
from cohorts.models import Cohort, Decision
from core import clock
from core.versions import data_changed

log = logging.getLogger(__name__)


class ClaimLost(Exception):
    """Our claim was taken over (we were presumed dead); our results must not be written."""


def pending_entry_ids(cohort: Cohort, week: int) -> list[int]:
    """Entries whose decision for `week` still has to happen: none yet, retryable (when its
    next round is due)/skipped, or a claim gone stale. The beat runs decide every 15 minutes as a
    catch-up (a tick lost to a broker outage is made good by the next one), so finished, waiting
    and live claims must cost nothing."""
    S, now = Decision.Status, clock.now()
    stale_before = now - timedelta(seconds=settings.ARENA_CLAIM_TIMEOUT_SECONDS)
    settled = Decision.objects.filter(entry__cohort=cohort, week=week).filter(
        Q(status__in=[S.DONE, S.FAILED])
        | Q(status=S.CLAIMED, claimed_at__gte=stale_before)
        | decision_retry.waiting(now)
    )
    return list(
        cohort.entries.exclude(pk__in=settled.values("entry_id"))
        .order_by("id")
        .values_list("id", flat=True)
    )


def runner_name(worker: str = "") -> str:
    """Who runs a decision: the Celery worker's name (or this host) and the process id."""
    return f"{worker or socket.gethostname()}/{os.getpid()}"[:200]


def claim_decision(
    entry_id: int, week: int, release_id: int | None = None, *, runner: str = ""
) -> Decision | None:
    """Insert the claim row (with the entry's release) or take over a stale one, a skipped one
    or a retryable one whose round is due; None if taken (or not due)."""
    now, token, runner = clock.now(), uuid.uuid4().hex, runner or runner_name()
    try:
        with transaction.atomic():
            return Decision.objects.create(
                entry_id=entry_id,
                week=week,
                claim_token=token,
                claimed_at=now,
                claimed_by=runner,
                release_id=release_id,
            )
    except IntegrityError:
        pass  # the row exists: maybe it is reclaimable
    stale_before = now - timedelta(seconds=settings.ARENA_CLAIM_TIMEOUT_SECONDS)
    S = Decision.Status
    reclaimable = (
        Q(status=S.CLAIMED, claimed_at__lt=stale_before)
        | Q(status=S.SKIPPED)
        | decision_retry.due(now)
    )
    old = (
        Decision.objects.filter(reclaimable, entry_id=entry_id, week=week)
        .values("pk", "status", "claim_token", "claimed_by", "takeovers")
        .first()
    )
    if old is None:
        return None
    taking_over = old["status"] == S.CLAIMED
    takeovers = list(old["takeovers"] or [])
    with transaction.atomic():
        # Whatever run held it before is gone (stale, or ended retryable or skipped): a call it
        # put on the record and never completed is lost. A run that died on its database
        # connection (retryable) cannot have marked its own.
        lost = mark_lost(old["pk"])
        if taking_over:
            takeovers.append(
                {"at": now.isoformat(), "from": old["claimed_by"], "to": runner, "lost_calls": lost}
            )
        # The token read above must still be there: one runner wins, the others get 0 rows.
        taken = Decision.objects.filter(
            reclaimable, pk=old["pk"], claim_token=old["claim_token"]
        ).update(
            status=S.CLAIMED,
            claim_token=token,
            claimed_at=now,
            claimed_by=runner,
            takeovers=takeovers,
            finished_at=None,
            retry_after=None,
            error="",
            hold_reason="",
            validation_errors=[],
        )
        if taken != 1:
            transaction.set_rollback(True)
            return None
    if taking_over:
        log.warning(
            "decision taken over",
            extra={
                "decision": old["pk"],
                "old_worker": old["claimed_by"] or "unknown",
                "new_worker": runner,
                "lost_calls": lost,
            },
        )
    return Decision.objects.get(pk=old["pk"])


def finish(decision: Decision, status: str, **fields: object) -> bool:
    """Set a final status while we still hold the claim; False if the claim was lost."""
    updated = Decision.objects.filter(
        pk=decision.pk, claim_token=decision.claim_token, status=Decision.Status.CLAIMED
    ).update(status=status, finished_at=clock.now(), **fields)
    if updated:
        data_changed()
    return updated == 1
