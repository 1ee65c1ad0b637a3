"""Sealing policy: when a cohort-week's decisions are sealed, amended, and what a root covers.

docs/verification.md is the outsider's description (enough to re-implement a verifier); this
docstring is the maintainer's; the package's docstring (cohorts/seals/__init__.py) lists the
modules beside this one.

Chain: link(n) = sha256(JCS({"format", "type": "link", "seq": n, "prev": link(n-1),
"record": record_hash(n)})), link(0) = the genesis hash (the cohort, its kind and start, the week,
and the frozen universe's content hash), so a chain cannot be moved to another cohort-week.

Sealing rule (when a root is stored):
- A week is sealed with reason "complete" by the transaction right after its last decision
  becomes final (done, failed or skipped): run_decision calls after_decision().
- A week that is not complete is sealed anyway, its unfinished entries as "pending"
  placeholders, at the first of: ARENA_SEAL_GRACE_MINUTES (default 60) after its universe froze
  (live cohorts, by the 10-minute snapshot tick: "deadline"), or the moment any market of its
  universe is about to settle (settle_market calls seal_before_settlement: "settlement"). So no
  payout is ever computed while a week of decisions on that market is unsealed.
- Digests follow entry id order; the root is the link of the last digest.

Amendments: a root is never rewritten. A decision that becomes final after its week was sealed
(a pending entry that finished late, or a failed/skipped decision staff re-ran through the admin
after the seal, or a skipped one the 15-minute catch-up ran again with a different result) is
appended to the same chain as an amendment digest, and a new WeekSeal (seq 2, 3, ...) stores the
new head. Each earlier root stays a valid link of the longer chain, and the superseded record is
kept (its canonical bytes are stored in every digest). Only a pending placeholder or a decision
whose sealed status is failed/skipped and that was claimed again after it was digested can be
amended; a done decision never is, so any change to one makes `arena verify` fail.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet

from cohorts.models import Cohort, Decision, Universe
from cohorts.scope import on_live_path
from cohorts.seals.canonical import FORMAT, canonical, link_hash, pack, record_hash, sha256_hex
from cohorts.seals.events import log_events, sign_all
from cohorts.seals.models import Checkpoint, DecisionDigest, EventLogEntry, StateRecord, WeekSeal
from cohorts.seals.publish import publish_after_commit, publish_pending
from cohorts.seals.records import DecisionRows, Record, Row, genesis_record, pending_record
from cohorts.seals.state import record_first
from core import clock
from core.versions import data_changed

log = logging.getLogger(__name__)

S = Decision.Status
FINAL = (S.DONE, S.FAILED, S.SKIPPED)
# Sealed statuses that a later run may legitimately replace (admin rerun, catch-up of a skip).
RERUNNABLE = (S.FAILED, S.SKIPPED)


# --- sealing a cohort-week --------------------------------------------------------------


def seal_week(cohort_id: int, week: int, *, force: str | None = None) -> WeekSeal | None:
    """Seal the week if it is complete (or `force` gives the reason to seal it anyway), or
    append amendments to a sealed week; None when there is nothing to do or a concurrent
    sealer won the race (its rows stand: the (cohort, week, seq) constraints decide)."""
    try:
        with transaction.atomic():
            return _seal_week(cohort_id, week, force)
    except IntegrityError:
        log.info("week sealed concurrently by another process",
                 extra={"cohort": cohort_id, "week": week})  # fmt: skip
        return None


@dataclass
class _Plan:
    """What one sealing appends: the entries to digest (None: a pending placeholder), after
    which link, and why."""

    chosen: list[tuple[Row, int | None]]
    reason: str
    genesis: str
    prev: str
    seq: int
    amendment: bool


def _seal_week(cohort_id: int, week: int, force: str | None) -> WeekSeal | None:
    cohort = Cohort.objects.get(pk=cohort_id)
    universe = Universe.objects.filter(cohort=cohort, week=week).first()
    if universe is None:
        return None  # nothing was frozen, so nothing was decided
    last_seal = WeekSeal.objects.filter(cohort=cohort, week=week).order_by("-seq").first()
    entries = list(cohort.entries.order_by("id").values("id", "competitor_id", "replicate"))
    decisions: dict[int, Row] = {
        d["entry_id"]: d
        for d in Decision.objects.filter(entry__cohort=cohort, week=week).values(
            "id", "entry_id", "status", "claimed_at"
        )
    }
    if last_seal is None:
        plan = _first_seal(cohort, week, universe, entries, decisions, force)
    else:
        plan = _amendment(cohort, week, last_seal, entries, decisions)
    if plan is None:
        return None
    now = clock.now()
    digests, root = _digests(cohort, week, plan, now)
    DecisionDigest.objects.bulk_create(digests)
    seal = WeekSeal.objects.create(
        cohort=cohort,
        scope=cohort.kind,
        week=week,
        seq=(last_seal.seq + 1) if last_seal else 1,
        count=plan.seq + len(digests),
        root=root,
        genesis=plan.genesis,
        reason=plan.reason,
        format=FORMAT,
        sealed_at=now,
    )
    # The root goes into the scope's event log (a deleted seal then breaks the log), with the
    # cohort's state and its competitors' identities the first time they are sealed.
    log_events(refs={"seal": [seal.pk], "state": record_first(cohort)})
    log.info("week sealed: #%s (%s), root %s", seal.seq, seal.reason, root,
             extra={"cohort": cohort.pk, "week": week, "seal": seal.pk})  # fmt: skip
    data_changed()
    publish_after_commit(seal)
    return seal


def _first_seal(
    cohort: Cohort,
    week: int,
    universe: Universe,
    entries: Sequence[Row],
    decisions: Mapping[int, Row],
    force: str | None,
) -> _Plan | None:
    """Every entry in id order, unless the week is incomplete and nothing forces the seal."""
    final = {e for e, d in decisions.items() if d["status"] in FINAL}
    reason: str
    if all(e["id"] in final for e in entries):
        reason = WeekSeal.Reason.COMPLETE
    elif force is not None:
        reason = force
    else:
        return None
    chosen = [(e, decisions[e["id"]]["id"] if e["id"] in final else None) for e in entries]
    genesis = record_hash(genesis_record(cohort, week, universe.content_hash))
    return _Plan(chosen, reason, genesis, prev=genesis, seq=0, amendment=False)


def _amendment(
    cohort: Cohort,
    week: int,
    last_seal: WeekSeal,
    entries: Sequence[Row],
    decisions: Mapping[int, Row],
) -> _Plan | None:
    chosen: list[tuple[Row, int | None]] = list(_amendable(cohort, week, entries, decisions))
    if not chosen:
        return None
    head = DecisionDigest.objects.filter(cohort=cohort, week=week).order_by("-seq").first()
    genesis = last_seal.genesis
    prev, seq = (head.link, head.seq) if head else (genesis, 0)
    return _Plan(chosen, WeekSeal.Reason.AMENDMENT, genesis, prev, seq, amendment=True)


def _digests(
    cohort: Cohort, week: int, plan: _Plan, now: datetime
) -> tuple[list[DecisionDigest], str]:
    """The plan's digests, chained after plan.prev, and the last link (the new root)."""
    rows = DecisionRows(d for _, d in plan.chosen if d is not None)
    prev, seq = plan.prev, plan.seq
    digests = []
    for entry, decision_id in plan.chosen:
        rec: Record | None
        if decision_id is None:
            rec, state, status = pending_record(cohort.pk, week, entry), "pending", ""
        else:
            rec = rows.record(cohort.pk, week, entry, decision_id)
            state, status = "final", rows.decisions[decision_id]["status"]
        data = canonical(rec)
        seq += 1
        h = sha256_hex(data)
        link = link_hash(prev, h, seq)
        digests.append(
            DecisionDigest(
                cohort=cohort,
                scope=cohort.kind,
                week=week,
                seq=seq,
                entry_id=entry["id"],
                decision_id=decision_id,
                state=state,
                status=status,
                amendment=plan.amendment,
                record=pack(data),
                record_hash=h,
                prev=prev,
                link=link,
                created_at=now,
            )
        )
        prev = link
    return digests, prev


