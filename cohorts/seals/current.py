"""What the site shows now, carried by the seal export (`current`), and its comparison with the
export's own event logs, so an export alone names an edit made outside the application: a
flipped resolution, a renamed competitor, a repointed entry, a cohort moved by hand, a
settlement made or reversed without the application (docs/verification.md, "The export"). `arena verify` makes the same comparison from the
database (cohorts/seals/checks.py); the standard-library verifier re-implements this one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cohorts.models import Entry, Settlement, Universe
from cohorts.seals.canonical import ts
from cohorts.seals.models import EventLogEntry, StateRecord
from cohorts.seals.state import COHORT, COMPETITOR, ENTRY, current_states
from markets.models import Market, ResolutionChange

FINAL = ("resolved", "void")


def current_section(scopes: Iterable[str], cohort_ids: list[int]) -> dict[str, Any]:
    scopes = list(scopes)
    resolutions = EventLogEntry.objects.filter(scope__in=scopes, kind=EventLogEntry.Kind.RESOLUTION)
    market_ids = set(
        ResolutionChange.objects.filter(
            pk__in=resolutions.values_list("ref", flat=True)
        ).values_list("market_id", flat=True)
    )
    for markets in Universe.objects.filter(cohort_id__in=cohort_ids).values_list(
        "markets", flat=True
    ):
        market_ids |= {m.get("market_id") for m in markets or [] if m.get("market_id")}
    recorded = StateRecord.objects.filter(scope__in=scopes)

    def subjects(subject: str) -> set[int]:
        return set(recorded.filter(subject=subject).values_list("subject_id", flat=True))

    entries = Entry.objects.filter(cohort_id__in=cohort_ids)
    entry_ids = subjects(ENTRY) | set(entries.values_list("pk", flat=True))
    competitor_ids = subjects(COMPETITOR) | set(entries.values_list("competitor_id", flat=True))
    cohort_ids_all = subjects(COHORT) | set(cohort_ids)
    return {
        "markets": [
            {"id": m["pk"], "status": m["status"], "outcome": m["resolved_outcome"]}
            for m in Market.objects.filter(pk__in=market_ids)
            .order_by("pk")
            .values("pk", "status", "resolved_outcome")
        ],
        # Settlement records are rebuilt from their rows, so an edited one no longer hashes; what
        # only the site shows is one the log never had, or a reversal it does not hold.
        "settlements": [
            {"id": pk, "reversed_at": ts(reversed_at)}
            for pk, reversed_at in Settlement.objects.filter(
                position__entry__cohort_id__in=cohort_ids
            )
            .order_by("pk")
            .values_list("pk", "reversed_at")
        ],
        "competitors": _states(COMPETITOR, competitor_ids),
        "entries": _states(ENTRY, entry_ids),
        "cohorts": _states(COHORT, cohort_ids_all),
    }


def _states(subject: str, ids: set[int]) -> list[dict[str, Any]]:
    states = current_states(subject, ids)
    return [{"id": pk, "state": states[pk]} for pk in sorted(states)]


def _differs(logged: dict, now: dict) -> str:
    fields = [k for k in sorted(set(logged) | set(now)) if logged.get(k) != now.get(k)]
    return ", ".join(
        f"{k} is {json.dumps(now.get(k))} (logged {json.dumps(logged.get(k))})" for k in fields
    )


def check_current(doc: dict[str, Any]) -> str | None:
    """The first difference between the export's `current` section (and its decision records'
    releases) and the latest records of its event logs."""
    latest: dict[str, dict[int, Any]] = {"resolution": {}, "identity": {}, "entry": {}}
    latest["cohort_state"] = {}
    settled: set[int] = set()
    reversed_: dict[int, Any] = {}
    for log in doc.get("event_logs") or []:
        for e in log.get("entries") or []:
            rec = e.get("record") or {}
            kind = rec.get("type")
            if kind == "settlement":
                settled.add(rec["id"])
            elif kind == "reversal":
                reversed_[rec["settlement"]] = rec["reversed_at"]
            elif kind == "resolution":
                latest["resolution"][rec["market"]] = rec["to"]
            elif kind == "identity":
                latest["identity"][rec["competitor"]] = rec["state"]
            elif kind == "entry":
                latest["entry"][rec["entry"]] = rec["state"]
            elif kind == "cohort_state":
                latest["cohort_state"][rec["cohort"]] = rec["state"]
    found = _releases(doc, latest["entry"])
    current = doc.get("current")
    if found or current is None:
        return found
    for m in current.get("markets") or []:
        to = latest["resolution"].get(m["id"])
        now = {"status": m["status"], "outcome": m["outcome"]}
        if to is None and m["status"] in FINAL:
            return (
                f"market {m['id']} is {m['status']} {m['outcome']!r} with no resolution in the "
                "log (changed outside the application)"
            )
        if to is not None and (to["status"] in FINAL or m["status"] in FINAL) and now != to:
            return (
                f"market {m['id']}: the site shows {m['status']} {m['outcome']!r}, the log's "
                f"last resolution is {to['status']} {to['outcome']!r} (changed outside the "
                "application)"
            )
    for s in current.get("settlements") or []:
        if s["id"] not in settled:
            return (
                f"settlement {s['id']}: the site shows it and the log has no settlement record "
                "(made outside the application)"
            )
        if reversed_.get(s["id"]) != s["reversed_at"]:
            return (
                f"settlement {s['id']}: the site shows it reversed at {s['reversed_at']}, the "
                f"log's reversal at {reversed_.get(s['id'])} (changed outside the application)"
            )
    for what, kind, label in (
        ("competitors", "identity", "competitor"),
        ("entries", "entry", "entry"),
        ("cohorts", "cohort_state", "cohort"),
    ):
        for item in current.get(what) or []:
            logged = latest[kind].get(item["id"])
            if logged is not None and logged != item["state"]:
                return (
                    f"{label} {item['id']}: {_differs(logged, item['state'])}: the site shows "
                    "what the log does not say (changed outside the application)"
                )
    return None


def _releases(doc: dict[str, Any], entries: dict[int, Any]) -> str | None:
    """Every decision record that names its release must name its entry's logged release."""
    for cohort in doc.get("cohorts") or []:
        for week in cohort.get("weeks") or []:
            for d in week.get("digests") or []:
                rec = d.get("record") or {}
                release = rec.get("release")
                entry_id = (rec.get("entry") or {}).get("id")
                logged = entries.get(entry_id) if isinstance(entry_id, int) else None
                if release is None or logged is None or logged.get("release") is None:
                    continue
                if logged["release"]["id"] != release["id"]:
                    return (
                        f"entry {rec['entry']['id']}: its decision {d.get('decision')} called "
                        f"release {release['id']} ({release['model_id']}), the log's entry "
                        f"record says {logged['release']['id']} ({logged['release']['model_id']})"
                    )
    return None
