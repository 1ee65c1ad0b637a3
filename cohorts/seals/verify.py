"""`arena verify`: recompute every sealed record and chain, from the database or from an export.

Two sources, one set of checks (check_chain): the seal export (`/exports/seals.json`, `arena export
--what seals`) carries, per cohort-week, the genesis object, every digest with its record and the
seals; `verify --export FILE` needs nothing else. From the database, the chains and roots are
recomputed from the digests' hashes, the latest record of every entry is rebuilt from the live
rows (decisions, LLM calls, forecasts, trades, ledger) and hashed, and the stored records the live
rows cannot stand in for (superseded by an amendment, pending placeholders) are checked against
their hashes; an edit made after sealing, through the ORM or raw SQL, is named with the first
field that differs from the sealed copy.

Beyond the records, the live state is compared with each scope's event log (cohorts/seals/checks.py:
outcomes, money, identities, cohort states, week roots, weeks that must have been sealed), and
with `published` what was saved earlier (cohorts/seals/published.py: week roots, event-log heads,
signed checkpoints). The export itself is built by cohorts/seals/export.py.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from agents import signing
from cohorts.models import Cohort, Decision, Universe
from cohorts.seals.canonical import (
    AGENT_FORMAT,
    FORMAT,
    RECORD_FORMATS,
    canonical,
    link_hash,
    record_hash,
    sha256_hex,
)
from cohorts.seals.checks import check_scope, must_be_sealed
from cohorts.seals.current import check_current
from cohorts.seals.events import READERS, event_records
from cohorts.seals.export import EXPORT_FORMAT, EXPORT_FORMATS, export_chunks  # noqa: F401
from cohorts.seals.export_checks import export_ring, unlogged_roots, unsigned_tail
from cohorts.seals.keys import check_history, database_ring, history, key_dict
from cohorts.seals.models import DecisionDigest, EventLogEntry, WeekSeal
from cohorts.seals.published import compare
from cohorts.seals.records import (
    DecisionRows,
    events_genesis_record,
    genesis_record,
    pending_record,
)
from cohorts.seals.sealing import FINAL, RERUNNABLE
from cohorts.seals.workers import in_workers, workers_for
from cohorts.universe import content_hash


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    weeks: int = 0
    digests: int = 0
    seals: int = 0
    events: int = 0
    published: int = 0
    checkpoints: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def merge(self, other: Report) -> None:
        """Add a report of one part (a cohort) checked on its own."""
        self.problems += other.problems
        self.notes += other.notes
        self.weeks += other.weeks
        self.digests += other.digests
        self.seals += other.seals
        self.events += other.events

    def summary(self) -> str:
        saved = f", {self.checkpoints} signed checkpoints" if self.checkpoints else ""
        if self.published:
            saved += f", {self.published} saved roots, heads and checkpoints"
        return (
            f"{self.weeks} sealed weeks, {self.seals} roots, {self.digests} decision records, "
            f"{self.events} event-log records{saved}"
        )


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first place two JSON values differ ("" when they are equal)."""
    if type(a) is not type(b) and not (isinstance(a, int | float) and isinstance(b, int | float)):
        return path or "(the record)"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}".lstrip(".")
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found.lstrip(".")
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path} (length {len(a)} sealed, {len(b)} now)".lstrip(".")
        return None
    return None if a == b else (path.lstrip(".") or "(the record)")


# --- the shared checks ----------------------------------------------------------------------


