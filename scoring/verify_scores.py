"""Scores checkable from outside: the published leaderboard rows of a score run recomputed from
the exported rows alone (forecasts.json, trades.json, scores.json and, for P/L, return and rank,
snapshots.json), with the scoring engine's own pipeline (scoring/questions.py,
scoring/compute.py, scoring/present.py's ranking), and compared figure by figure.

Pure functions over exported rows (dicts as /exports/ writes them): no query. The exported rows
are turned into the same ScopeData scoring/load.py reads from the database, so every number goes
through the one implementation of the math; this module only rebuilds the inputs and compares.
What it cannot rebuild from the exports it says (`ScoreCheck.notes`) instead of guessing: the
return interval rests on each position's P/L, the cost on the model calls, and the
Diebold-Mariano letters are not in the scores export.

Which run: the latest finished run of each scope in the export (the highest run id, since run
ids grow with time). Which methodology: the run's methodology hash must be the one this code
scores with (core.methodology), since the bootstrap's resamples and seed come from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np

from core.methodology import METHODOLOGY_HASH, version_of_hash
from scoring import metrics
from scoring.compute import bets_won_lost, forecast_scores, money_by_comp
from scoring.load import (
    CENT,
    EntryMoney,
    MarketInfo,
    ScopeData,
    TradeRow,
    known_at,
    shown_price_map,
    status_at,
)
from scoring.models import LeaderboardRow
from scoring.present import rank_rows
from scoring.questions import Questions, build_items, build_questions

TOLERANCE = 1e-12
# Published figures recomputed here: (column, kind). Integers and labels compare exactly.
FLOAT_FIELDS = (
    "brier", "brier_lo", "brier_hi", "log_score", "skill_vs_market", "skill_lo", "skill_hi",
    "win_rate",
)  # fmt: skip
MONEY_FIELDS = ("return_pct", "pnl", "rank")  # with snapshots.json, when it is given
INT_FIELDS = ("n_forecasts", "n_resolved", "provisional", "rank")
NOT_RECOMPUTED = (
    "return_lo, return_hi and cost_usd are not recomputed (they rest on positions and "
    "model calls, which the exports do not carry whole); the Diebold-Mariano letters are not in "
    "the scores export"
)
ALL = "all"


class ScoreExportError(ValueError):
    """Exported rows that cannot be read (a missing column, an unreadable value)."""


@dataclass
class ScoreCheck:
    runs: list[tuple[str, int]] = field(default_factory=list)  # (scope, run id) checked
    rows: int = 0
    figures: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        runs = ", ".join(f"{scope} run {run}" for scope, run in self.runs) or "no run"
        return f"{self.figures} figures of {self.rows} leaderboard rows ({runs})"


def _time(value: Any, what: str) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise ScoreExportError(f"{what}: not a time: {str(value)[:40]!r}") from exc


def _when(value: Any, what: str) -> datetime:
    """A time the row must have."""
    when = _time(value, what)
    if when is None:
        raise ScoreExportError(f"{what} is missing")
    return when


def _float(value: Any) -> float | None:
    if value in (None, ""):
        return None
    return float(value)


def latest_runs(score_rows: Iterable[dict]) -> dict[str, list[dict]]:
    """scope -> the rows of its latest finished run in the export."""
    by_run: dict[tuple[str, int], list[dict]] = {}
    for row in score_rows:
        by_run.setdefault((row["cohort_kind"], int(row["run_id"])), []).append(row)
    latest: dict[str, int] = {}
    for scope, run in by_run:
        latest[scope] = max(run, latest.get(scope, run))
    return {scope: by_run[(scope, run)] for scope, run in sorted(latest.items())}


def _markets(rows: Iterable[dict], as_of: datetime, out: dict[int, MarketInfo]) -> None:
    """MarketInfo for each market the rows name, its status as known at as_of (load.known_at
    and load.status_at). An export from before the resolution_recorded_at column has no such
    key: known_at then falls back to resolved_at, as for a market never recorded."""
    for row in rows:
        market_id = int(row["market_id"])
        outcomes = row.get("market_outcomes")
        seen = out.get(market_id)
        if seen is not None and (seen.outcomes or not outcomes):
            continue
        resolved_at = _time(row.get("resolved_at"), f"market {market_id} resolved_at")
        recorded_at = _time(
            row.get("resolution_recorded_at"), f"market {market_id} resolution_recorded_at"
        )
        known = known_at(recorded_at, resolved_at, as_of)
        status = status_at(row["market_status"], row["resolved_outcome"], known)
        names = [str(o) for o in outcomes or []]
        out[market_id] = MarketInfo(
            "binary" if len(names) == 2 else "multi", names, False, status,
            row["resolved_outcome"] or "", math.nan, math.nan, math.nan,
            resolved_at.timestamp() if resolved_at and known else math.nan, {},
        )  # fmt: skip


def scope_from_export(
    scope: str,
    as_of: datetime,
    forecast_rows: list[dict],
    trade_rows: list[dict],
    slugs: Iterable[str] = (),
    snapshot_rows: list[dict] | None = None,
) -> ScopeData:
    """The ScopeData scoring/load.py would read for this scope at as_of, from exported rows.

    An entry is (cohort, competitor, replicate) (the exports name no entry id); competitors are
    indexed by slug. Neither order changes a figure: every statistic is per competitor, and the
    bootstrap draws markets, the same draws whatever the rows.
    """
    f_rows = [
        r for r in forecast_rows
        if r["cohort_kind"] == scope and _when(r["created_at"], "created_at") <= as_of
    ]  # fmt: skip
    t_rows = [
        r for r in trade_rows
        if r["cohort_kind"] == scope and _when(r["executed_at"], "executed_at") <= as_of
    ]  # fmt: skip
    s_rows = [r for r in snapshot_rows or () if r["cohort_kind"] == scope]
    every = [*f_rows, *t_rows, *s_rows]
    names = sorted({*slugs, *(r["competitor"] for r in every)})
    comp = {slug: i for i, slug in enumerate(names)}
    keys = sorted({(int(r["cohort_id"]), r["competitor"], int(r["replicate"])) for r in every})
    entry = {key: i + 1 for i, key in enumerate(keys)}

    def entry_of(r: dict) -> int:
        return entry[(int(r["cohort_id"]), r["competitor"], int(r["replicate"]))]

    markets: dict[int, MarketInfo] = {}
    _markets(f_rows, as_of, markets)
    _markets(t_rows, as_of, markets)
    # scoring/load.py reads forecasts in (decision, id) order.
    f_rows.sort(key=lambda r: (int(r["decision_id"]), int(r["forecast_id"])))
    times = [_when(r["created_at"], "created_at") for r in f_rows]
    forecasts = {
        "entry": np.asarray([entry_of(r) for r in f_rows], dtype=np.int64),
        "decision": np.asarray([int(r["decision_id"]) for r in f_rows], dtype=np.int64),
        "week": np.asarray([int(r["week"]) for r in f_rows], dtype=np.int64),
        "market": np.asarray([int(r["market_id"]) for r in f_rows], dtype=np.int64),
        "outcome": np.asarray([r["outcome"] for r in f_rows], dtype=object),
        "p": np.asarray([float(r["probability"]) for r in f_rows], dtype=float),
        "m": np.asarray(
            [math.nan if (v := _float(r["market_price"])) is None else v for r in f_rows],
            dtype=float,
        ),
        "t": np.asarray([t.timestamp() for t in times], dtype=float),
    }
    t_rows.sort(key=lambda r: (_when(r["executed_at"], "executed_at"), int(r["trade_id"])))
    trades = [
        TradeRow(
            entry_of(r), r["decision_id"], r["side"], Decimal(str(r["amount"])),
            Decimal(str(r["price"])), _when(r["executed_at"], "executed_at"),
            int(r["market_id"]), r["outcome"], int(r["trade_id"]),
        )  # fmt: skip
        for r in t_rows
    ]
    # (cohort, week) -> market -> outcome -> price shown, multi-outcome markets (load.py's shown).
    shown: dict[tuple[int, int], dict[int, dict[str, float]]] = {}
    for r in f_rows:
        if r.get("shown_prices") and len(markets[int(r["market_id"])].outcomes) > 2:
            week = shown.setdefault((int(r["cohort_id"]), int(r["week"])), {})
            week[int(r["market_id"])] = shown_price_map(r["shown_prices"])
    initial, money = _money(s_rows, as_of, entry_of)
    cohorts = sorted({k[0] for k in keys})
    return ScopeData(
        scope=scope,
        as_of=as_of,
        cohorts={c: {} for c in cohorts},
        competitors=[(i, slug, slug) for i, slug in enumerate(names)],
        entries={
            "id": np.asarray([entry[k] for k in keys], dtype=np.int64),
            "cohort": np.asarray([k[0] for k in keys], dtype=np.int64),
            "comp": np.asarray([comp[k[1]] for k in keys], dtype=np.int64),
            "initial": np.asarray([initial.get(entry[k], 0.0) for k in keys], dtype=float),
        },
        forecasts=forecasts,
        markets=markets,
        decisions={},
        trades=trades,
        money=money,
        settlements={},
        market_pnl={},
        usage={},
        shown=shown,
    )


def _money(
    rows: list[dict], as_of: datetime, entry_of: Callable[[dict], int]
) -> tuple[dict[int, float], dict[int, EntryMoney]]:
    """Each entry's starting cash, and its money at as_of from its latest snapshot then (entries
    with none then are left out: the run computed theirs from the ledger)."""
    initial: dict[int, float] = {}
    latest: dict[int, tuple[datetime, dict]] = {}
    for r in rows:
        e = entry_of(r)
        initial[e] = float(Decimal(str(r["initial_balance"])))
        ts = _when(r["ts"], "ts")
        if ts <= as_of and (e not in latest or latest[e][0] < ts):
            latest[e] = (ts, r)
    money = {
        e: EntryMoney(
            Decimal(str(r["cash"])), Decimal(str(r["total"])), Decimal(str(r["realized_pnl"])),
            Decimal(str(r["unrealized_pnl"])), "snapshot",
        )  # fmt: skip
        for e, (_, r) in latest.items()
    }
    return initial, money


def _differs(published: Any, recomputed: float | int | Decimal | None, exact: bool) -> bool:
    if recomputed is not None and isinstance(recomputed, float) and not math.isfinite(recomputed):
        recomputed = None  # a row stores NaN as null (scoring/present.py)
    if published in (None, "") or recomputed is None:
        return published not in (None, "") or recomputed is not None
    if isinstance(recomputed, Decimal):
        return Decimal(str(published)) != recomputed
    if exact:
        return int(published) != int(recomputed)
    value = float(published)
    return not abs(value - recomputed) <= TOLERANCE * max(1.0, abs(recomputed))


def _show(value: Any) -> str:
    if value in (None, ""):
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, Decimal)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "none"
    return repr(float(value)) if not isinstance(value, int) else str(value)


def check_run(
    scope: str,
    score_rows: list[dict],
    forecast_rows: list[dict],
    trade_rows: list[dict],
    check: ScoreCheck,
    advance: Callable[[int], None] = lambda n: None,
    snapshot_rows: list[dict] | None = None,
) -> None:
    """Recompute the rows of one run and add what differs to `check.problems`."""
    run_id = int(score_rows[0]["run_id"])
    where = f"{scope} run {run_id}"
    check.runs.append((scope, run_id))
    methodology = score_rows[0].get("methodology_hash") or ""
    if methodology != METHODOLOGY_HASH:
        _, label = version_of_hash(methodology)
        check.problems.append(
            f"{where}: scored under methodology {label} ({methodology[:12]}...), not the one this "
            f"code scores with ({METHODOLOGY_HASH[:12]}...): its figures cannot be recomputed here"
        )
        return
    as_of = _when(score_rows[0]["as_of"], "as_of")
    slugs = {r["competitor"] for r in score_rows}
    data = scope_from_export(scope, as_of, forecast_rows, trade_rows, slugs, snapshot_rows)
    questions = build_questions(build_items(data), data)
    entry_comp = dict(
        zip(
            data.entries["id"].tolist(),
            zip(data.entries["cohort"].tolist(), data.entries["comp"].tolist()),
        )
    )
    groups: dict[int | str, list[dict]] = {}
    for row in score_rows:
        cohort = row.get("cohort_id")
        groups.setdefault(ALL if cohort in (None, "") else int(cohort), []).append(row)
    for group, rows in groups.items():
        label = "all cohorts" if group == ALL else f"cohort {group}"
        _check_group(data, questions, group, rows, f"{where}, {label}", check, entry_comp)
        advance(len(rows))


def _check_group(
    data: ScopeData,
    questions: Questions,
    group: int | str,
    rows: list[dict],
    where: str,
    check: ScoreCheck,
    entry_comp: dict,
) -> None:
    """Recompute one group's rows (a cohort, or all cohorts) and compare them."""
    n_comp = len(data.competitors)
    comp = {slug: i for i, _, slug in data.competitors}
    cohort_ids = set(data.cohorts) if group == ALL else {int(group)}
    s = forecast_scores(questions, np.isin(questions.cohort, list(cohort_ids)), n_comp)
    bets = bets_won_lost(data, cohort_ids, entry_comp)
    e_sel = np.isin(data.entries["cohort"], list(cohort_ids))
    with_money = bool(data.money) and all(
        e in data.money for e in data.entries["id"][e_sel].tolist()
    )
    if data.money and not with_money:
        check.notes.append(
            f"{where}: an entry has no snapshot by as_of (the run computed its money from the "
            "ledger): return_pct, pnl and rank not recomputed"
        )
    money = money_by_comp(data, e_sel, n_comp) if with_money else None
    figures: list[dict[str, float | int | Decimal | None]] = []
    for row in rows:
        ci = comp[row["competitor"]]
        won, lost = bets.get(ci, (0, 0))
        recomputed: dict[str, float | int | Decimal | None] = {
            "n_forecasts": int(s.n_forecasts[ci]),
            "n_resolved": int(s.n_resolved[ci]),
            "brier": float(s.brier[ci]),
            "brier_lo": float(s.brier_ci[0][ci]),
            "brier_hi": float(s.brier_ci[1][ci]),
            "log_score": float(s.log[ci]),
            "skill_vs_market": float(s.skill[ci]),
            "skill_lo": float(s.skill_ci[0][ci]),
            "skill_hi": float(s.skill_ci[1][ci]),
            "win_rate": won / (won + lost) if won + lost else None,
            # One frozen threshold for everybody (scoring/present.py make_row).
            "provisional": int(s.n_resolved[ci]) < metrics.provisional_threshold(),
        }
        if money is not None:
            init, pnl = float(money.initial[ci]), money.pnl[ci]
            recomputed["return_pct"] = 100.0 * float(pnl) / init if init else None
            recomputed["pnl"] = pnl.quantize(CENT)
        figures.append(recomputed)
    if money is not None:
        for recomputed, rank in zip(figures, _ranks(rows, figures), strict=True):
            recomputed["rank"] = rank
        check.problems.extend(f"{where}, {p}" for p in _ranked_but_blank(rows, figures))
    for row, recomputed in zip(rows, figures, strict=True):
        check.rows += 1
        for name, value in recomputed.items():
            check.figures += 1
            if _differs(row.get(name), value, name in INT_FIELDS):
                check.problems.append(
                    f"{where}, {row['competitor']}: {name} published "
                    f"{_show(row.get(name))}, recomputed {_show(value)}"
                )
    published = {comp[row["competitor"]] for row in rows}
    for ci in np.flatnonzero(s.n_forecasts > 0).tolist():
        if ci not in published:
            check.problems.append(
                f"{where}, {data.competitors[ci][1]}: {int(s.n_forecasts[ci])} forecasts in the "
                "export but no published row"
            )


