"""The records that are sealed: what each kind of record holds, read from the live rows.

Every record is a JSON object in the fixed forms of cohorts/seals/canonical.py (money and other
Decimals as strings with the column's places, times as UTC "...Z" strings, lists ordered by id,
LLM calls by attempt), so its canonical bytes and hash depend on the facts alone. Kinds:

    genesis     link 0 of a cohort-week chain (cohort, kind, start, week, universe hash), or of
                a scope's event log; a chain cannot be moved to another cohort-week or scope
    decision    one final decision with its LLM calls, forecasts, trades and their ledger rows,
                and (format /2) the release it called: model id, provider, endpoint, params,
                context and structured-output settings, prices, knowledge cutoff; (format /3,
                an outside agent's decision) the release's declared agent version and the
                submissions that made the decision: body (base64, byte for byte), received
                time, token prefix, signature, the key it was checked with, and the verdict
    pending     the placeholder of an entry whose decision was not final when its week sealed
    resolution  one ResolutionChange (every source: upstream, staff, replay, demo)
    settlement  one Settlement with its payout or refund ledger rows
    reversal    a staff reversal of a settlement with its reversal ledger rows
    seal        a week's root as stored (the event log lists every WeekSeal of its scope, so a
                deleted week seal breaks the log and a saved checkpoint)
    identity    a competitor's identity (slug, display name, model id, provider, endpoint) as
                the application recorded it in a scope: when first sealed, and on every change
    cohort_state  a cohort's state (kind, status, start, decision weeks, balance, methodology)
    entry       an entry (cohort, competitor, replicate) and the release it is pinned to
    key         the signing key in force in a scope's log from this record on (the first key
                or a rotation, with the previous key's endorsement or none)

A skipped decision is recorded without the prompt and times of the attempt (only the entry,
decision id, status and reason): the catch-up retries skips every 15 minutes, and an identical
skip must not change the record.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from agents.models import Release
from cohorts.llm_calls import FIELDS as LLM_CALL_FIELDS
from cohorts.llm_calls import call_dict
from cohorts.models import AgentSubmission, Cohort, Decision, Forecast, LedgerEntry, LLMCall, Trade
from cohorts.seals.canonical import (
    AGENT_FORMAT,
    DECISION_FORMAT,
    FORMAT,
    RESOLUTION_FORMAT,
    dec,
    record_hash,
    ts,
)
from markets.models import staff_pseudonym

Row = Mapping[str, Any]  # one `.values()` row
Record = dict[str, Any]

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
    "release_id",
)
RELEASE_FIELDS = (
    "id",
    "competitor_id",
    "number",
    "model_id",
    "provider",
    "base_url",
    "params",
    "context_tokens",
    "structured_output",
    "price_in_per_m",
    "price_out_per_m",
    "knowledge_cutoff",
    "agent_version",
    "competitor__slug",
)
# The submissions that made a decision (the first valid answer, or the tries that failed);
# refusals before a body was judged (a bad signature, the deadline) are audit rows, not sealed.
SEALED_SUBMISSIONS = (
    AgentSubmission.Outcome.INVALID,
    AgentSubmission.Outcome.ACCEPTED,
    AgentSubmission.Outcome.FINAL_INVALID,
)
SUBMISSION_FIELDS = (
    "id",
    "decision_id",
    "received_at",
    "token_prefix",
    "content_type",
    "body",
    "body_bytes",
    "signature",
    "public_key",
    "signature_verified",
    "outcome",
    "http_status",
    "problems",
)
CALL_FIELDS = ("id", "decision_id", *LLM_CALL_FIELDS)
FORECAST_FIELDS = (
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
TRADE_FIELDS = (
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
LEDGER_FIELDS = ("id", "entry_id", "kind", "amount", "memo", "created_at")


def _usd6(value: Decimal | None) -> str | None:
    return dec(value, 6)


def genesis_record(cohort: Cohort, week: int, universe_hash: str) -> Record:
    return {
        "format": FORMAT,
        "type": "genesis",
        "cohort": cohort.pk,
        "kind": cohort.kind,
        "week_start": ts(cohort.week_start),
        "week": week,
        "universe_hash": universe_hash,
    }


def events_genesis_record(scope: str) -> Record:
    return {"format": FORMAT, "type": "genesis", "log": "events", "scope": scope}


# --- decisions --------------------------------------------------------------------------------


class DecisionRows:
    """Everything a set of decisions' records need, read in six queries."""

    def __init__(self, decision_ids: Iterable[int]):
        ids = sorted(set(decision_ids))
        self.decisions: dict[int, Row] = {
            d["id"]: d for d in Decision.objects.filter(pk__in=ids).values(*DECISION_FIELDS)
        }
        self.calls: dict[int, list[Row]] = defaultdict(list)
        calls = LLMCall.objects.filter(decision_id__in=ids).order_by("attempt", "id")
        for c in calls.values(*CALL_FIELDS):
            self.calls[c["decision_id"]].append(c)
        self.forecasts: dict[int, list[Row]] = defaultdict(list)
        forecasts = Forecast.objects.filter(decision_id__in=ids).order_by("id")
        for f in forecasts.values(*FORECAST_FIELDS):
            self.forecasts[f["decision_id"]].append(f)
        self.trades: dict[int, list[Row]] = defaultdict(list)
        for t in Trade.objects.filter(decision_id__in=ids).order_by("id").values(*TRADE_FIELDS):
            self.trades[t["decision_id"]].append(t)
        trade_ids = [t["id"] for rows in self.trades.values() for t in rows]
        self.ledger: dict[int, list[Row]] = defaultdict(list)
        ledger = LedgerEntry.objects.filter(trade_id__in=trade_ids).order_by("id")
        for row in ledger.values("trade_id", *LEDGER_FIELDS):
            self.ledger[row["trade_id"]].append(row)
        self.submissions: dict[int, list[Row]] = defaultdict(list)
        submissions = AgentSubmission.objects.filter(
            decision_id__in=ids, outcome__in=SEALED_SUBMISSIONS
        ).order_by("id")
        for sub in submissions.values(*SUBMISSION_FIELDS):
            self.submissions[sub["decision_id"]].append(sub)
        release_ids = {d["release_id"] for d in self.decisions.values()} - {None}
        self.releases: dict[int, Row] = {
            r["id"]: r for r in Release.objects.filter(pk__in=release_ids).values(*RELEASE_FIELDS)
        }

    def record(
        self, cohort_id: int, week: int, entry: Row, decision_id: int, fmt: str | None = None
    ) -> Record | None:
        """The decision's record in `fmt`; by default /2 for a decision that names its release
        and /1 for one that names none (made before releases, or by hand). A record sealed in
        one format is rebuilt in that format to compare it with its seal."""
        d = self.decisions.get(decision_id)
        if d is None:
            return None
        release = self.releases.get(d["release_id"]) if d["release_id"] is not None else None
        submissions = self.submissions.get(decision_id, [])
        if fmt is None:
            fmt = DECISION_FORMAT if d["release_id"] is not None else FORMAT
            fmt = AGENT_FORMAT if submissions else fmt
        return decision_record(
            cohort_id,
            week,
            entry,
            d,
            self.calls.get(decision_id, []),
            self.forecasts.get(decision_id, []),
            [(t, self.ledger.get(t["id"], [])) for t in self.trades.get(decision_id, [])],
            release=release,
            fmt=fmt,
            submissions=submissions,
        )

    def sealed_as(
        self, cohort_id: int, week: int, entry: Row, decision_id: int, sealed_hash: str
    ) -> bool:
        """Whether the live rows rebuild the sealed record, in whichever format it was sealed
        (the hash covers the format field, so a /2 record never passes as /1)."""
        return any(
            (rec := self.record(cohort_id, week, entry, decision_id, fmt)) is not None
            and record_hash(rec) == sealed_hash
            for fmt in (AGENT_FORMAT, DECISION_FORMAT, FORMAT)
        )


