"""`arena verify`'s comparison of the live state with a scope's event log.

The records checks (cohorts/seals/verify.py) prove each logged record still matches its row.
What is checked here is the other direction: that every row the scores rest on is what the log
says it last became, so an edit made without the application (SQL, a queryset update, a row
changed in the admin without its service) is named:

- each market of the scope (in a frozen universe or the log) has the resolution of its latest
  resolution record, and a market resolved with no resolution record at all is a failure;
- each settlement's payout ledger rows belong to a logged settlement, every settlement is logged
  and every reversed one has a logged reversal, and each entry's cash is the sum of its ledger;
- each competitor with sealed decisions in the scope has the identity of its latest identity
  record, and each sealed cohort the state of its latest cohort record;
- every week seal is in the log;
- each entry runs the release of its latest entry record and the release its decisions called
  (an entry repointed to another release is named);
- every stored checkpoint of the scope is signed, with a valid signature, by the key in force
  at its link (cohorts/seals/keys.py), and its head is that link;
- a week that must have been sealed (a later week is, a market of its universe has settled, or
  a live week is long past its deadline) and has no seal is a failure, not a note.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Sum

from agents.models import Competitor, Release
from cohorts.models import Cohort, Decision, Entry, LedgerEntry, Settlement, Universe
from cohorts.scope import on_live_path
from cohorts.seals import keys
from cohorts.seals.canonical import ts
from cohorts.seals.models import Checkpoint, DecisionDigest, EventLogEntry, SigningKey, WeekSeal
from cohorts.seals.sign import public_key_hex, signed_body
from cohorts.seals.state import COHORT, COMPETITOR, ENTRY, current_states
from core import clock
from markets.models import Market

FINAL = (Market.Status.RESOLVED, Market.Status.VOID)
SETTLEMENT_KINDS = (LedgerEntry.Kind.PAYOUT, LedgerEntry.Kind.REFUND, LedgerEntry.Kind.REVERSAL)
# A live week is sealed by the snapshot tick at its grace deadline; past this much more, a
# missing seal cannot be a tick that has not run yet.
DEADLINE_SLACK = timedelta(hours=1)
CENT = Decimal("0.01")


def _differs(logged: dict, now: dict) -> str:
    fields = [k for k in sorted(set(logged) | set(now)) if logged.get(k) != now.get(k)]
    return ", ".join(
        f"{k} is {json.dumps(now.get(k))} (logged {json.dumps(logged.get(k))})" for k in fields
    )


def _universe_markets(cohorts: Iterable[int]) -> dict[tuple[int, int], set[int]]:
    out: dict[tuple[int, int], set[int]] = {}
    for cohort_id, week, markets in Universe.objects.filter(
        cohort_id__in=list(cohorts)
    ).values_list("cohort_id", "week", "markets"):
        out[(cohort_id, week)] = {m.get("market_id") for m in markets or [] if m.get("market_id")}
    return out


def check_scope(
    problems: list[str], scope: str, rows: list[EventLogEntry], notes: list[str] | None = None
) -> None:
    """Append what differs between the live rows of `scope` and its (verified) event log."""
    records: list[tuple[str, int, dict[str, Any]]] = [
        (e.kind, e.ref, json.loads(e.record_bytes())) for e in rows
    ]
    where = f"event log {scope}"
    found = check_checkpoints(scope, records, [e.link for e in rows], notes)
    if found:
        problems.append(f"{where}: {found}")
        return
    cohort_ids = list(Cohort.objects.filter(kind=scope).values_list("pk", flat=True))
    universes = _universe_markets(cohort_ids)
    for check in (_markets, _money, _identities, _entries, _cohorts, _seals):
        found = check(scope, records, cohort_ids, universes)
        if found:
            problems.append(f"{where}: {found}")
            return


def _markets(scope, records, cohort_ids, universes) -> str | None:
    last: dict[int, dict] = {}
    for kind, _ref, rec in records:
        if kind == EventLogEntry.Kind.RESOLUTION:
            last[rec["market"]] = rec["to"]
    ids = set(last).union(*universes.values()) if universes else set(last)
    for m in (
        Market.objects.filter(pk__in=ids).order_by("pk").values("pk", "status", "resolved_outcome")
    ):
        to = last.get(m["pk"])
        now = {"status": m["status"], "outcome": m["resolved_outcome"]}
        if to is None:
            if m["status"] in FINAL:
                return (
                    f"market {m['pk']} is {m['status']} {m['resolved_outcome']!r} with no "
                    "resolution in the log (changed outside the application)"
                )
        elif to["status"] in FINAL and now != to:
            return (
                f"market {m['pk']}: its resolution is {now['status']} {now['outcome']!r}, the "
                f"log's last is {to['status']} {to['outcome']!r} (changed outside the application)"
            )
        elif to["status"] not in FINAL and m["status"] in FINAL:
            return (
                f"market {m['pk']} is {m['status']} {m['resolved_outcome']!r} after it was "
                "reopened, with no resolution in the log (changed outside the application)"
            )
    return None


def _money(scope, records, cohort_ids, universes) -> str | None:
    logged = {ref for kind, ref, _ in records if kind == EventLogEntry.Kind.SETTLEMENT}
    stray = (
        LedgerEntry.objects.filter(entry__cohort__kind=scope, kind__in=SETTLEMENT_KINDS)
        .exclude(settlement_id__in=logged)
        .order_by("pk")
        .values_list("pk", "kind", "settlement_id")
        .first()
    )
    if stray is not None:
        return f"ledger row {stray[0]} ({stray[1]}) belongs to no logged settlement"
    unlogged = Settlement.objects.filter(position__entry__cohort__kind=scope).exclude(pk__in=logged)
    first = unlogged.order_by("pk").values_list("pk", flat=True).first()
    if first is not None:
        return f"settlement {first} is not in the log"
    # The pages count only settlements not reversed: a reversal is a logged event too.
    reversals = {rec["settlement"] for kind, _, rec in records if kind == "reversal"}
    silent = (
        Settlement.objects.filter(position__entry__cohort__kind=scope, reversed_at__isnull=False)
        .exclude(pk__in=reversals)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if silent is not None:
        return f"settlement {silent} is reversed with no reversal in the log"
    entries = Entry.objects.filter(cohort__kind=scope).annotate(ledger_sum=Sum("ledger__amount"))
    for pk, cash, ledger in entries.order_by("pk").values_list("pk", "cash", "ledger_sum"):
        # SQLite sums decimals as floating point: back to cents before comparing.
        if ledger is not None and cash != Decimal(ledger).quantize(CENT):
            return f"entry {pk}: cash {cash} is not the sum of its ledger ({ledger})"
    return None


def _latest(records, kind: str, key: str) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for k, _ref, rec in records:
        if k == kind:
            out[rec[key]] = rec["state"]
    return out


def _identities(scope, records, cohort_ids, universes) -> str | None:
    logged = _latest(records, EventLogEntry.Kind.IDENTITY, COMPETITOR)
    sealed = set(
        DecisionDigest.objects.filter(scope=scope).values_list("entry__competitor_id", flat=True)
    )
    now = current_states(COMPETITOR, sealed | set(logged))
    for pk in sorted(sealed | set(logged)):
        if pk not in logged:
            return f"competitor {pk} has sealed decisions and no identity in the log"
        if pk not in now:
            return f"competitor {pk} is missing"
        if now[pk] != logged[pk]:
            slug = Competitor.objects.filter(pk=pk).values_list("slug", flat=True).first()
            return (
                f"competitor {pk} ({slug}): {_differs(logged[pk], now[pk])}: changed without "
                "an identity event"
            )
    return None


def _entry_name(row: Mapping[str, Any]) -> str:
    return f"entry {row['pk']} ({row['competitor__slug']}, cohort {row['cohort_id']})"


def _release_name(release_id: int | None) -> str:
    if release_id is None:
        return "none"
    model = Release.objects.filter(pk=release_id).values_list("model_id", flat=True).first()
    return f"{release_id} ({model})"


def _entries(scope, records, cohort_ids, universes) -> str | None:
    logged = _latest(records, EventLogEntry.Kind.ENTRY, "entry")
    sealed = set(DecisionDigest.objects.filter(scope=scope).values_list("entry_id", flat=True))
    ids = sealed | set(logged)
    called: dict[int, set[int]] = {}
    for entry_id, release_id in (
        Decision.objects.filter(entry_id__in=ids, release_id__isnull=False)
        .values_list("entry_id", "release_id")
        .distinct()
    ):
        called.setdefault(entry_id, set()).add(release_id)
    now = current_states(ENTRY, ids)
    rows = Entry.objects.filter(pk__in=ids).order_by("pk")
    for row in rows.values("pk", "release_id", "cohort_id", "competitor__slug"):
        pk, release = row["pk"], row["release_id"]
        if pk in logged and now.get(pk) != logged[pk]:
            was = (logged[pk].get("release") or {}).get("id")
            if was != release:
                return (
                    f"{_entry_name(row)} runs release {_release_name(release)}, the log's last "
                    f"entry record says {_release_name(was)}: repointed outside the application"
                )
            return f"{_entry_name(row)}: {_differs(logged[pk], now[pk])}: changed without an entry event"
        others = called.get(pk, set()) - {release}
        if others:
            return (
                f"{_entry_name(row)} runs release {_release_name(release)}, but its decisions "
                f"called {_release_name(min(others))}: repointed outside the application"
            )
    return None


def check_checkpoints(scope, records, links, notes) -> str | None:
    """Every stored checkpoint of the scope against the key history and the log."""
    first = SigningKey.objects.order_by("id").values_list("key_id", flat=True).first()
    public = dict(SigningKey.objects.values_list("key_id", "public_key"))
    if first is None:  # an arena that signed before keys had a history: its own key
        first = keys.current_id()
        public[first] = public_key_hex()
    key_events = [
        (n, rec["state"]["key_id"])
        for n, (kind, _ref, rec) in enumerate(records, 1)
        if kind == EventLogEntry.Kind.KEY
    ]
    for kid in (k for _, k in key_events if k not in public):
        return f"a key record names key {kid[:16]}, which is not in the key history"
    newest = 0
    for cp in Checkpoint.objects.filter(scope=scope).order_by("size"):
        name = f"checkpoint {scope}@{cp.size}"
        expected = keys.key_at(key_events, cp.size, first)
        if cp.key_id != expected:
            return (
                f"{name} is signed by key {cp.key_id[:16]}, but the key in force at link "
                f"{cp.size} is {str(expected)[:16]}: a key change that is not in the history"
            )
        body = signed_body(scope, cp.size, cp.head, ts(cp.signed_at) or "")
        if not keys.signature_valid(public[cp.key_id], cp.signature, body):
            return f"{name}: the signature does not verify"
        if cp.size > len(links) or links[cp.size - 1] != cp.head:
            return f"{name}: its head is not link #{cp.size} of the log"
        newest = cp.size
    if newest < len(links) and notes is not None:
        notes.append(
            f"event log {scope}: links {newest + 1}..{len(links)} are not signed yet (after the "
            f"newest checkpoint, {newest})"
        )
    return None


def _cohorts(scope, records, cohort_ids, universes) -> str | None:
    logged = _latest(records, EventLogEntry.Kind.COHORT, COHORT)
    sealed = set(WeekSeal.objects.filter(scope=scope).values_list("cohort_id", flat=True))
    now = current_states(COHORT, sealed | set(logged))
    for pk in sorted(sealed | set(logged)):
        if pk not in logged:
            return f"cohort {pk} is sealed and has no state in the log"
        if pk not in now:
            return f"cohort {pk} is missing"
        if now[pk] != logged[pk]:
            return f"cohort {pk}: {_differs(logged[pk], now[pk])}: changed without a cohort event"
    return None


def _seals(scope, records, cohort_ids, universes) -> str | None:
    logged = {ref for kind, ref, _ in records if kind == EventLogEntry.Kind.SEAL}
    missing = WeekSeal.objects.filter(scope=scope).exclude(pk__in=logged).order_by("pk").first()
    if missing is not None:
        return (
            f"root #{missing.seq} of cohort {missing.cohort_id} week {missing.week} is not in "
            "the log"
        )
    return None


def must_be_sealed(
    cohort: Cohort, week: int, frozen_at: datetime, sealed_weeks: set[int], markets: set[int]
) -> str | None:
    """Why an unsealed week must have been sealed by now (None: it may still be open)."""
    if any(w > week for w in sealed_weeks):
        return f"a later week ({max(sealed_weeks)}) is sealed"
    if markets and Settlement.objects.filter(market_id__in=markets).exists():
        return "a market of its universe has settled"
    grace = timedelta(minutes=getattr(settings, "ARENA_SEAL_GRACE_MINUTES", 60))
    # Only the deployment's own live path keeps wall-clock deadlines (a rehearsal verified under
    # ARENA_SCOPE=rehearsal, on its accelerated clock); replay and demo seal on their own clock.
    if on_live_path(cohort.kind) and frozen_at + grace + DEADLINE_SLACK < clock.now():
        return "its seal deadline has long passed"
    return None