def check_chain(report: Report, where: str, genesis: str, links: list[dict], seals_: list[dict]):
    """links: dicts with seq, record (bytes or None), record_hash, prev, link, name; ordered by
    seq. seals_: dicts with seq, count, root, genesis (optional). Problems name the record."""
    prev = genesis
    for i, row in enumerate(links, 1):
        name = f"{where}: {row['name']} (chain #{row['seq']})"
        if row["seq"] != i:
            report.problems.append(f"{name}: out of order, expected chain #{i}")
            return False
        if "record" not in row:
            pass  # the caller checks this record itself (against the live rows)
        elif row["record"] is None:
            report.problems.append(f"{name}: the record is missing")
            return False
        elif sha256_hex(row["record"]) != row["record_hash"]:
            report.problems.append(f"{name}: the record does not match its sealed hash")
            return False
        if row["prev"] != prev or link_hash(prev, row["record_hash"], i) != row["link"]:
            report.problems.append(f"{name}: the chain is broken at this link")
            return False
        prev = row["link"]
    last_count = 0
    for j, seal in enumerate(seals_, 1):
        name = f"{where}: root #{seal['seq']}"
        if seal["seq"] != j:
            report.problems.append(f"{name}: out of order, expected root #{j}")
            return False
        count = seal["count"]
        if count < last_count or count > len(links):
            report.problems.append(f"{name}: covers {count} links, the chain has {len(links)}")
            return False
        expected = links[count - 1]["link"] if count else genesis
        if seal["root"] != expected or seal.get("genesis", genesis) != genesis:
            report.problems.append(f"{name}: the root {seal['root'][:16]} is not the chain's")
            return False
        last_count = count
        report.seals += 1
    return True


def check_records(report: Report, where: str, cohort_id: int, week: int, links: list[dict]):
    """What the records say about themselves: they belong here, the week's seal lists each entry
    once in ascending order, and an amendment keeps every LLM call the sealed record had."""
    seen_first = [row["entry"] for row in links if not row["amendment"]]
    if seen_first != sorted(set(seen_first)):
        report.problems.append(f"{where}: the sealed entries are not in ascending entry order")
        return False
    last_calls: dict[int, list] = {}
    for row in links:
        rec, name = row.get("parsed"), f"{where}: {row['name']}"
        if rec is None:
            continue  # checked against the live rows instead (verify from the database)
        entry = (rec.get("entry") or {}).get("id")
        if rec.get("cohort") != cohort_id or rec.get("week") != week or entry != row["entry"]:
            report.problems.append(f"{name}: the record belongs to another cohort, week or entry")
            return False
        decision = (rec.get("decision") or {}).get("id")
        if rec.get("type") == "decision" and decision != row["decision"]:
            report.problems.append(f"{name}: the record is of decision {decision}")
            return False
        why = _format_problem(rec) or signature_problem(rec)
        if why:
            report.problems.append(f"{name}: {why}")
            return False
        calls = rec.get("llm_calls")
        if calls is not None:
            earlier = last_calls.get(entry, [])
            if calls[: len(earlier)] != earlier:
                report.problems.append(f"{name}: LLM calls of the sealed record are missing")
                return False
            last_calls[entry] = calls
    return True


def _format_problem(rec: dict) -> str:
    """ "" when the record has a known format and the fields that format requires: a /2
    decision names its release (of the entry's competitor), a /1 record has none."""
    fmt = rec.get("format")
    if fmt not in RECORD_FORMATS:
        return f"unknown record format {fmt!r}"
    has_release = "release" in rec
    if rec.get("type") != "decision" or fmt == FORMAT:
        return "a release in a record of format arena-seal/1" if has_release else ""
    release = rec.get("release")
    if not has_release:
        return f"an {fmt} decision record without its release"
    if (fmt == AGENT_FORMAT) != isinstance(rec.get("submissions"), list):
        return f"submissions belong to an {AGENT_FORMAT} record, and only there"
    competitor = (rec.get("entry") or {}).get("competitor")
    if release is not None and (
        not isinstance(release, dict) or release.get("competitor") != competitor
    ):
        return "the release is not of the entry's competitor"
    return ""