def _entry_part(entry: Row) -> Record:
    return {
        "id": entry["id"],
        "competitor": entry["competitor_id"],
        "replicate": entry["replicate"],
    }


def pending_record(cohort_id: int, week: int, entry: Row) -> Record:
    return {
        "format": FORMAT,
        "type": "pending",
        "cohort": cohort_id,
        "week": week,
        "entry": _entry_part(entry),
    }


def decision_record(
    cohort_id: int,
    week: int,
    entry: Row,
    d: Row,
    calls: list[Row],
    forecasts: list[Row],
    trades: list[tuple[Row, list[Row]]],
    *,
    release: Row | None = None,
    fmt: str = DECISION_FORMAT,
    submissions: list[Row] | None = None,
) -> Record:
    """The full record of one final decision (see the module docstring for the fixed forms)."""
    base: Record = {
        "format": fmt,
        "type": "decision",
        "cohort": cohort_id,
        "week": week,
        "entry": _entry_part(entry),
    }
    if fmt in (DECISION_FORMAT, AGENT_FORMAT):
        base["release"] = release_part(release) if release is not None else None
    if fmt == AGENT_FORMAT:
        if base["release"] is not None and release is not None:
            base["release"]["agent_version"] = release["agent_version"]
        signer = release["competitor__slug"] if release is not None else None
        base["submissions"] = [
            submission_part(sub, signer, cohort_id, week) for sub in submissions or []
        ]
    if d["status"] == Decision.Status.SKIPPED:
        # No model saw anything: the attempt's prompt and times would change on every retry.
        base["decision"] = {"id": d["id"], "status": d["status"], "error": d["error"]}
        return base
    base["decision"] = _decision_part(d)
    base["llm_calls"] = [{"id": c["id"], **call_dict(c, time=ts, money=_usd6)} for c in calls]
    base["forecasts"] = [_forecast_part(f) for f in forecasts]
    base["trades"] = [_trade_part(t, ledger) for t, ledger in trades]
    return base


