"""The event log: one hash chain per scope (live, replay, demo) of everything that moves money
or truth after the decisions: resolution changes (every source), settlements and reversals, and
of what the decisions are read against: every week seal, competitor identities and cohort
states (cohorts/seals/state.py); and of what was published from them: every finished score run
(a floor above, scoring, builds its record and appends it with `append_event`, and registers how
its record is rebuilt from the live rows: `register_kind`). Its signed checkpoints
(cohorts/seals/sign.py) cover all of it.

Entries are appended in the transaction that writes the row (the resolution receiver, settlement)
and caught up by the snapshot tick for anything missed, so a row and its log entry commit
together. Within one append, events are ordered by scope, time, kind (states and seals first, then
resolution before reversal before settlement: a correction reverses before it pays again) and id.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet

from cohorts.models import Cohort, LedgerEntry, Settlement
from cohorts.scope import KIND_FOR_SOURCE
from cohorts.seals import keys
from cohorts.seals.canonical import canonical, link_hash, pack, record_hash, sha256_hex
from cohorts.seals.models import Checkpoint, EventLogEntry, SigningKey, StateRecord, WeekSeal
from cohorts.seals.records import (
    LEDGER_FIELDS,
    Record,
    Row,
    events_genesis_record,
    resolution_record,
    reversal_record,
    seal_record,
    settlement_record,
    state_record,
)
from cohorts.seals.sign import checkpoint
from core import clock
from core.versions import data_changed
from markets.models import ResolutionChange

log = logging.getLogger(__name__)

SCOPE_OF_SOURCE = KIND_FOR_SOURCE
RC_FIELDS = (
    "id",
    "market_id",
    "market__source",
    "source",
    "changed_by_id",
    "changed_by__username",
    "changed_at",
    "from_status",
    "from_outcome",
    "to_status",
    "to_outcome",
    "reason",
)
SETTLEMENT_FIELDS = (
    "id",
    "market_id",
    "position_id",
    "position__entry_id",
    "position__entry__cohort__kind",
    "kind",
    "outcome",
    "shares",
    "cost_basis",
    "payout",
    "settled_at",
    "reversed_at",
)
SEAL_FIELDS = (
    "id",
    "cohort_id",
    "scope",
    "week",
    "seq",
    "count",
    "root",
    "genesis",
    "reason",
    "sealed_at",
)
K = EventLogEntry.Kind
_KIND_ORDER: dict[str, int] = {
    K.KEY: -1,
    K.COHORT: 0,
    K.IDENTITY: 1,
    K.ENTRY: 1,
    K.SEAL: 2,
    K.RESOLUTION: 3,
    K.REVERSAL: 4,
    K.SETTLEMENT: 5,
    K.SCORE_RUN: 6,
}
STATE_KINDS: dict[str, str] = {
    K.IDENTITY: StateRecord.Subject.COMPETITOR,
    K.COHORT: StateRecord.Subject.COHORT,
    K.ENTRY: StateRecord.Subject.ENTRY,
    K.KEY: StateRecord.Subject.KEY,
}


@dataclass(frozen=True)
class Event:
    """One row's record as the database holds it now, and where it goes in the log."""

    scope: str
    record: Record
    at: datetime
    legacy: Record | None = None  # the same row in the older format it may have been logged in

    def as_logged(self, logged_hash: str) -> Record:
        """The record in the format whose hash is the logged one (else the current format)."""
        if self.legacy is not None and record_hash(self.legacy) == logged_hash:
            return self.legacy
        return self.record


@dataclass(frozen=True)
class KindReader:
    """How the records of a kind whose rows live on a floor above are read (`event_records`)
    and how a difference from the logged record is named (None: by its first differing field)."""

    read: Callable[[list[int]], dict[int, Event]]
    explain: Callable[[int, dict, dict], str] | None = None


# Registered by the owning app's ready(): cohorts may not import the floors above it.
READERS: dict[str, KindReader] = {}


def register_kind(kind: str, reader: KindReader) -> None:
    READERS[kind] = reader


