"""The seal export (`/exports/seals.json`, `arena export --what seals`): docs/verification.md.

Whole cohorts with every week's genesis, seals and digests, then the event logs of their scopes,
their latest signed checkpoints and the public key they verify with. Each entry's latest record
is rebuilt from the live rows (what the site shows now), so a database edited after sealing
gives an export whose records no longer hash to their sealed values; superseded and pending
records come from the seal rows.

The whole export is read from one snapshot of the database (`one_snapshot`): its parts are read
seconds apart, and an honest export must agree with itself when the arena writes meanwhile.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from cohorts.models import Cohort, Decision, Universe
from cohorts.seals.canonical import (
    DECISION_FORMAT,
    FORMAT,
    RECORD_FORMATS,
    RESOLUTION_FORMAT,
    canonical,
)
from cohorts.seals.current import current_section
from cohorts.seals.events import event_records
from cohorts.seals.keys import history, key_dict
from cohorts.seals.models import Checkpoint, DecisionDigest, EventLogEntry, WeekSeal
from cohorts.seals.records import DecisionRows, events_genesis_record, genesis_record
from cohorts.seals.sealing import FINAL, RERUNNABLE
from cohorts.seals.sign import checkpoint_dict, public_key_info
from core import clock

# /2 adds the seal, identity and cohort records to the event logs, the latest signed checkpoint
# of each log and the public key; /3 the key history (`signing_keys`) and what the site shows
# now (`current`), to compare with the logs. Older exports are still verified.
EXPORT_FORMAT = "arena-seals-export/3"
EXPORT_FORMATS = ("arena-seals-export/1", "arena-seals-export/2", EXPORT_FORMAT)


def export_chunks(
    cohort_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
    kind: str | None = None,
) -> Iterator[str]:
    """The seal export as JSON text chunks: whole cohorts (week_start in [since, until), at most
    `limit` of them), then the event logs of their scopes. See docs/verification.md."""
    with one_snapshot():
        yield from _chunks(cohort_id, since, until, limit, kind)


@contextmanager
def one_snapshot() -> Iterator[None]:
    """Every read inside from one snapshot of the database. The export reads its cohorts, then
    the logs, then what the site shows (`current`), and a week sealed or a competitor renamed
    between two of them would make an honest export fail its own checks (a logged root missing
    from the weeks, a name the log does not hold yet). Inside a caller's transaction (a test, a
    command that opened one): the caller's."""
    if connection.in_atomic_block:
        yield
        return
    if connection.vendor == "sqlite":
        # The settings' IMMEDIATE would hold the write lock for the whole export; a DEFERRED
        # transaction reads one WAL snapshot and lets writers commit meanwhile.
        connection.ensure_connection()
        sqlite: Any = connection  # transaction_mode is the SQLite backend's own attribute
        mode = sqlite.transaction_mode
        sqlite.transaction_mode = "DEFERRED"
        try:
            with transaction.atomic():
                sqlite.transaction_mode = mode
                yield
        finally:
            sqlite.transaction_mode = mode
        return
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _chunks(
    cohort_id: int | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    kind: str | None,
) -> Iterator[str]:
    cohorts = Cohort.objects.order_by("id")
    if cohort_id is not None:
        cohorts = cohorts.filter(pk=cohort_id)
    if kind is not None:
        cohorts = cohorts.filter(kind=kind)
    if since is not None:
        cohorts = cohorts.filter(week_start__gte=since)
    if until is not None:
        cohorts = cohorts.filter(week_start__lt=until)
    if limit is not None:
        cohorts = cohorts[:limit]
    head = {
        "format": EXPORT_FORMAT,
        "seal_format": FORMAT,
        # Decision records are /2 (with their release) since releases, /1 before, /3 an outside
        # agent's; resolution records /4 (staff by pseudonym) since pseudonyms, /1 before.
        "record_formats": [*RECORD_FORMATS, RESOLUTION_FORMAT],
        "generated_at": clock.now().isoformat(),
        "cohort": cohort_id,
    }
    yield json.dumps(head)[:-1] + ', "cohorts": ['
    scopes = set()
    cohort_ids = []
    for i, cohort in enumerate(cohorts):
        scopes.add(cohort.kind)
        cohort_ids.append(cohort.pk)
        yield ("\n" if i == 0 else ",\n") + _cohort_json(cohort)
    yield '\n], "event_logs": ['
    sizes: dict[str, int] = {}
    for i, scope in enumerate(sorted(scopes)):
        text, sizes[scope] = _events_json(scope)
        yield ("\n" if i == 0 else ",\n") + text
    # The newest checkpoint of each log the export covers in full (one signed after the log was
    # read would name links the export does not have).
    checkpoints = [
        checkpoint_dict(cp)
        for scope, size in sorted(sizes.items())
        if (cp := Checkpoint.objects.filter(scope=scope, size__lte=size).order_by("-size").first())
    ]
    tail = {
        "signing_key": public_key_info(),
        "signing_keys": [key_dict(k) for k in history()],
        "checkpoints": checkpoints,
        "current": current_section(sorted(scopes), cohort_ids),
    }
    yield "\n], " + json.dumps(tail)[1:] + "\n"


