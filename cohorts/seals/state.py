"""The states the scores rest on besides the decisions: competitor identities, cohort states and
entries with the release each is pinned to.

A sealed decision is credited to a competitor by id; what the pages show for that id (slug,
display name, model id, provider, endpoint) and how a cohort runs (status, start, decision
weeks, balance, methodology) are rows anyone with database access could edit. So each is kept
as a StateRecord per scope and chained in the scope's event log:

- when a cohort-week is first sealed, the cohort's state, each of its competitors' identity and
  each of its entries (competitor, replicate, release) are recorded in the scope unless a record
  exists (the identity shown at decision time);
- every change the application makes afterwards records the new state: a competitor or cohort
  saved through the ORM or the admin (post_save, cohorts/receivers.py) and the services that
  move a cohort's status with a queryset update (cohorts/services.py, cohorts/settlement.py).

`arena verify` compares each live row with its latest record (cohorts/seals/checks.py): an edit
made without the application (SQL, a queryset update) differs from the log and is named.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents.models import Competitor
from cohorts.models import Cohort, Entry
from cohorts.seals.canonical import dec, ts
from cohorts.seals.models import StateRecord
from core import clock

COMPETITOR, COHORT = StateRecord.Subject.COMPETITOR, StateRecord.Subject.COHORT
ENTRY = StateRecord.Subject.ENTRY
ENTRY_FIELDS = (
    "id",
    "cohort_id",
    "competitor_id",
    "replicate",
    "release_id",
    "release__number",
    "release__model_id",
    "release__provider",
)
IDENTITY_FIELDS = ("id", "slug", "display_name", "model_id", "provider", "base_url")
COHORT_FIELDS = (
    "id",
    "kind",
    "status",
    "week_start",
    "decision_weeks",
    "initial_balance",
    "methodology_version",
    "methodology_hash",
)
State = dict[str, Any]


def identity_state(row: dict) -> State:
    return {
        "slug": row["slug"],
        "display_name": row["display_name"],
        "model_id": row["model_id"],
        "provider": row["provider"],
        "endpoint": row["base_url"],
    }


def cohort_state(row: dict) -> State:
    return {
        "kind": row["kind"],
        "status": row["status"],
        "week_start": ts(row["week_start"]),
        "decision_weeks": row["decision_weeks"],
        "initial_balance": dec(row["initial_balance"], 2),
        "methodology_version": row["methodology_version"],
        "methodology_hash": row["methodology_hash"],
    }


def entry_state(row: dict) -> State:
    release = None
    if row["release_id"] is not None:
        release = {
            "id": row["release_id"],
            "number": row["release__number"],
            "model_id": row["release__model_id"],
            "provider": row["release__provider"],
        }
    return {
        "cohort": row["cohort_id"],
        "competitor": row["competitor_id"],
        "replicate": row["replicate"],
        "release": release,
    }


def current_states(subject: str, ids: Iterable[int]) -> dict[int, State]:
    """subject id -> its state as the live row holds it now."""
    ids = list(ids)
    if subject == ENTRY:
        rows = Entry.objects.filter(pk__in=ids).values(*ENTRY_FIELDS)
        return {r["id"]: entry_state(r) for r in rows}
    if subject == COMPETITOR:
        rows = Competitor.objects.filter(pk__in=ids).values(*IDENTITY_FIELDS)
        return {r["id"]: identity_state(r) for r in rows}
    return {
        r["id"]: cohort_state(r) for r in Cohort.objects.filter(pk__in=ids).values(*COHORT_FIELDS)
    }


def latest_records(scope: str, subject: str, ids: Iterable[int] | None = None) -> dict[int, Any]:
    """subject id -> its latest StateRecord row (id, state) in the scope."""
    rows = StateRecord.objects.filter(scope=scope, subject=subject)
    if ids is not None:
        rows = rows.filter(subject_id__in=list(ids))
    latest: dict[int, Any] = {}
    for r in rows.order_by("id").values("id", "subject_id", "state"):
        latest[r["subject_id"]] = r
    return latest


def _record(
    scope: str,
    subject: str,
    ids: Iterable[int],
    *,
    first_only: bool,
    fields: tuple[str, ...] | None = None,
) -> list[int]:
    """New records where the live state differs from the latest one (`first_only`: only where
    none exists). `fields`: only these moved; the others keep their recorded values, so an
    edit made outside the application to another field still shows as a difference."""
    ids = sorted(set(ids))
    if not ids:
        return []
    now_states = current_states(subject, ids)
    latest = latest_records(scope, subject, ids)
    now = clock.now()
    made = []
    for subject_id in ids:
        state = now_states.get(subject_id)
        last = latest.get(subject_id)
        if state is not None and last is not None and fields is not None:
            state = {**last["state"], **{f: state[f] for f in fields}}
        if state is None or (last is not None and (first_only or last["state"] == state)):
            continue
        row = StateRecord(
            scope=scope, subject=subject, subject_id=subject_id, state=state, recorded_at=now
        )
        row.save()
        made.append(row.pk)
    return made


def record_first(cohort: Cohort) -> list[int]:
    """At a week's seal: the cohort's, its competitors' and its entries' first records in its
    scope."""
    competitors = cohort.entries.values_list("competitor_id", flat=True)
    made = _record(cohort.kind, COHORT, [cohort.pk], first_only=True)
    made += _record(cohort.kind, COMPETITOR, competitors, first_only=True)
    entries = cohort.entries.values_list("pk", flat=True)
    return made + _record(cohort.kind, ENTRY, entries, first_only=True)


def _log(refs: list[int]) -> None:
    if refs:
        from cohorts.seals.events import log_events  # the event log reads StateRecords too

        log_events(refs={"state": refs})


def cohorts_changed(cohort_ids: Iterable[int], fields: tuple[str, ...] | None = None) -> None:
    """The application changed these cohorts (`fields` of them, or all): record the new state
    where one is kept."""
    by_scope: dict[str, list[int]] = {}
    for pk, kind in Cohort.objects.filter(pk__in=list(cohort_ids)).values_list("pk", "kind"):
        by_scope.setdefault(kind, []).append(pk)
    made: list[int] = []
    for scope, ids in by_scope.items():
        kept = latest_records(scope, COHORT, ids)
        made += _record(scope, COHORT, kept, first_only=False, fields=fields)
    _log(made)


def competitor_changed(competitor_id: int) -> None:
    """The application saved this competitor: record its identity in every scope that has one."""
    scopes = StateRecord.objects.filter(subject=COMPETITOR, subject_id=competitor_id)
    made: list[int] = []
    for scope in sorted(set(scopes.values_list("scope", flat=True))):
        made += _record(scope, COMPETITOR, [competitor_id], first_only=False)
    _log(made)


def entry_changed(entry_id: int) -> None:
    """The application saved this entry: record it where a record is kept (its release cannot
    change once its cohort has begun: cohorts.models.Entry.save)."""
    scopes = StateRecord.objects.filter(subject=ENTRY, subject_id=entry_id)
    made: list[int] = []
    for scope in sorted(set(scopes.values_list("scope", flat=True))):
        made += _record(scope, ENTRY, [entry_id], first_only=False)
    _log(made)
