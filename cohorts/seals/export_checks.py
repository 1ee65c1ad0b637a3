"""The checks of a seal export beyond its chains (cohorts/seals/verify.py): its key history and
the key each log puts in force, an unsigned tail, the week roots against the logs' seal records,
and what the site shows against the logs."""

from __future__ import annotations

from typing import Any

from cohorts.seals.keys import KeyRing, check_history


def export_ring(doc: dict[str, Any], problems: list[str], notes: list[str]) -> KeyRing | None:
    """The export's key history (`signing_keys`; before /3 its one `signing_key`), checked, with
    the key records of its logs; None for an export without keys (/1)."""
    keys = doc.get("signing_keys")
    if keys is None:
        one = doc.get("signing_key")
        if not one:
            return None
        keys = [{"key_id": one["key_id"], "public_key": one["public_key"], "previous": None}]
    found, warnings = check_history(keys, "the export's key history")
    problems += found
    notes += warnings
    if found:
        return None
    by_id = {k["key_id"]: k for k in keys}
    ring = KeyRing.of(keys)
    for log in doc.get("event_logs") or []:
        for e in log.get("entries") or []:
            rec = e.get("record") or {}
            if rec.get("type") != "key":
                continue
            state = rec.get("state") or {}
            if by_id.get(state.get("key_id")) != state:
                problems.append(
                    f"event log {log['scope']}: key record #{e['seq']} names key "
                    f"{str(state.get('key_id'))[:16]}, which is not so in the key history"
                )
                return None
            ring.events.setdefault(log["scope"], []).append((e["seq"], state["key_id"]))
    return ring


def unsigned_tail(doc: dict[str, Any]) -> str | None:
    """A log whose last links no checkpoint of the export signs."""
    if doc.get("format") == "arena-seals-export/1":
        return None  # before checkpoints
    signed: dict[str, int] = {}
    for cp in doc.get("checkpoints") or []:
        signed[cp["scope"]] = max(signed.get(cp["scope"], 0), cp["size"])
    for log in doc.get("event_logs") or []:
        size, top = len(log.get("entries") or []), signed.get(log["scope"], 0)
        if size > top:
            return (
                f"event log {log['scope']}: links {top + 1}..{size} come after the newest "
                f"checkpoint ({top or 'none'}): nothing the arena signed covers them"
            )
    return None


def unlogged_roots(doc: dict[str, Any]) -> str | None:
    """A week root of the export that is not the `seal` record of its scope's log, or a logged
    root of an exported cohort that the export leaves out. The signed log is what ties a week's
    decisions to a checkpoint: without this, a week's records rewritten with its chain and root
    recomputed would pass on an export alone, though the signed log still holds the old root."""
    if doc.get("format") == "arena-seals-export/1":
        return None  # its logs had no seal records
    logged: dict[str, dict[tuple[int, int, int], dict]] = {}
    for log in doc.get("event_logs") or []:
        seals = logged.setdefault(log["scope"], {})
        for e in log.get("entries") or []:
            rec = e.get("record") or {}
            if rec.get("type") == "seal":
                seals[(rec["cohort"], rec["week"], rec["seq"])] = rec
    exported: set[tuple[int, int, int]] = set()
    for cohort in doc.get("cohorts") or []:
        seals = logged.get(cohort["kind"], {})
        for week in cohort.get("weeks") or []:
            for s in week.get("seals") or []:
                key = (cohort["id"], week["week"], s["seq"])
                exported.add(key)
                rec = seals.get(key)
                where = f"cohort {key[0]} week {key[1]}: root #{key[2]}"
                if rec is None:
                    return (
                        f"{where} is not in the event log {cohort['kind']}: nothing the arena "
                        "signed covers it"
                    )
                if (rec["root"], rec["count"], rec["genesis"]) != (
                    s["root"],
                    s["count"],
                    s["genesis"],
                ):
                    return (
                        f"{where} is not the root the event log {cohort['kind']} sealed (seal "
                        f"record #{rec['id']}): the week's records were rewritten"
                    )
    ids = {c["id"] for c in doc.get("cohorts") or []}
    for scope, seals in sorted(logged.items()):
        for key in sorted(k for k in seals if k[0] in ids and k not in exported):
            return (
                f"cohort {key[0]} week {key[1]}: root #{key[2]} is in the event log {scope} but "
                "not in the export: a sealed week was left out"
            )
    return None