def signature_problem(rec: dict) -> str:
    """ "" unless an outside agent's sealed submission says its signature verified and it does
    not (or the other way round): checked from the record alone (agents/signing.py)."""
    for sub in rec.get("submissions") or []:
        if not isinstance(sub, dict) or not sub.get("public_key"):
            continue
        bound = sub.get("signed_as") or {}
        try:
            body = base64.b64decode(sub.get("body_base64") or "", validate=True)
            signed = signing.message(bound["competitor"], bound["cohort"], bound["week"], body)
        except (binascii.Error, KeyError, TypeError, ValueError):
            return f"submission {sub.get('id')}: its body or signed_as is malformed"
        if (bound.get("cohort"), bound.get("week")) != (rec.get("cohort"), rec.get("week")):
            return f"submission {sub.get('id')} was signed for another cohort or week"
        verified = signing.verify(sub["public_key"], sub.get("signature") or "", signed) is None
        if verified != bool(sub.get("signature_verified")):
            state = "verifies" if verified else "does not verify"
            return f"submission {sub.get('id')}: its signature {state}, unlike its record says"
    return ""


# --- from the database ----------------------------------------------------------------------


def verify_database(cohort_id: int | None = None, published: list | None = None) -> Report:
    """Everything from the database; with `published` (saved documents), against them too."""
    report = Report()
    cohorts = Cohort.objects.order_by("id")
    if cohort_id is not None:
        cohorts = cohorts.filter(pk=cohort_id)
    ids_kinds = list(cohorts.values_list("pk", "kind"))
    scopes = {kind for _, kind in ids_kinds}
    if cohort_id is None:
        scopes |= set(EventLogEntry.objects.values_list("scope", flat=True).distinct())
    # Cohorts first, then each scope's log: the order of the report, whoever checks which.
    parts: list[tuple[str, Any]] = [("cohort", pk) for pk, _ in ids_kinds]
    parts += [("events", scope) for scope in sorted(scopes)]
    digests = DecisionDigest.objects.filter(cohort_id__in=[pk for pk, _ in ids_kinds])
    workers = workers_for(len(parts), records=digests.count())
    for part in in_workers(_part_report, parts, workers):
        report.merge(part)
    found, warnings = check_history([key_dict(k) for k in history()], "the key history")
    report.problems += found
    report.notes += warnings
    if published is not None and not report.problems:
        roots = {
            (c, w, q): r
            for c, w, q, r in WeekSeal.objects.values_list("cohort_id", "week", "seq", "root")
        }
        links: dict[str, list[str]] = defaultdict(list)
        for scope, link in EventLogEntry.objects.order_by("scope", "seq").values_list(
            "scope", "link"
        ):
            links[scope].append(link)
        report.published += compare(
            report.problems, published, roots, links, database_ring(), "the database"
        )
    return report


def _part_report(part: tuple[str, Any]) -> Report:
    """One cohort's or one scope's event-log checks on a report of their own (run in a worker
    process when there are many: cohorts/seals/workers.py)."""
    report = Report()
    what, key = part
    if what == "cohort":
        _verify_cohort(report, Cohort.objects.get(pk=key))
    else:
        _verify_events(report, key)
    return report


def _digest_links(digests: list[DecisionDigest]) -> list[dict]:
    """Chain rows without their stored bytes: the latest record of each entry is checked against
    the live rows (cheaper, and what matters); the others are read and checked in _stored()."""
    return [
        {
            "seq": dg.seq,
            "record_hash": dg.record_hash,
            "prev": dg.prev,
            "link": dg.link,
            "entry": dg.entry_id,
            "decision": dg.decision_id,
            "amendment": dg.amendment,
            "name": _digest_name(dg.decision_id, dg.entry_id, dg.state),
        }
        for dg in digests
    ]


def _digest_name(decision_id, entry_id, state) -> str:
    if state == "pending" or decision_id is None:
        return f"pending placeholder of entry {entry_id}"
    return f"decision {decision_id} (entry {entry_id})"


