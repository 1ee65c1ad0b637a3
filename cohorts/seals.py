"""Sealing: canonical records, SHA-256 chains per cohort-week, week roots, and the event log.

docs/verification.md is the outsider's description (enough to re-implement a verifier); this
docstring is the maintainer's.

Canonical form (format "arena-seal/1"): a record is a JSON value serialised by RFC 8785 (JSON
Canonicalization Scheme): object keys sorted by UTF-16 code units, no whitespace, strings with
only the mandatory escapes and UTF-8 otherwise, numbers as ECMAScript prints them (1.0 -> "1",
1e-7 -> "1e-7"). Values are put into fixed forms before that: money and other Decimals are
strings with the column's places ("100.00", shares and prices 6 places), times are UTC strings
"YYYY-MM-DDTHH:MM:SS.ffffffZ", lists are ordered by id (LLM calls by attempt). Any JCS library
reproduces the bytes; the SHA-256 of those bytes is the record hash.

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

Skipped decisions are recorded without the prompt and times of the attempt (only the entry,
decision id, status and reason), because the catch-up re-tries them every 15 minutes and an
identical skip must not change the record.

Event log: resolution changes (every source) and settlements/reversals form one chain per scope
(live, replay, demo), appended in the transaction that writes them (receivers/settlement) and
caught up by the snapshot tick for anything missed.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from json.encoder import encode_basestring as _quote  # JSON string, only mandatory escapes
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from cohorts.models import (
    Cohort,
    Decision,
    Forecast,
    LedgerEntry,
    LLMCall,
    Settlement,
    Trade,
    Universe,
)
from cohorts.seal_models import DecisionDigest, EventLogEntry, WeekSeal
from cohorts.seal_publish import publish_after_commit, publish_pending
from core import clock
from core.versions import data_changed
from markets.models import Market, ResolutionChange

log = logging.getLogger(__name__)

FORMAT = "arena-seal/1"
S = Decision.Status
FINAL = (S.DONE, S.FAILED, S.SKIPPED)
# Sealed statuses that a later run may legitimately replace (admin rerun, catch-up of a skip).
RERUNNABLE = (S.FAILED, S.SKIPPED)
SCOPE_OF_SOURCE = {
    Market.Source.POLYMARKET: Cohort.Kind.LIVE,
    Market.Source.FORECASTBENCH: Cohort.Kind.REPLAY,
    Market.Source.DEMO: Cohort.Kind.DEMO,
}
_EXP_LIMIT = 2**53


# --- canonical JSON (RFC 8785) ------------------------------------------------------------


def canonical(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value (dict/list/str/int/float/bool/None)."""
    return _enc(value).encode("utf-8", "surrogatepass")