def _cohort_json(cohort: Cohort) -> str:
    universes = {u.week: u for u in Universe.objects.filter(cohort=cohort)}
    entries = {e["id"]: e for e in cohort.entries.values("id", "competitor_id", "replicate")}
    weeks = []
    all_seals = list(WeekSeal.objects.filter(cohort=cohort).order_by("week", "seq"))
    for week in sorted({s.week for s in all_seals}):
        digests = list(DecisionDigest.objects.filter(cohort=cohort, week=week).order_by("seq"))
        latest = {dg.entry_id: dg.pk for dg in digests}
        rows = DecisionRows(dg.decision_id for dg in digests if dg.decision_id)
        live = {
            d["id"]: d
            for d in Decision.objects.filter(pk__in=rows.decisions).values(
                "id", "status", "claimed_at"
            )
        }
        items = []
        for dg in digests:
            text = _export_record(dg, latest, rows, live, cohort.pk, week, entries)
            meta = {
                "seq": dg.seq,
                "entry": dg.entry_id,
                "decision": dg.decision_id,
                "state": dg.state,
                "status": dg.status,
                "amendment": dg.amendment,
                "record_hash": dg.record_hash,
                "prev": dg.prev,
                "link": dg.link,
                "created_at": dg.created_at.isoformat(),
            }
            items.append(json.dumps(meta)[:-1] + ', "record": ' + text + "}")
        universe = universes.get(week)
        genesis = genesis_record(cohort, week, universe.content_hash if universe else "")
        week_seals = [
            {
                "seq": s.seq,
                "count": s.count,
                "root": s.root,
                "genesis": s.genesis,
                "reason": s.reason,
                "sealed_at": s.sealed_at.isoformat(),
            }
            for s in all_seals
            if s.week == week
        ]
        weeks.append(
            json.dumps({"week": week, "genesis": genesis, "seals": week_seals})[:-1]
            + ', "digests": [\n'
            + ",\n".join(items)
            + "]}"
        )
    head = {"id": cohort.pk, "kind": cohort.kind, "week_start": cohort.week_start.isoformat()}
    return json.dumps(head)[:-1] + ', "weeks": [\n' + ",\n".join(weeks) + "]}"


def _export_record(dg, latest, rows, live, cohort_id, week, entries) -> str:
    """The live record for an entry's latest final digest (what the site shows now) unless that
    decision is being re-run; the stored one otherwise; null when the decision row is gone."""
    stored = dg.record_bytes().decode("utf-8", "surrogatepass")
    if dg.state == "pending" or latest[dg.entry_id] != dg.pk:
        return stored
    # Rebuilt in the format it was sealed in: a /1 record stays /1 in every export.
    fmt = json.loads(stored).get("format")
    fmt = fmt if fmt in RECORD_FORMATS else DECISION_FORMAT
    now = rows.record(cohort_id, week, entries.get(dg.entry_id, {}), dg.decision_id, fmt)
    if now is None:
        return "null"
    d = live[dg.decision_id]
    rerun = dg.status in RERUNNABLE and (
        d["status"] not in FINAL or d["claimed_at"] > dg.created_at
    )
    if rerun:
        return stored
    return canonical(now).decode("utf-8", "surrogatepass")


def _events_json(scope: str) -> tuple[str, int]:
    rows = list(EventLogEntry.objects.filter(scope=scope).order_by("seq"))
    by_kind: dict[str, list[int]] = defaultdict(list)
    for e in rows:
        by_kind[e.kind].append(e.ref)
    live = {kind: event_records(kind, refs) for kind, refs in by_kind.items()}
    items = []
    for e in rows:
        found = live[e.kind].get(e.ref)
        record = None if found is None else found.as_logged(e.record_hash)
        text = "null" if record is None else canonical(record).decode("utf-8", "surrogatepass")
        meta = {
            "seq": e.seq,
            "kind": e.kind,
            "ref": e.ref,
            "record_hash": e.record_hash,
            "prev": e.prev,
            "link": e.link,
            "created_at": e.created_at.isoformat(),
        }
        items.append(json.dumps(meta)[:-1] + ', "record": ' + text + "}")
    head = {"scope": scope, "genesis": events_genesis_record(scope)}
    text = json.dumps(head)[:-1] + ', "entries": [\n' + ",\n".join(items) + "]}"
    return text, len(rows)
