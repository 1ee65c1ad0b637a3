"""Publishing each new week root to an outside place (off unless ARENA_SEAL_PUBLISH_URL is set).

A root kept only in our own database proves nothing against whoever runs the database: the proof
is that the root was somewhere else, with a timestamp we do not control, before the outcomes were
known. Each new WeekSeal is POSTed as JSON (the payload below, the same fields as /api/seals) to
ARENA_SEAL_PUBLISH_URL, with ARENA_SEAL_PUBLISH_TOKEN as a bearer token when set. Timeouts
(ARENA_SEAL_PUBLISH_TIMEOUT seconds) and retries with backoff (ARENA_SEAL_PUBLISH_RETRIES, honouring
Retry-After on 429/503) are per attempt; a seal that still fails is retried by every snapshot tick.

Each payload also carries the scope's newest signed checkpoint (cohorts/seals/sign.py), and with
ARENA_SEAL_PUBLISH_DIR set every checkpoint is appended, once its transaction commits, as one
JSON line to DIR/checkpoints-<scope>.jsonl: a directory (or git repository) the operator pushes
elsewhere, which `arena verify --published` reads as it is.

Exactly-once-ish: a SealPublication row per (seal, target) is the claim (unique constraint), taken
over when its claimer has been gone for CLAIM_STALE; a receiver should treat the payload's
(cohort, week, seq, root) as idempotent, since a crash between the POST and the row update can
repeat one.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q

from cohorts.seals.models import SealPublication, WeekSeal
from cohorts.seals.sign import checkpoint_dict, latest_checkpoints
from core import clock
from core.http import HttpError, fetch, parse_retry_after

log = logging.getLogger(__name__)

CLAIM_STALE = timedelta(minutes=5)
RETRY_AFTER_CAP = 30.0
TRANSIENT = {429, 500, 502, 503, 504}
# Only the status matters; the start of an error body is kept for the operator.
REPLY_BYTES = 64_000


def target() -> str:
    return getattr(settings, "ARENA_SEAL_PUBLISH_URL", "") or ""


def payload(seal: WeekSeal) -> dict:
    # The scope's newest signed checkpoint rides along: its log holds this root (the seal's
    # append signed it), so a receiver keeping the posts keeps checkpoints too.
    newest = latest_checkpoints(seal.scope)
    return {
        "checkpoint": checkpoint_dict(newest[0]) if newest else None,
        "format": seal.format,
        "cohort": seal.cohort_id,
        "kind": seal.scope,
        "week": seal.week,
        "seq": seal.seq,
        "count": seal.count,
        "root": seal.root,
        "genesis": seal.genesis,
        "reason": seal.reason,
        "sealed_at": seal.sealed_at.isoformat(),
    }


def publish_after_commit(seal: WeekSeal) -> None:
    """Publish once the seal's transaction commits (a rolled-back seal must not go out)."""
    if target():
        transaction.on_commit(partial(_publish_quietly, seal.pk))


def _publish_quietly(seal_id: int) -> None:
    try:
        publish_pending(seal_ids=[seal_id])
    except Exception:  # the decision or settlement that sealed must not fail on publishing
        log.exception("publishing a seal failed; the snapshot tick retries",
                      extra={"seal": seal_id})  # fmt: skip


def publish_pending(seal_ids: list[int] | None = None) -> dict[str, int]:
    """POST every seal (of `seal_ids`, or all) not yet published to the target."""
    url = target()
    summary = {"published": 0, "failed": 0}
    if not url:
        return summary
    done = SealPublication.objects.filter(
        seal=OuterRef("pk"), target=url, published_at__isnull=False
    )
    seals = WeekSeal.objects.filter(~Exists(done)).order_by("id")
    if seal_ids is not None:
        seals = seals.filter(pk__in=seal_ids)
    for seal in seals:
        pub = _claim(seal, url)
        if pub is None:
            continue  # someone else is publishing it right now
        ok = _post(pub, url, payload(seal))
        summary["published" if ok else "failed"] += 1
    return summary


def _claim(seal: WeekSeal, url: str) -> SealPublication | None:
    now = clock.now()
    try:
        with transaction.atomic():
            return SealPublication.objects.create(seal=seal, target=url, claimed_at=now)
    except IntegrityError:
        pass
    taken = SealPublication.objects.filter(
        Q(claimed_at__lt=now - CLAIM_STALE) | Q(error__gt=""),
        seal=seal,
        target=url,
        published_at__isnull=True,
    ).update(claimed_at=now, error="")
    if taken != 1:
        return None
    return SealPublication.objects.get(seal=seal, target=url)


def _post(pub: SealPublication, url: str, body: dict) -> bool:
    timeout = float(getattr(settings, "ARENA_SEAL_PUBLISH_TIMEOUT", 10))
    retries = int(getattr(settings, "ARENA_SEAL_PUBLISH_RETRIES", 3))
    backoff = float(getattr(settings, "ARENA_SEAL_PUBLISH_BACKOFF", 1.0))
    headers = {"User-Agent": settings.ARENA_USER_AGENT}
    token = getattr(settings, "ARENA_SEAL_PUBLISH_TOKEN", "")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    status, error, attempts = None, "", 0
    for attempt in range(1, retries + 2):
        attempts = attempt
        wait = backoff * 2 ** (attempt - 1)
        try:
            reply = fetch(
                "POST", url, json_body=body, headers=headers, timeout=timeout,
                max_bytes=REPLY_BYTES, truncate=True,
            )  # fmt: skip
        except HttpError as exc:
            status, error = None, f"{type(exc).__name__}: {exc}"[:500]
        else:
            status = reply.status
            if 200 <= status < 300:
                error = ""
                break
            error = f"HTTP {status}: {reply.text()[:200]}"
            if status not in TRANSIENT:
                break  # a 4xx other than 429 will not get better by retrying now
            hinted = parse_retry_after(reply.headers.get("Retry-After"))
            if hinted is not None:
                wait = min(hinted, RETRY_AFTER_CAP)
        if attempt <= retries:
            time.sleep(wait)
    SealPublication.objects.filter(pk=pub.pk).update(
        attempts=pub.attempts + attempts,
        http_status=status,
        error=error,
        published_at=clock.now() if not error else None,
    )
    if error:
        log.warning("publishing a seal to %s failed", url,
                    extra={"seal": pub.seal_id, "reason": error})  # fmt: skip
    return not error