def _stored(report: Report, where: str, dg: DecisionDigest, link: dict) -> dict | None:
    """The digest's stored record, parsed, after checking it against its hash."""
    data = DecisionDigest.objects.filter(pk=dg.pk).values_list("record", flat=True).get()
    data = zlib.decompress(bytes(data))
    if sha256_hex(data) != dg.record_hash:
        report.problems.append(
            f"{where}: {link['name']} (chain #{dg.seq}): the stored record does not match its "
            "sealed hash"
        )
        return None
    return json.loads(data)


def _verify_cohort(report: Report, cohort: Cohort) -> None:
    universes = {u.week: u for u in Universe.objects.filter(cohort=cohort)}
    by_week_seals: dict[int, list] = defaultdict(list)
    for seal in WeekSeal.objects.filter(cohort=cohort).order_by("week", "seq"):
        by_week_seals[seal.week].append(seal)
    by_week_digests: dict[int, list] = defaultdict(list)
    for dg in DecisionDigest.objects.filter(cohort=cohort).defer("record").order_by("week", "seq"):
        by_week_digests[dg.week].append(dg)
    entries = list(cohort.entries.order_by("id").values("id", "competitor_id", "replicate"))
    for week in sorted(set(by_week_seals) | set(by_week_digests)):
        where = f"cohort {cohort.pk} week {week}"
        universe = universes.get(week)
        if universe is None:
            report.problems.append(f"{where}: the frozen universe is missing")
            return
        if content_hash(universe.markets, universe.forecast_sample) != universe.content_hash:
            report.problems.append(f"{where}: universe {universe.pk} does not match its hash")
            return
        genesis = record_hash(genesis_record(cohort, week, universe.content_hash))
        digests = by_week_digests[week]
        links = _digest_links(digests)
        seal_dicts = [
            {"seq": s.seq, "count": s.count, "root": s.root, "genesis": s.genesis}
            for s in by_week_seals[week]
        ]
        report.weeks += 1
        report.digests += len(links)
        if not seal_dicts:
            report.problems.append(f"{where}: decision records without a root")
            return
        if not check_chain(report, where, genesis, links, seal_dicts):
            return
        # Superseded and pending records are read from the seal rows (the live rows have moved
        # on); every amended entry's records are parsed for the LLM-call prefix check.
        amended = {dg.entry_id for dg in digests if dg.amendment}
        latest = {dg.entry_id: dg.pk for dg in digests}
        for dg, link in zip(digests, links):
            if dg.entry_id in amended or latest[dg.entry_id] != dg.pk or dg.state == "pending":
                link["parsed"] = _stored(report, where, dg, link)
                if link["parsed"] is None:
                    return
        if not check_records(report, where, cohort.pk, week, links):
            return
        if not _compare_live(report, where, cohort, week, entries, digests, links):
            return
    sealed_weeks = set(by_week_seals)
    for week in sorted(set(universes) - sealed_weeks):
        u = universes[week]
        markets = {m.get("market_id") for m in u.markets or [] if m.get("market_id")}
        why = must_be_sealed(cohort, week, u.frozen_at, sealed_weeks, markets)
        if why:
            report.problems.append(f"cohort {cohort.pk} week {week}: no seal, but {why}")
            return
        report.notes.append(f"cohort {cohort.pk} week {week}: not sealed yet")