def _enc(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v) if -_EXP_LIMIT < v < _EXP_LIMIT else es_number(float(v))
    if isinstance(v, float):
        return es_number(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, list | tuple):
        return "[" + ",".join(_enc(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(_quote(k) + ":" + _enc(v[k]) for k in keys) + "}"
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def es_number(x: float) -> str:
    """ECMAScript Number::toString of a finite double (what JCS prescribes for numbers).

    Python's repr gives the same shortest round-trip digits; only the layout differs."""
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("NaN and infinities are not JSON")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    s = "".join(map(str, digits)).rstrip("0")
    exp += len(digits) - len(s)  # dropped trailing zeros move into the exponent
    k, n = len(s), exp + len(s)  # value = 0.s * 10**n
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    e = n - 1
    mantissa = s if k == 1 else s[0] + "." + s[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(record: dict) -> str:
    return sha256_hex(canonical(record))


def link_hash(prev: str, rec_hash: str, seq: int) -> str:
    return record_hash(
        {"format": FORMAT, "type": "link", "seq": seq, "prev": prev, "record": rec_hash}
    )


def ts(value: datetime | None) -> str | None:
    if value is None:
        return None
    # isoformat with a fixed timespec is the same text as strftime(...%fZ), several times faster.
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def dec(value, places: int) -> str | None:
    if value is None:
        return None
    return format(Decimal(value).quantize(Decimal(1).scaleb(-places)), "f")


def pack(data: bytes) -> bytes:
    # Level 1: prompts compress ~5x at a third of the default level's time, and sealing runs
    # inside the decision path.
    return zlib.compress(data, 1)


# --- records ---------------------------------------------------------------------------


def genesis_record(cohort: Cohort, week: int, universe_hash: str) -> dict:
    return {
        "format": FORMAT,
        "type": "genesis",
        "cohort": cohort.pk,
        "kind": cohort.kind,
        "week_start": ts(cohort.week_start),
        "week": week,
        "universe_hash": universe_hash,
    }


def events_genesis_record(scope: str) -> dict:
    return {"format": FORMAT, "type": "genesis", "log": "events", "scope": scope}


DECISION_FIELDS = (
    "id",
    "entry_id",
    "status",
    "action",
    "decided_at",
    "finished_at",
    "reasoning",
    "parsed",
    "validation_errors",
    "hold_reason",
    "error",
    "universe_hash",
    "prompt_version",
    "prompt_sha256",
    "system_prompt",
    "user_prompt",
    "forecast_sample",
    "cash_before",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "latency_ms",
    "claimed_at",
)
CALL_FIELDS = (
    "id",
    "decision_id",
    "attempt",
    "phase",
    "url",
    "request",
    "raw_response",
    "http_status",
    "error",
    "error_kind",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cost_usd",
    "cost_source",
    "latency_ms",
    "served_model",
    "generation_id",
    "finish_reason",
    "started_at",
)


class DecisionRows:
    """Everything a set of decisions' records need, read in five queries."""

    def __init__(self, decision_ids: Iterable[int]):
        ids = sorted(set(decision_ids))
        self.decisions = {
            d["id"]: d for d in Decision.objects.filter(pk__in=ids).values(*DECISION_FIELDS)
        }
        self.calls: dict[int, list[dict]] = defaultdict(list)
        for c in (
            LLMCall.objects.filter(decision_id__in=ids)
            .order_by("attempt", "id")
            .values(*CALL_FIELDS)
        ):
            self.calls[c["decision_id"]].append(c)
        self.forecasts: dict[int, list[dict]] = defaultdict(list)
        for f in (
            Forecast.objects.filter(decision_id__in=ids)
            .order_by("id")
            .values(
                "id",
                "decision_id",
                "entry_id",
                "market_id",
                "outcome",
                "probability",
                "market_price",
                "source",
                "created_at",
            )
        ):
            self.forecasts[f["decision_id"]].append(f)
        self.trades: dict[int, list[dict]] = defaultdict(list)
        trade_ids = []
        for t in (
            Trade.objects.filter(decision_id__in=ids)
            .order_by("id")
            .values(
                "id",
                "decision_id",
                "entry_id",
                "position_id",
                "position__market_id",
                "position__outcome",
                "side",
                "amount",
                "shares",
                "price",
                "quote",
                "realized_pnl",
                "executed_at",
            )
        ):
            self.trades[t["decision_id"]].append(t)
            trade_ids.append(t["id"])
        self.ledger: dict[int, list[dict]] = defaultdict(list)
        for row in (
            LedgerEntry.objects.filter(trade_id__in=trade_ids)
            .order_by("id")
            .values("id", "trade_id", "entry_id", "kind", "amount", "memo", "created_at")
        ):
            self.ledger[row["trade_id"]].append(row)

    def record(self, cohort_id: int, week: int, entry: dict, decision_id: int) -> dict | None:
        d = self.decisions.get(decision_id)
        if d is None:
            return None
        return decision_record(
            cohort_id,
            week,
            entry,
            d,
            self.calls.get(decision_id, []),
            self.forecasts.get(decision_id, []),
            [(t, self.ledger.get(t["id"], [])) for t in self.trades.get(decision_id, [])],
        )


def _entry_part(entry: dict) -> dict:
    return {
        "id": entry["id"],
        "competitor": entry["competitor_id"],
        "replicate": entry["replicate"],
    }


def pending_record(cohort_id: int, week: int, entry: dict) -> dict:
    return {
        "format": FORMAT,
        "type": "pending",
        "cohort": cohort_id,
        "week": week,
        "entry": _entry_part(entry),
    }


def decision_record(cohort_id, week, entry, d, calls, forecasts, trades) -> dict:
    """The full record of one final decision (see the module docstring for the fixed forms)."""
    base = {
        "format": FORMAT,
        "type": "decision",
        "cohort": cohort_id,
        "week": week,
        "entry": _entry_part(entry),
    }
    if d["status"] == S.SKIPPED:
        # No model saw anything: the attempt's prompt and times would change on every retry.
        base["decision"] = {"id": d["id"], "status": d["status"], "error": d["error"]}
        return base
    base["decision"] = {
        "id": d["id"],
        "entry": d["entry_id"],
        "status": d["status"],
        "action": d["action"],
        "decided_at": ts(d["decided_at"]),
        "finished_at": ts(d["finished_at"]),
        "reasoning": d["reasoning"],
        "parsed": d["parsed"],
        "validation_errors": d["validation_errors"],
        "hold_reason": d["hold_reason"],
        "error": d["error"],
        "universe_hash": d["universe_hash"],
        "prompt_version": d["prompt_version"],
        "prompt_sha256": d["prompt_sha256"],
        "system_prompt": d["system_prompt"],
        "user_prompt": d["user_prompt"],
        "forecast_sample": d["forecast_sample"],
        "cash_before": dec(d["cash_before"], 2),
        "tokens_in": d["tokens_in"],
        "tokens_out": d["tokens_out"],
        "cost_usd": dec(d["cost_usd"], 6),
        "latency_ms": d["latency_ms"],
    }
    base["llm_calls"] = [
        {
            "id": c["id"],
            "attempt": c["attempt"],
            "phase": c["phase"],
            "url": c["url"],
            "request": c["request"],
            "raw_response": c["raw_response"],
            "http_status": c["http_status"],
            "error": c["error"],
            "error_kind": c["error_kind"],
            "prompt_tokens": c["prompt_tokens"],
            "completion_tokens": c["completion_tokens"],
            "reasoning_tokens": c["reasoning_tokens"],
            "cost_usd": dec(c["cost_usd"], 6),
            "cost_source": c["cost_source"],
            "latency_ms": c["latency_ms"],
            "served_model": c["served_model"],
            "generation_id": c["generation_id"],
            "finish_reason": c["finish_reason"],
            "started_at": ts(c["started_at"]),
        }
        for c in calls
    ]
    base["forecasts"] = [
        {
            "id": f["id"],
            "entry": f["entry_id"],
            "market": f["market_id"],
            "outcome": f["outcome"],
            "probability": f["probability"],
            "market_price": f["market_price"],
            "source": f["source"],
            "created_at": ts(f["created_at"]),
        }
        for f in forecasts
    ]
    base["trades"] = [
        {
            "id": t["id"],
            "entry": t["entry_id"],
            "position": t["position_id"],
            "market": t["position__market_id"],
            "outcome": t["position__outcome"],
            "side": t["side"],
            "amount": dec(t["amount"], 2),
            "shares": dec(t["shares"], 6),
            "price": dec(t["price"], 6),
            "quote": t["quote"],
            "realized_pnl": dec(t["realized_pnl"], 2),
            "executed_at": ts(t["executed_at"]),
            "ledger": [
                {
                    "id": row["id"],
                    "entry": row["entry_id"],
                    "kind": row["kind"],
                    "amount": dec(row["amount"], 2),
                    "memo": row["memo"],
                    "created_at": ts(row["created_at"]),
                }
                for row in ledger
            ],
        }
        for t, ledger in trades
    ]
    return base


# --- sealing a cohort-week --------------------------------------------------------------


def is_sealed(cohort_id: int, week: int) -> bool:
    return WeekSeal.objects.filter(cohort_id=cohort_id, week=week).exists()


def seal_week(cohort_id: int, week: int, *, force: str | None = None) -> WeekSeal | None:
    """Seal the week if it is complete (or `force` gives the reason to seal it anyway), or
    append amendments to a sealed week; None when there is nothing to do or a concurrent
    sealer won the race (its rows stand: the (cohort, week, seq) constraints decide)."""
    try:
        with transaction.atomic():
            return _seal_week(cohort_id, week, force)
    except IntegrityError:
        log.info("cohort %s week %s: sealed concurrently by another process", cohort_id, week)
        return None


def _seal_week(cohort_id: int, week: int, force: str | None) -> WeekSeal | None:
    cohort = Cohort.objects.get(pk=cohort_id)
    universe = Universe.objects.filter(cohort=cohort, week=week).first()
    if universe is None:
        return None  # nothing was frozen, so nothing was decided
    entries = list(cohort.entries.order_by("id").values("id", "competitor_id", "replicate"))
    decisions = {
        d["entry_id"]: d
        for d in Decision.objects.filter(entry__cohort=cohort, week=week).values(
            "id", "entry_id", "status", "claimed_at"
        )
    }
    head = DecisionDigest.objects.filter(cohort=cohort, week=week).order_by("-seq").first()
    last_seal = WeekSeal.objects.filter(cohort=cohort, week=week).order_by("-seq").first()
    if last_seal is None:
        final = {e for e, d in decisions.items() if d["status"] in FINAL}
        complete = all(e["id"] in final for e in entries)
        if not complete and force is None:
            return None
        reason = WeekSeal.Reason.COMPLETE if complete else force
        chosen = [(e, decisions[e["id"]]["id"] if e["id"] in final else None) for e in entries]
        genesis = record_hash(genesis_record(cohort, week, universe.content_hash))
        prev, seq, amendment = genesis, 0, False
    else:
        chosen = _amendable(cohort, week, entries, decisions)
        if not chosen:
            return None
        reason, genesis = WeekSeal.Reason.AMENDMENT, last_seal.genesis
        prev, seq = (head.link, head.seq) if head else (genesis, 0)
        amendment = True
    rows = DecisionRows(d for _, d in chosen if d is not None)
    now = clock.now()
    digests = []
    for entry, decision_id in chosen:
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
                amendment=amendment,
                record=pack(data),
                record_hash=h,
                prev=prev,
                link=link,
                created_at=now,
            )
        )
        prev = link
    DecisionDigest.objects.bulk_create(digests)
    seal = WeekSeal.objects.create(
        cohort=cohort,
        scope=cohort.kind,
        week=week,
        seq=(last_seal.seq + 1) if last_seal else 1,
        count=seq,
        root=prev,
        genesis=genesis,
        reason=reason,
        format=FORMAT,
        sealed_at=now,
    )
    log.info("sealed cohort %s week %s #%s (%s): %s", cohort.pk, week, seal.seq, reason, seal.root)
    data_changed()
    publish_after_commit(seal)
    return seal


def _amendable(cohort, week, entries, decisions) -> list[tuple[dict, int]]:
    """Entries whose decision became final after their latest digest, by the rules above."""
    latest: dict[int, dict] = {}
    for dg in (
        DecisionDigest.objects.filter(cohort=cohort, week=week)
        .order_by("seq")
        .values("entry_id", "state", "status", "record_hash", "created_at")
    ):
        latest[dg["entry_id"]] = dg
    chosen = []
    candidates = []
    for e in entries:
        d, dg = decisions.get(e["id"]), latest.get(e["id"])
        if d is None or dg is None or d["status"] not in FINAL:
            continue
        if dg["state"] == "pending" or (
            dg["status"] in RERUNNABLE and d["claimed_at"] > dg["created_at"]
        ):
            candidates.append((e, d["id"], dg))
    if not candidates:
        return []
    rows = DecisionRows(d for _, d, _ in candidates)
    for e, decision_id, dg in candidates:
        # A re-run that ended exactly as sealed (a skip skipped again) changes nothing.
        if record_hash(rows.record(cohort.pk, week, e, decision_id)) != dg["record_hash"]:
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
        log.exception("sealing after decision %s failed; the snapshot tick retries", decision.pk)
        return None


def _unsealed_universes():
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
        late = u.cohort.kind == Cohort.Kind.LIVE and u.frozen_at + grace <= at
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
    last = {}
    for cohort_id, week, sealed_at in WeekSeal.objects.values_list(
        "cohort_id", "week", "sealed_at"
    ):
        last[(cohort_id, week)] = max(sealed_at, last.get((cohort_id, week), sealed_at))
    if last:
        oldest = min(last.values())
        for cohort_id, week, claimed_at in Decision.objects.filter(
            status__in=FINAL, claimed_at__gt=oldest
        ).values_list("entry__cohort_id", "week", "claimed_at"):
            sealed_at = last.get((cohort_id, week))
            if sealed_at is not None and claimed_at > sealed_at:
                weeks.add((cohort_id, week))
    return weeks


def upkeep(at: datetime | None = None) -> dict:
    """Everything the snapshot tick does for sealing, each step safe to repeat."""
    summary: dict[str, Any] = seal_due(at)
    summary["events"] = log_events()
    summary["published"] = publish_pending()
    return summary


# --- the event log --------------------------------------------------------------------------


def resolution_record(rc: dict) -> dict:
    return {
        "format": FORMAT,
        "type": "resolution",
        "id": rc["id"],
        "market": rc["market_id"],
        "source": rc["source"],
        "changed_by": rc["changed_by__username"],
        "changed_at": ts(rc["changed_at"]),
        "from": {"status": rc["from_status"], "outcome": rc["from_outcome"]},
        "to": {"status": rc["to_status"], "outcome": rc["to_outcome"]},
        "reason": rc["reason"],
    }


def _ledger_part(rows: list[dict]) -> list[dict]:
    return [
        {
            "id": r["id"],
            "entry": r["entry_id"],
            "kind": r["kind"],
            "amount": dec(r["amount"], 2),
            "memo": r["memo"],
            "created_at": ts(r["created_at"]),
        }
        for r in rows
    ]


def settlement_record(s: dict, ledger: list[dict]) -> dict:
    return {
        "format": FORMAT,
        "type": "settlement",
        "id": s["id"],
        "market": s["market_id"],
        "position": s["position_id"],
        "entry": s["position__entry_id"],
        "kind": s["kind"],
        "outcome": s["outcome"],
        "shares": dec(s["shares"], 6),
        "cost_basis": dec(s["cost_basis"], 2),
        "payout": dec(s["payout"], 2),
        "settled_at": ts(s["settled_at"]),
        "ledger": _ledger_part([r for r in ledger if r["kind"] != LedgerEntry.Kind.REVERSAL]),
    }


def reversal_record(s: dict, ledger: list[dict]) -> dict:
    return {
        "format": FORMAT,
        "type": "reversal",
        "settlement": s["id"],
        "reversed_at": ts(s["reversed_at"]),
        "ledger": _ledger_part([r for r in ledger if r["kind"] == LedgerEntry.Kind.REVERSAL]),
    }


RC_FIELDS = (
    "id",
    "market_id",
    "market__source",
    "source",
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


def settlement_ledger(settlement_ids: Iterable[int]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for row in (
        LedgerEntry.objects.filter(settlement_id__in=list(settlement_ids))
        .order_by("id")
        .values("id", "settlement_id", "entry_id", "kind", "amount", "memo", "created_at")
    ):
        out[row["settlement_id"]].append(row)
    return out


def event_records(kind: str, refs: Iterable[int]) -> dict[int, tuple[str, dict, datetime]]:
    """ref -> (scope, record, event time) for the rows as they are in the database now."""
    refs = list(refs)
    out = {}
    if kind == EventLogEntry.Kind.RESOLUTION:
        for rc in ResolutionChange.objects.filter(pk__in=refs).values(*RC_FIELDS):
            scope = SCOPE_OF_SOURCE.get(rc["market__source"], Cohort.Kind.LIVE)
            out[rc["id"]] = (scope, resolution_record(rc), rc["changed_at"])
        return out
    rows = list(Settlement.objects.filter(pk__in=refs).values(*SETTLEMENT_FIELDS))
    ledger = settlement_ledger(s["id"] for s in rows)
    for s in rows:
        scope = s["position__entry__cohort__kind"]
        if kind == EventLogEntry.Kind.SETTLEMENT:
            out[s["id"]] = (scope, settlement_record(s, ledger[s["id"]]), s["settled_at"])
        elif s["reversed_at"] is not None:
            out[s["id"]] = (scope, reversal_record(s, ledger[s["id"]]), s["reversed_at"])
    return out


_KIND_ORDER = {
    EventLogEntry.Kind.RESOLUTION: 0,
    EventLogEntry.Kind.REVERSAL: 1,
    EventLogEntry.Kind.SETTLEMENT: 2,
}


def _unlogged(market_id: int | None) -> dict[str, list[int]]:
    def logged(kind):
        return EventLogEntry.objects.filter(kind=kind, ref=OuterRef("pk"))

    rcs = ResolutionChange.objects.filter(~Exists(logged(EventLogEntry.Kind.RESOLUTION)))
    settled = Settlement.objects.filter(~Exists(logged(EventLogEntry.Kind.SETTLEMENT)))
    reversed_ = Settlement.objects.filter(reversed_at__isnull=False).filter(
        ~Exists(logged(EventLogEntry.Kind.REVERSAL))
    )
    if market_id is not None:
        rcs, settled, reversed_ = (
            qs.filter(market_id=market_id) for qs in (rcs, settled, reversed_)
        )
    return {
        EventLogEntry.Kind.RESOLUTION: list(rcs.values_list("pk", flat=True)),
        EventLogEntry.Kind.SETTLEMENT: list(settled.values_list("pk", flat=True)),
        EventLogEntry.Kind.REVERSAL: list(reversed_.values_list("pk", flat=True)),
    }


def log_events(market_id: int | None = None) -> int:
    """Append every resolution change, settlement and reversal not yet in its scope's log (of
    one market, or all); returns how many. Called inside the writing transaction (a savepoint
    here), so the log entry commits with the row; a lost race is retried, and whatever still
    fails is left to the snapshot tick."""
    for _attempt in range(3):
        try:
            with transaction.atomic():
                return _log_events(market_id)
        except IntegrityError:
            continue  # another process appended to the same scope first: read the head again
    log.warning("event log: could not append for market %s; the snapshot tick retries", market_id)
    return 0


def _log_events(market_id: int | None) -> int:
    pending = _unlogged(market_id)
    items = []
    for kind, refs in pending.items():
        for ref, (scope, rec, when) in event_records(kind, refs).items():
            items.append((scope, when, _KIND_ORDER[kind], ref, kind, rec))
    if not items:
        return 0
    items.sort(key=lambda i: (i[0], i[1], i[2], i[3]))
    now = clock.now()
    rows = []
    by_scope: dict[str, list] = defaultdict(list)
    for item in items:
        by_scope[item[0]].append(item)
    for scope, scoped in by_scope.items():
        head = EventLogEntry.objects.filter(scope=scope).order_by("-seq").first()
        if head is None:
            prev, seq = record_hash(events_genesis_record(scope)), 0
        else:
            prev, seq = head.link, head.seq
        for _, _, _, ref, kind, rec in scoped:
            data = canonical(rec)
            seq += 1
            h = sha256_hex(data)
            link = link_hash(prev, h, seq)
            rows.append(
                EventLogEntry(
                    scope=scope,
                    seq=seq,
                    kind=kind,
                    ref=ref,
                    record=pack(data),
                    record_hash=h,
                    prev=prev,
                    link=link,
                    created_at=now,
                )
            )
            prev = link
    EventLogEntry.objects.bulk_create(rows)
    data_changed()  # /api/seals shows the log heads
    return len(rows)


# --- simulations ---------------------------------------------------------------------------


def delete_sealed(scope: str) -> int:
    """Delete the sealing rows of a simulation scope (replay/demo reset); never live ones."""
    if scope == Cohort.Kind.LIVE:
        raise ValueError("live seals are never deleted")
    n = DecisionDigest.objects.filter(scope=scope).delete()[0]
    n += WeekSeal.objects.filter(scope=scope).delete()[0]
    n += EventLogEntry.objects.filter(scope=scope).delete()[0]
    return n


# --- reads (pages, API, exports) -----------------------------------------------------------


def latest_digest(decision_id: int) -> DecisionDigest | None:
    return (
        DecisionDigest.objects.filter(decision_id=decision_id)
        .defer("record")
        .order_by("-seq")
        .first()
    )


def cohort_seals(cohort_id: int) -> list[WeekSeal]:
    return list(WeekSeal.objects.filter(cohort_id=cohort_id).order_by("week", "seq"))


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