def settlement_ledger(settlement_ids: Iterable[int]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = defaultdict(list)
    rows = LedgerEntry.objects.filter(settlement_id__in=list(settlement_ids)).order_by("id")
    for row in rows.values("settlement_id", *LEDGER_FIELDS):
        out[row["settlement_id"]].append(row)
    return out


def event_records(kind: str, refs: Iterable[int]) -> dict[int, Event]:
    """ref -> its Event, for the rows of `kind` as they are in the database now."""
    refs = list(refs)
    out: dict[int, Event] = {}
    if kind in READERS:
        return READERS[kind].read(refs)
    if kind == K.SEAL:
        for ws in WeekSeal.objects.filter(pk__in=refs).values(*SEAL_FIELDS):
            out[ws["id"]] = Event(ws["scope"], seal_record(ws), ws["sealed_at"])
        return out
    if kind in STATE_KINDS:
        states = StateRecord.objects.filter(pk__in=refs, subject=STATE_KINDS[kind])
        for r in states.values("id", "scope", "subject", "subject_id", "state", "recorded_at"):
            out[r["id"]] = Event(r["scope"], state_record(r), r["recorded_at"])
        return out
    if kind == EventLogEntry.Kind.RESOLUTION:
        for rc in ResolutionChange.objects.filter(pk__in=refs).values(*RC_FIELDS):
            scope = SCOPE_OF_SOURCE.get(rc["market__source"], Cohort.Kind.LIVE)
            out[rc["id"]] = Event(
                scope,
                resolution_record(rc),
                rc["changed_at"],
                legacy=resolution_record(rc, legacy=True),
            )
        return out
    rows = list(Settlement.objects.filter(pk__in=refs).values(*SETTLEMENT_FIELDS))
    ledger = settlement_ledger(s["id"] for s in rows)
    for s in rows:
        scope = s["position__entry__cohort__kind"]
        if kind == EventLogEntry.Kind.SETTLEMENT:
            out[s["id"]] = Event(scope, settlement_record(s, ledger[s["id"]]), s["settled_at"])
        elif s["reversed_at"] is not None:
            out[s["id"]] = Event(scope, reversal_record(s, ledger[s["id"]]), s["reversed_at"])
    return out


def _logged(kind: str) -> QuerySet[EventLogEntry]:
    return EventLogEntry.objects.filter(kind=kind, ref=OuterRef("pk"))


def _unlogged_refs(refs: dict[str, list[int]]) -> dict[str, list[int]]:
    """Of these WeekSeal ("seal") and StateRecord ("state") ids, the ones not logged yet."""
    out: dict[str, list[int]] = {}
    seals = WeekSeal.objects.filter(pk__in=refs.get("seal", [])).filter(~Exists(_logged(K.SEAL)))
    out[K.SEAL] = list(seals.values_list("pk", flat=True))
    for kind, subject in STATE_KINDS.items():
        states = StateRecord.objects.filter(pk__in=refs.get("state", []), subject=subject)
        out[kind] = list(states.filter(~Exists(_logged(kind))).values_list("pk", flat=True))
    return out


def _unlogged(market_id: int | None) -> dict[str, list[int]]:
    logged = _logged

    rcs = ResolutionChange.objects.filter(~Exists(logged(EventLogEntry.Kind.RESOLUTION)))
    settled = Settlement.objects.filter(~Exists(logged(EventLogEntry.Kind.SETTLEMENT)))
    reversed_ = Settlement.objects.filter(reversed_at__isnull=False).filter(
        ~Exists(logged(EventLogEntry.Kind.REVERSAL))
    )
    extra: dict[str, list[int]] = {}
    if market_id is not None:
        rcs = rcs.filter(market_id=market_id)
        settled = settled.filter(market_id=market_id)
        reversed_ = reversed_.filter(market_id=market_id)
    else:
        extra[K.SEAL] = list(
            WeekSeal.objects.filter(~Exists(logged(K.SEAL))).values_list("pk", flat=True)
        )
        for kind, subject in STATE_KINDS.items():
            states = StateRecord.objects.filter(subject=subject).filter(~Exists(logged(kind)))
            extra[kind] = list(states.values_list("pk", flat=True))
    return {
        **extra,
        EventLogEntry.Kind.RESOLUTION: list(rcs.values_list("pk", flat=True)),
        EventLogEntry.Kind.SETTLEMENT: list(settled.values_list("pk", flat=True)),
        EventLogEntry.Kind.REVERSAL: list(reversed_.values_list("pk", flat=True)),
    }


def log_events(market_id: int | None = None, refs: dict[str, list[int]] | None = None) -> int:
    """Append every resolution change, settlement and reversal not yet in its scope's log (of
    one market), or with `refs` only those WeekSeal ("seal") and StateRecord ("state") ids, or
    without either everything unlogged (seals and states too); returns how many. Called inside
    the writing transaction (a savepoint here), so the log entry commits with the row; a lost
    race is retried, and whatever still fails is left to the snapshot tick."""
    for _attempt in range(3):
        try:
            with transaction.atomic():
                return _log_events(market_id, refs)
        except IntegrityError:
            continue  # another process appended to the same scope first: read the head again
    log.warning("event log: could not append; the snapshot tick retries",
                extra={"market": market_id})  # fmt: skip
    return 0


@dataclass(frozen=True)
class _Pending:
    kind: str
    ref: int
    event: Event

    @property
    def order(self) -> tuple[str, datetime, int, int]:
        return (self.event.scope, self.event.at, _KIND_ORDER[self.kind], self.ref)


def _log_events(market_id: int | None, refs: dict[str, list[int]] | None = None) -> int:
    todo = _unlogged_refs(refs) if refs is not None else _unlogged(market_id)
    items = [
        _Pending(kind, ref, event)
        for kind, kind_refs in todo.items()
        if kind_refs  # nothing to read: skip the kind's queries (most resolutions have no reversal)
        for ref, event in event_records(kind, kind_refs).items()
    ]
    if not items:
        return 0
    items.sort(key=lambda item: item.order)
    by_scope: dict[str, list[_Pending]] = defaultdict(list)
    for item in items:
        by_scope[item.event.scope].append(item)
    now = clock.now()
    rows = []
    for scope, scoped in by_scope.items():
        head = EventLogEntry.objects.filter(scope=scope).order_by("-seq").first()
        if head is None:
            prev, seq = record_hash(events_genesis_record(scope)), 0
        else:
            prev, seq = head.link, head.seq
        for item in scoped:
            data = canonical(item.event.record)
            seq += 1
            h = sha256_hex(data)
            link = link_hash(prev, h, seq)
            rows.append(
                EventLogEntry(
                    scope=scope,
                    seq=seq,
                    kind=item.kind,
                    ref=item.ref,
                    record=pack(data),
                    record_hash=h,
                    prev=prev,
                    link=link,
                    created_at=now,
                )
            )
            prev = link
    EventLogEntry.objects.bulk_create(rows)
    for scope in by_scope:
        sign_head(scope)  # each new head signed in the transaction that appended it
    data_changed()  # /api/seals shows the log heads
    return len(rows)


def append_event(scope: str, kind: str, ref: int, record: Record) -> EventLogEntry:
    """Append one record to the scope's log (in the caller's transaction, so it commits with the
    row it records) and sign the new head. For kinds the catch-up does not read (a score run):
    a lost race with another appender is retried, and a log that still cannot be appended to
    raises, so the caller's row never commits without its record."""
    data = canonical(record)
    h = sha256_hex(data)
    for attempt in range(3):
        try:
            with transaction.atomic():
                head = EventLogEntry.objects.filter(scope=scope).defer("record").order_by("-seq")
                last = head.first()
                prev = last.link if last else record_hash(events_genesis_record(scope))
                seq = last.seq + 1 if last else 1
                entry = EventLogEntry.objects.create(
                    scope=scope,
                    seq=seq,
                    kind=kind,
                    ref=ref,
                    record=pack(data),
                    record_hash=h,
                    prev=prev,
                    link=link_hash(prev, h, seq),
                    created_at=clock.now(),
                )
                sign_head(scope)
        except IntegrityError:
            if attempt == 2:
                raise
            continue  # another process appended to the same scope first: read the head again
        data_changed()
        return entry
    raise AssertionError("unreachable")


def sign_head(scope: str) -> None:
    """Sign the scope's head with the key in force there, after recording the history's latest
    key in the log when it is not in force yet (a rotation, or a log begun after one). Signs
    nothing when this process's key is not the arena's latest (keys.key_problem): the links stay
    unsigned, which `arena verify` reports, until a process with the arena's key signs them."""
    problem = keys.key_problem()
    if problem:
        log.error("event log %s: head not signed: %s", scope, problem)
        return
    if keys.ensure_first() is None:
        return
    latest = SigningKey.objects.order_by("-id").first()
    assert latest is not None  # ensure_first registered one
    if keys.in_force(scope) != latest.key_id:
        _log_events(None, {"state": [keys.record_in_scope(scope, latest)]})  # signs the new head
        return
    checkpoint(scope)


def sign_all() -> int:
    """Sign every scope's head that moved since its last checkpoint; returns how many."""
    scopes = sorted(set(EventLogEntry.objects.values_list("scope", flat=True).distinct()))
    before = Checkpoint.objects.count()
    for scope in scopes:
        sign_head(scope)
    made = Checkpoint.objects.count() - before
    if made:
        data_changed()  # /api/seals shows the newest checkpoints
    return made