def _compare_live(report, where, cohort, week, entries, digests, links) -> bool:
    """The latest record of each entry against the live rows."""
    latest: dict[int, tuple[DecisionDigest, dict]] = {}
    for dg, link in zip(digests, links):
        latest[dg.entry_id] = (dg, link)
    entry_by_id = {e["id"]: e for e in entries}
    sealed_entries = {dg.entry_id for dg in digests}
    if set(entry_by_id) != sealed_entries:
        extra = sorted(set(entry_by_id) ^ sealed_entries)
        report.problems.append(f"{where}: entries {extra} differ from the sealed entry list")
        return False
    live_decisions = {
        d["entry_id"]: d
        for d in Decision.objects.filter(entry__cohort=cohort, week=week).values(
            "id", "entry_id", "status", "claimed_at"
        )
    }
    rows = DecisionRows(dg.decision_id for dg, _ in latest.values() if dg.decision_id)
    for entry_id in sorted(latest):
        dg, link = latest[entry_id]
        entry = entry_by_id[entry_id]
        live = live_decisions.get(entry_id)
        name = f"{where}: {link['name']}"
        if dg.state == "pending":
            if record_hash(pending_record(cohort.pk, week, entry)) != dg.record_hash:
                report.problems.append(f"{name}: the entry no longer matches its seal")
                return False
            if live is not None and live["status"] in FINAL:
                report.notes.append(f"{name}: final now, awaiting its amendment")
            continue
        if live is None or live["id"] != dg.decision_id:
            report.problems.append(f"{name}: the decision row is missing or replaced")
            return False
        if dg.decision_id not in rows.decisions:
            report.problems.append(f"{name}: the decision row is missing or replaced")
            return False
        if rows.sealed_as(cohort.pk, week, entry, dg.decision_id, dg.record_hash):
            why = signature_problem(rows.record(cohort.pk, week, entry, dg.decision_id) or {})
            if why:
                report.problems.append(f"{name}: {why}")
                return False
            continue
        rerun = dg.status in RERUNNABLE and (
            live["status"] not in FINAL or live["claimed_at"] > dg.created_at
        )
        if rerun:
            report.notes.append(f"{name}: re-run after sealing, awaiting its amendment")
            continue
        sealed = link.get("parsed") or _stored(report, where, dg, link)
        if sealed is None:
            return False
        # Rebuilt in the sealed record's own format, so the difference named is a fact's.
        fmt = sealed.get("format") if sealed.get("format") in RECORD_FORMATS else FORMAT
        now = rows.record(cohort.pk, week, entry, dg.decision_id, fmt)
        path = first_difference(sealed, json.loads(canonical(now)))
        report.problems.append(f"{name}: does not match its seal: {path} differs")
        return False
    return True


def _verify_events(report: Report, scope: str) -> None:
    rows = list(EventLogEntry.objects.filter(scope=scope).order_by("seq"))
    where = f"event log {scope}"
    links = [
        {
            "seq": e.seq,
            "record": e.record_bytes(),
            "record_hash": e.record_hash,
            "prev": e.prev,
            "link": e.link,
            "name": f"{e.kind} {e.ref}",
        }
        for e in rows
    ]
    genesis = record_hash(events_genesis_record(scope))
    report.events += len(links)
    if not check_chain(report, where, genesis, links, []):
        return
    by_kind: dict[str, list[EventLogEntry]] = defaultdict(list)
    for e in rows:
        by_kind[e.kind].append(e)
    live = {kind: event_records(kind, [e.ref for e in es]) for kind, es in by_kind.items()}
    for e, link in zip(rows, links):
        found = live[e.kind].get(e.ref)
        name = f"{where}: {link['name']} (chain #{e.seq})"
        if found is None:
            report.problems.append(f"{name}: the row is missing")
            return
        record = found.as_logged(e.record_hash)
        if record_hash(record) != e.record_hash:
            sealed, now = json.loads(e.record_bytes()), json.loads(canonical(record))
            reader = READERS.get(e.kind)
            if reader is not None and reader.explain is not None:
                report.problems.append(f"{name}: {reader.explain(e.ref, sealed, now)}")
                return
            path = first_difference(sealed, now)
            report.problems.append(f"{name}: does not match its seal: {path} differs")
            return
    check_scope(report.problems, scope, rows, report.notes)


# --- from an export ---------------------------------------------------------------------------


class ExportFormatError(ValueError):
    """The file is not a seal export this verifier understands."""