def _amendable(
    cohort: Cohort, week: int, entries: Sequence[Row], decisions: Mapping[int, Row]
) -> list[tuple[Row, int]]:
    """Entries whose decision became final after their latest digest, by the rules above."""
    latest: dict[int, Row] = {}
    for dg in (
        DecisionDigest.objects.filter(cohort=cohort, week=week)
        .order_by("seq")
        .values("entry_id", "state", "status", "record_hash", "created_at")
    ):
        latest[dg["entry_id"]] = dg
    candidates: list[tuple[Row, int, Row]] = []
    for e in entries:
        d, digest = decisions.get(e["id"]), latest.get(e["id"])
        if d is None or digest is None or d["status"] not in FINAL:
            continue
        if digest["state"] == "pending" or (
            digest["status"] in RERUNNABLE and d["claimed_at"] > digest["created_at"]
        ):
            candidates.append((e, d["id"], digest))
    if not candidates:
        return []
    rows = DecisionRows(d for _, d, _ in candidates)
    chosen = []
    for e, decision_id, digest in candidates:
        # A re-run that ended exactly as sealed (a skip skipped again) changes nothing.
        if not rows.sealed_as(cohort.pk, week, e, decision_id, digest["record_hash"]):
            chosen.append((e, decision_id))
    return chosen


