"""Score runs in the seal: every finished run appends a `score_run` record to its scope's event
log (cohorts/seals/events.py), in the transaction that marks it done, stating what it read and
what it published:

    inputs     a digest of the forecasts and market resolutions it scored (`inputs_digest`)
    published  a digest of the run row and its leaderboard rows as stored (`published_part`)

`arena verify` rebuilds the published part from the database (the reader registered in
scoring/apps.py) and names the run, and the leaderboard row, that was edited afterwards. The
inputs part is the run's statement of what it read: the database has moved on since (later
forecasts, corrections), so it is compared by its hash in the chain, not with today's rows.

The forms, in the fixed forms of cohorts/seals/canonical.py (docs/verification.md, "score_run"):

    run row     {"id", "scope", "status", "as_of", "finished_at", "methodology_version",
                 "methodology_hash", "engine_version", "n_forecasts", "n_resolved", "details"}
    row         {"id", "run", "cohort", "competitor", every figure column, "details"}; money
                as strings with the column's places, a non-finite float as its name
    rows_digest H([H(row) for each row in id order])
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from cohorts.seals.canonical import FORMAT, canonical, dec, record_hash, sha256_hex, ts
from cohorts.seals.events import Event, KindReader, append_event
from cohorts.seals.models import EventLogEntry
from scoring.load import ScopeData
from scoring.models import LeaderboardRow, ScoreRun

KIND = EventLogEntry.Kind.SCORE_RUN
RUN_FIELDS = (
    "id", "scope", "status", "as_of", "finished_at", "methodology_version", "methodology_hash",
    "engine_version", "n_forecasts", "n_resolved", "details",
)  # fmt: skip
FLOAT_FIELDS = (
    "brier", "brier_lo", "brier_hi", "log_score", "skill_vs_market", "skill_lo", "skill_hi",
    "bss_vs_half", "return_pct", "return_lo", "return_hi", "win_rate",
    "implied_confidence_brier", "cost_per_resolved",
)  # fmt: skip
INT_FIELDS = ("rank", "n_forecasts", "n_resolved", "tokens", "required_n")
MONEY_FIELDS = {"pnl": 2, "realized_pnl": 2, "unrealized_pnl": 2, "cost_usd": 4}
ROW_FIELDS = (
    "id", "run_id", "cohort_id", "competitor_id", *INT_FIELDS, *FLOAT_FIELDS, *MONEY_FIELDS,
    "provisional", "details",
)  # fmt: skip
NO_TIME = datetime.min.replace(tzinfo=UTC)  # verify reads records, not where they sort
PREFIX = 16  # hex digits of each row's hash kept in the record: enough to name the edited row


def _float(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return repr(float(value))  # "nan", "inf", "-inf": JSON has no such numbers


def run_row(run: dict[str, Any]) -> dict[str, Any]:
    out = {k: run[k] for k in RUN_FIELDS}
    out["as_of"], out["finished_at"] = ts(run["as_of"]), ts(run["finished_at"])
    return out


def row_record(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row["id"],
        "run": row["run_id"],
        "cohort": row["cohort_id"],
        "competitor": row["competitor_id"],
        "provisional": row["provisional"],
        "details": row["details"],
    }
    out.update({k: row[k] for k in INT_FIELDS})
    out.update({k: _float(row[k]) for k in FLOAT_FIELDS})
    out.update({k: dec(row[k], places) for k, places in MONEY_FIELDS.items()})
    return out


def published_parts(run_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """run id -> the published part of its record, from the rows as stored now (two queries;
    rows streamed, so a scope's whole history of runs is never held at once)."""
    runs = {r["id"]: r for r in ScoreRun.objects.filter(pk__in=list(run_ids)).values(*RUN_FIELDS)}
    hashes: dict[int, list[tuple[int, str]]] = {pk: [] for pk in runs}
    rows = LeaderboardRow.objects.filter(run_id__in=list(runs)).order_by("run_id", "id")
    for row in rows.values(*ROW_FIELDS).iterator(chunk_size=2000):
        hashes[row["run_id"]].append((row["id"], record_hash(row_record(row))))
    return {pk: _published(runs[pk], hashes[pk]) for pk in runs}


def _published(run: dict[str, Any], hashes: list[tuple[int, str]]) -> dict[str, Any]:
    return {
        "run": record_hash(run_row(run)),
        "rows": len(hashes),
        "rows_digest": sha256_hex(canonical([h for _, h in hashes])),
        "row_hashes": {str(pk): h[:PREFIX] for pk, h in hashes},
    }


def inputs_digest(data: ScopeData) -> dict[str, Any]:
    """What the run scored: every forecast it read as [decision, entry, market, outcome,
    probability], in (decision id, forecast id) order, and every market it read as [id, status
    as known at as_of, resolved outcome or null], in id order."""
    f = data.forecasts
    forecasts = list(
        zip(
            f["decision"].tolist(),
            f["entry"].tolist(),
            f["market"].tolist(),
            f["outcome"].tolist(),
            np.asarray(f["p"], dtype=float).tolist(),
        )
    )
    markets = [
        [pk, m.status, m.resolved_outcome if m.status == "resolved" else None]
        for pk, m in sorted(data.markets.items())
    ]
    body = {"forecasts": forecasts, "markets": markets}
    return {
        "forecasts": len(forecasts),
        "markets": len(markets),
        "digest": sha256_hex(canonical(body)),
    }


def run_record(run_id: int, inputs: dict[str, Any]) -> dict[str, Any]:
    run = ScoreRun.objects.filter(pk=run_id).values(*RUN_FIELDS).get()
    return {
        "format": FORMAT,
        "type": "score_run",
        "run": run_id,
        "scope": run["scope"],
        "as_of": ts(run["as_of"]),
        "finished_at": ts(run["finished_at"]),
        "methodology": {"version": run["methodology_version"], "hash": run["methodology_hash"]},
        "engine_version": run["engine_version"],
        "inputs": inputs,
        "published": published_parts([run_id])[run_id],
    }


def seal_run(run_id: int, scope: str, inputs: dict[str, Any]) -> None:
    """Append the finished run's record to its scope's log (inside the run's transaction)."""
    append_event(scope, KIND, run_id, run_record(run_id, inputs))


# --- what `arena verify` reads --------------------------------------------------------------


def _read(refs: list[int]) -> dict[int, Event]:
    """Each logged run's record with its published part rebuilt from today's rows. A run gone
    from the database is pruned (scoring.services.prune_runs keeps the latest runs) when a later
    logged run of its scope is still there; the latest logged run of a scope must be."""
    logged = {
        e.ref: (e.scope, e.record_bytes())
        for e in EventLogEntry.objects.filter(kind=KIND, ref__in=refs)
    }
    parts = published_parts(logged)
    newest_kept: dict[str, int] = {}
    for pk in parts:
        scope = logged[pk][0]
        newest_kept[scope] = max(newest_kept.get(scope, 0), pk)
    out: dict[int, Event] = {}
    for pk, (scope, data) in logged.items():
        record = json.loads(data)
        if pk in parts:
            record = {**record, "published": parts[pk]}
        elif pk > newest_kept.get(scope, 0):
            continue  # missing, and no later run replaced it: reported as a missing row
        out[pk] = Event(scope, record, NO_TIME)
    return out


def _explain(ref: int, logged: dict, live: dict) -> str:
    was, now = logged.get("published") or {}, live.get("published") or {}
    if was.get("run") != now.get("run"):
        return f"score run {ref}: the run row (its figures' details, status or times) was edited"
    before, after = was.get("row_hashes") or {}, now.get("row_hashes") or {}
    for pk in sorted(set(before) | set(after), key=int):
        if pk not in after:
            return f"score run {ref}: leaderboard row {pk} was deleted"
        if pk not in before:
            return f"score run {ref}: leaderboard row {pk} was added"
        if before[pk] != after[pk]:
            return f"score run {ref}: leaderboard row {pk} was edited ({_row_name(int(pk))})"
    if was.get("rows_digest") != now.get("rows_digest"):
        return f"score run {ref}: its leaderboard rows do not match their sealed digest"
    return f"score run {ref}: its record does not match its seal"


def _row_name(pk: int) -> str:
    row = LeaderboardRow.objects.filter(pk=pk).values("cohort_id", "competitor__slug").first()
    if row is None:
        return "gone"
    where = f"cohort {row['cohort_id']}" if row["cohort_id"] else "all cohorts"
    return f"{where}, {row['competitor__slug']}"


READER = KindReader(read=_read, explain=_explain)