def release_part(r: Row) -> Record:
    """The release a decision called, as format /2 seals it."""
    cutoff = r["knowledge_cutoff"]
    return {
        "id": r["id"],
        "competitor": r["competitor_id"],
        "number": r["number"],
        "model_id": r["model_id"],
        "provider": r["provider"],
        "endpoint": r["base_url"],
        "params": r["params"],
        "context_tokens": r["context_tokens"],
        "structured_output": r["structured_output"],
        "price_in_per_m": _usd6(r["price_in_per_m"]),
        "price_out_per_m": _usd6(r["price_out_per_m"]),
        "knowledge_cutoff": cutoff.isoformat() if cutoff is not None else None,
    }


def submission_part(sub: Row, competitor: str | None, cohort_id: int, week: int) -> Record:
    """One submission as format /3 seals it. `signed_as` names what the signed bytes bind
    (agents/signing.py), so anyone can rebuild them from the record alone."""
    return {
        "id": sub["id"],
        "received_at": ts(sub["received_at"]),
        "token_prefix": sub["token_prefix"],
        "content_type": sub["content_type"],
        "body_base64": base64.b64encode(bytes(sub["body"])).decode("ascii"),
        "body_bytes": sub["body_bytes"],
        "signed_as": {"competitor": competitor, "cohort": cohort_id, "week": week},
        "signature": sub["signature"],
        "public_key": sub["public_key"],
        "signature_verified": sub["signature_verified"],
        "outcome": sub["outcome"],
        "http_status": sub["http_status"],
        "problems": sub["problems"],
    }


def _decision_part(d: Row) -> Record:
    return {
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
        "cost_usd": _usd6(d["cost_usd"]),
        "latency_ms": d["latency_ms"],
    }


def _forecast_part(f: Row) -> Record:
    return {
        "id": f["id"],
        "entry": f["entry_id"],
        "market": f["market_id"],
        "outcome": f["outcome"],
        "probability": f["probability"],
        "market_price": f["market_price"],
        "source": f["source"],
        "created_at": ts(f["created_at"]),
    }


def _trade_part(t: Row, ledger: list[Row]) -> Record:
    return {
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
        "ledger": _ledger_part(ledger),
    }


def _ledger_part(rows: Iterable[Row]) -> list[Record]:
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


# --- resolutions and settlements (the event log's records) --------------------------------------


def resolution_record(rc: Row, legacy: bool = False) -> Record:
    """A resolution change; staff as a pseudonym ("staff 3", format /4), or with `legacy` as
    format /1 sealed it: by username (how records logged before pseudonyms are rebuilt)."""
    who = rc["changed_by__username"] if legacy else staff_pseudonym(rc["changed_by_id"]) or None
    return {
        "format": FORMAT if legacy else RESOLUTION_FORMAT,
        "type": "resolution",
        "id": rc["id"],
        "market": rc["market_id"],
        "source": rc["source"],
        "changed_by": who,
        "changed_at": ts(rc["changed_at"]),
        "from": {"status": rc["from_status"], "outcome": rc["from_outcome"]},
        "to": {"status": rc["to_status"], "outcome": rc["to_outcome"]},
        "reason": rc["reason"],
    }


def settlement_record(s: Row, ledger: list[Row]) -> Record:
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
        "ledger": _ledger_part(r for r in ledger if r["kind"] != LedgerEntry.Kind.REVERSAL),
    }


def reversal_record(s: Row, ledger: list[Row]) -> Record:
    return {
        "format": FORMAT,
        "type": "reversal",
        "settlement": s["id"],
        "reversed_at": ts(s["reversed_at"]),
        "ledger": _ledger_part(r for r in ledger if r["kind"] == LedgerEntry.Kind.REVERSAL),
    }


def seal_record(s: Row) -> Record:
    return {
        "format": FORMAT,
        "type": "seal",
        "id": s["id"],
        "cohort": s["cohort_id"],
        "week": s["week"],
        "seq": s["seq"],
        "count": s["count"],
        "root": s["root"],
        "genesis": s["genesis"],
        "reason": s["reason"],
        "sealed_at": ts(s["sealed_at"]),
    }


STATE_TYPES = {"competitor": "identity", "cohort": "cohort_state", "entry": "entry", "key": "key"}


def state_record(r: Row) -> Record:
    """An identity, cohort, entry or key record: the StateRecord's state with its subject and
    time."""
    kind = STATE_TYPES[r["subject"]]
    return {
        "format": FORMAT,
        "type": kind,
        "id": r["id"],
        r["subject"]: r["subject_id"],
        "state": r["state"],
        "recorded_at": ts(r["recorded_at"]),
    }