def after_decision(decision: Decision) -> WeekSeal | None:
    """run_decision's hook: a decision just became final; seal or amend its week. Never raises:
    the decision stands either way and the snapshot tick seals what this missed."""
    if decision.status not in FINAL:
        return None
    try:
        return seal_week(decision.entry.cohort_id, decision.week)
    except Exception:
        log.exception("sealing after a decision failed; the snapshot tick retries",
                      extra={"decision": decision.pk, "week": decision.week})  # fmt: skip
        return None


def _unsealed_universes() -> QuerySet[Universe]:
    sealed = WeekSeal.objects.filter(cohort=OuterRef("cohort"), week=OuterRef("week"))
    return Universe.objects.filter(~Exists(sealed))


def seal_before_settlement(market_id: int) -> int:
    """Seal every unsealed week whose universe holds the market (settle_market calls this
    first, inside its transaction), so no payout is computed against unsealed decisions."""
    count = 0
    for cohort_id, week, markets in _unsealed_universes().values_list(
        "cohort_id", "week", "markets"
    ):
        if any(item.get("market_id") == market_id for item in markets or []):
            count += seal_week(cohort_id, week, force=WeekSeal.Reason.SETTLEMENT) is not None
    return count


def seal_due(at: datetime | None = None) -> dict[str, int]:
    """The snapshot tick's catch-up: seal complete weeks, live weeks past the grace period,
    and append amendments. Safe to run twice at once (seal_week's constraints decide)."""
    at = at or clock.now()
    grace = timedelta(minutes=getattr(settings, "ARENA_SEAL_GRACE_MINUTES", 60))
    summary = {"sealed": 0, "amended": 0}
    for u in _unsealed_universes().select_related("cohort").order_by("cohort_id", "week"):
        late = on_live_path(u.cohort.kind) and u.frozen_at + grace <= at
        if seal_week(u.cohort_id, u.week, force=WeekSeal.Reason.DEADLINE if late else None):
            summary["sealed"] += 1
    for cohort_id, week in sorted(_amendment_candidates()):
        seal = seal_week(cohort_id, week)
        if seal is not None and seal.reason == WeekSeal.Reason.AMENDMENT:
            summary["amended"] += 1
    return summary


def _amendment_candidates() -> set[tuple[int, int]]:
    """Sealed weeks with a pending placeholder, or a final decision claimed after the last
    seal of its week (a re-run): the only weeks an amendment can come from."""
    weeks = set(
        DecisionDigest.objects.filter(state="pending").values_list("cohort_id", "week").distinct()
    )
    last: dict[tuple[int, int], datetime] = {}
    for cohort_id, week, sealed_at in WeekSeal.objects.values_list(
        "cohort_id", "week", "sealed_at"
    ):
        last[(cohort_id, week)] = max(sealed_at, last.get((cohort_id, week), sealed_at))
    if last:
        oldest = min(last.values())
        for cohort_id, week, claimed_at in Decision.objects.filter(
            status__in=FINAL, claimed_at__gt=oldest
        ).values_list("entry__cohort_id", "week", "claimed_at"):
            week_sealed_at = last.get((cohort_id, week))
            if week_sealed_at is not None and claimed_at > week_sealed_at:
                weeks.add((cohort_id, week))
    return weeks


def upkeep(at: datetime | None = None) -> dict[str, Any]:
    """Everything the snapshot tick does for sealing, each step safe to repeat."""
    summary: dict[str, Any] = seal_due(at)
    summary["events"] = log_events()
    summary["checkpoints"] = sign_all()
    summary["published"] = publish_pending()
    return summary


# --- simulations ---------------------------------------------------------------------------


def delete_sealed(scope: str) -> int:
    """Delete the sealing rows of a simulation scope (replay/demo reset); never live ones."""
    if scope == Cohort.Kind.LIVE:
        raise ValueError("live seals are never deleted")
    n = DecisionDigest.objects.filter(scope=scope).delete()[0]
    n += WeekSeal.objects.filter(scope=scope).delete()[0]
    n += EventLogEntry.objects.filter(scope=scope).delete()[0]
    n += StateRecord.objects.filter(scope=scope).delete()[0]
    n += Checkpoint.objects.filter(scope=scope).delete()[0]
    return n


# --- what exports of derived rows carry ----------------------------------------------------


def cohort_root(cohort_id: int) -> str | None:
    """One hash for the whole cohort: sha256 of JCS of [[week, seq, root], ...] over the latest
    seal of each week (what exports of derived rows - snapshots, scores - carry)."""
    latest: dict[int, WeekSeal] = {}
    for seal in WeekSeal.objects.filter(cohort_id=cohort_id).order_by("week", "seq"):
        latest[seal.week] = seal
    if not latest:
        return None
    return record_hash(
        {
            "format": FORMAT,
            "type": "cohort",
            "cohort": cohort_id,
            "weeks": [[w, s.seq, s.root] for w, s in sorted(latest.items())],
        }
    )