def verify_export(doc: dict, published: Any = None) -> Report:
    """Every check that needs no database: records against hashes, chains, roots, the export's
    own signed checkpoints, and (with `published`: saved /api/seals responses or checkpoints,
    cohorts/seals/published.py) what was saved earlier."""
    if not isinstance(doc, dict) or doc.get("format") not in EXPORT_FORMATS:
        raise ExportFormatError(f"not a seal export (expected format {EXPORT_FORMAT!r})")
    if doc.get("seal_format") != FORMAT:
        raise ExportFormatError(f"unknown seal format {doc.get('seal_format')!r}")
    report = Report()
    roots: dict[tuple[int, int, int], str] = {}
    cohorts = doc.get("cohorts") or []
    # The workers are forked after the parse: each reads its cohorts from the inherited document.
    records = sum(len(w.get("digests") or []) for c in cohorts for w in c.get("weeks") or [])
    workers = workers_for(len(cohorts), database=False, records=records)
    parts = in_workers(
        lambda i: _export_cohort(cohorts[i]), range(len(cohorts)), workers, database=False
    )
    for part, part_roots in parts:
        report.merge(part)
        roots.update(part_roots)
        if report.problems:
            return report
    for log in doc.get("event_logs") or []:
        where = f"event log {log['scope']}"
        links = [
            {
                "seq": e["seq"],
                "record": None if e["record"] is None else canonical(e["record"]),
                "record_hash": e["record_hash"],
                "prev": e["prev"],
                "link": e["link"],
                "name": f"{e['kind']} {e['ref']}",
            }
            for e in log.get("entries") or []
        ]
        report.events += len(links)
        if not check_chain(report, where, record_hash(log["genesis"]), links, []):
            return report
    links_now = {
        log["scope"]: [e["link"] for e in log.get("entries") or []]
        for log in doc.get("event_logs") or []
    }
    ring = export_ring(doc, report.problems, report.notes)
    if report.problems:
        return report
    # Saved copies first: against them a rollback or a rewrite is named as such.
    if published is not None:
        docs = published if isinstance(published, list) else [published]
        report.published = compare(report.problems, docs, roots, links_now, ring, "the export")
        if report.problems:
            return report
    own = [{"checkpoints": doc.get("checkpoints") or []}]
    report.checkpoints = compare(report.problems, own, roots, links_now, ring, "the export")
    for check in (unsigned_tail, unlogged_roots, check_current):
        found = check(doc) if not report.problems else None
        if found:
            report.problems.append(found)
    return report


def _export_cohort(cohort: dict) -> tuple[Report, dict[tuple[int, int, int], str]]:
    """One exported cohort's chains, roots and records, on a report of its own."""
    report = Report()
    roots: dict[tuple[int, int, int], str] = {}
    for week in cohort.get("weeks") or []:
        where = f"cohort {cohort['id']} week {week['week']}"
        genesis = week["genesis"]
        if genesis.get("cohort") != cohort["id"] or genesis.get("week") != week["week"]:
            report.problems.append(f"{where}: the genesis belongs to another cohort-week")
            return report, roots
        links = [
            {
                "seq": d["seq"],
                "record": None if d["record"] is None else canonical(d["record"]),
                "parsed": d["record"],
                "record_hash": d["record_hash"],
                "prev": d["prev"],
                "link": d["link"],
                "entry": d["entry"],
                "decision": d["decision"],
                "amendment": d["amendment"],
                "name": _digest_name(d["decision"], d["entry"], d["state"]),
            }
            for d in week.get("digests") or []
        ]
        report.weeks += 1
        report.digests += len(links)
        if not check_chain(report, where, record_hash(genesis), links, week["seals"]):
            return report, roots
        if not check_records(report, where, cohort["id"], week["week"], links):
            return report, roots
        for s in week["seals"]:
            roots[(cohort["id"], week["week"], s["seq"])] = s["root"]
    return report, roots