def _ranks(rows: list[dict], figures: list[dict]) -> list[int | None]:
    """The ranks the pages show, recomputed: scoring/present.py's rank_rows over the recomputed
    headline figures of the rows published with a rank (an unscored row is published without
    one, and _ranked_but_blank checks that it is unscored), numbered 1.. among them. Its last
    tie-break is the competitor id, which the export does not carry: rows tied on every figure
    keep their published order."""
    ranked = [
        LeaderboardRow(
            skill_vs_market=_finite(f["skill_vs_market"]),
            return_pct=_finite(f["return_pct"]),
            competitor_id=int(row["rank"]),
        )
        for row, f in zip(rows, figures, strict=True)
        if row.get("rank") not in (None, "")
    ]
    rank_rows(ranked)
    shown = iter(int(r.rank or 0) for r in ranked)
    return [None if row.get("rank") in (None, "") else next(shown) for row in rows]


def _ranked_but_blank(rows: list[dict], figures: list[dict]) -> list[str]:
    """Rows published without a rank whose recomputed figures would rank them: the headline
    (skill vs market when any row of the group has it, else return %) is there and the row
    is not one of a competitor that made no forecast and moved no money."""
    use_skill = any(_finite(f["skill_vs_market"]) is not None for f in figures)
    name = "skill_vs_market" if use_skill else "return_pct"
    problems = []
    for row, f in zip(rows, figures, strict=True):
        if row.get("rank") not in (None, "") or _finite(f.get(name)) is None:
            continue
        if f["n_forecasts"] == 0 and not f.get("pnl"):
            continue
        problems.append(
            f"{row['competitor']}: published without a rank, but its recomputed {name} "
            f"{_show(f.get(name))} ranks it"
        )
    return problems


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def check_scores(
    score_rows: Iterable[dict],
    forecast_rows: list[dict],
    trade_rows: list[dict],
    advance: Callable[[int], None] = lambda n: None,
    snapshot_rows: list[dict] | None = None,
) -> ScoreCheck:
    """Recompute every row of the latest run of each scope in `score_rows`; `advance(n)` is
    called as rows are done (a progress bar)."""
    check = ScoreCheck()
    try:
        for scope, rows in latest_runs(score_rows).items():
            check_run(scope, rows, forecast_rows, trade_rows, check, advance, snapshot_rows)
    except KeyError as exc:
        raise ScoreExportError(f"an exported row has no column {exc}") from exc
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise ScoreExportError(f"an exported row cannot be read: {exc}") from exc
    if check.runs:
        check.notes.append(NOT_RECOMPUTED)
    return check


def rows_to_check(score_rows: Iterable[dict]) -> int:
    """How many rows check_scores will compare (the progress bar's total)."""
    return sum(len(rows) for rows in latest_runs(score_rows).values())
