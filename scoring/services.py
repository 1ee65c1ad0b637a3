"""Scoring's write side: `compute_scores(scope, as_of)` scores one scope and stores it as a ScoreRun
with its LeaderboardRows; `store_trade_clv` keeps each BUY's closing-line value; `prune_runs`
deletes old runs. Tasks, the CLI, replays and the demo call these; pages read the stored rows.

A run is a pipeline, one module per step: scoring/load.py reads the scope (a fixed number of
queries, whatever the number of forecasts), scoring/questions.py builds the scored questions,
scoring/compute.py computes each competitor's CompetitorStats as numpy over the whole scope (with
scoring/edge.py for CLV, Diebold-Mariano and the information test, scoring/paper.py for
champion's clothes and scoring/tournament.py for the tournament), scoring/present.py shapes and
ranks the rows, scoring/stored.py types the JSON they store, scoring/services_seal.py writes
the finished run's record into its scope's event log, and this module orchestrates the groups
and writes. Scopes (live / replay / demo) are never mixed: a run reads only cohorts of its
own kind, and produces rows per cohort and across all of the scope's cohorts (cohort=None).

Owns every write of the scoring engine and nothing else: no query beyond the run bookkeeping
and the scope's clock (loading is scoring/load.py's) and no scoring math (that is compute's,
edge's, paper's, tournament's).

Scores of a scope are a pure function of its data and its own clock: live runs as of
now; replay and demo runs as of their simulated clock (the latest snapshot of their cohorts,
which their importers never move past today). So `arena score`, the hourly job, the replay
import and the demo all score a replay or demo scope as of the same instant, and re-scoring
gives identical numbers by any path (the bootstraps are seeded by the methodology hash).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta

import numpy as np
from django.db import transaction
from django.db.models import Max

from cohorts.models import Snapshot, Trade
from cohorts.scope import live_path_kind
from core import clock
from core.methodology import METHODOLOGY_HASH, METHODOLOGY_VERSION
from core.reaper import owner_token, reap
from core.versions import scores_changed
from markets.models import Market
from scoring.compute import competitor_stats, group_inputs
from scoring.edge import EntryComp, TradeClv, dm_tables, holm_labels, trade_clv
from scoring.load import ScopeData, load_scope
from scoring.models import BoardSlice, LeaderboardRow, ScoreRun, TradeCLV
from scoring.paper import PaperEntry, paper_candidates, paper_portfolios
from scoring.present import ALL, HEADLINE_RULE, json_safe, make_row, notes, rank_rows
from scoring.questions import Questions, build_items, build_questions, yes_view
from scoring.services_seal import inputs_digest, seal_run
from scoring.stored import (
    CohortRef,
    DmTables,
    GroupCounts,
    Methodology,
    RunDetails,
    TournamentTable,
)
from scoring.tournament import TournamentPairs, tournament_pairs, tournament_table

ENGINE_VERSION = "2.0"
RUN_MAX_AGE = timedelta(hours=6)  # a score run takes minutes; one "running" longer is dead


def scope_clock(scope: str) -> datetime:
    """The instant a scope is scored as of: now for live (and for the rehearsal in the process
    that runs it: its clock of record is the accelerated one); for replay and demo their
    simulated clock, the latest snapshot of the scope's cohorts (never after now; now if none)."""
    now = clock.now()
    if scope in (ScoreRun.Scope.LIVE, live_path_kind()):
        return now
    latest = Snapshot.objects.filter(entry__cohort__kind=scope).aggregate(ts=Max("ts"))["ts"]
    return now if latest is None else min(latest, now)


def compute_scores(scope: str = "live", as_of: datetime | None = None) -> ScoreRun:
    """Score one scope (live / replay / demo) as of a time and store it as a DONE ScoreRun.

    as_of defaults to the scope's own clock (scope_clock). The run row is created first
    (RUNNING) so a crash leaves a FAILED run with the error, which selectors never serve. Two
    concurrent runs just produce two runs; the latest finished wins.
    """
    if scope not in ScoreRun.Scope.values:
        raise ValueError(f"unknown scope {scope!r}; expected one of {ScoreRun.Scope.values}")
    as_of = as_of or scope_clock(scope)
    reap_stale_runs()  # a killed `arena score` left its run "running" for ever
    run = ScoreRun.objects.create(
        scope=scope,
        as_of=as_of,
        started_at=clock.now(),
        owner=owner_token(),
        methodology_version=METHODOLOGY_VERSION,
        methodology_hash=METHODOLOGY_HASH,
        engine_version=ENGINE_VERSION,
    )
    try:
        scored = _score(scope, as_of)
        with transaction.atomic():
            store_trade_clv(scored.clv, scored.buys)
            for row in scored.rows:
                row.run = run
            LeaderboardRow.objects.bulk_create(scored.rows, batch_size=500)
            ScoreRun.objects.filter(pk=run.pk).update(
                status=ScoreRun.Status.DONE,
                finished_at=clock.now(),
                n_forecasts=scored.n_forecasts,
                n_resolved=scored.n_resolved,
                details=json_safe(scored.details.to_json()),
            )
            store_board_slices(run, scored.details)
            seal_run(run.pk, scope, scored.inputs)  # what it read and published, in the log
            scores_changed()  # a new leaderboard: every cached page is stale
    except Exception as exc:
        ScoreRun.objects.filter(pk=run.pk).update(
            status=ScoreRun.Status.FAILED,
            finished_at=clock.now(),
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    run.refresh_from_db()
    return run


def score_unsaved(scope: str, as_of: datetime) -> tuple[list[LeaderboardRow], dict[str, str]]:
    """A dry run: the rows a run would store (ranked, unsaved) and each group's headline
    metric, writing nothing (a correction's preview reads it on uncommitted data)."""
    scored = _score(scope, as_of)
    return scored.rows, dict(scored.details.headline_by_cohort)


def store_board_slices(run: ScoreRun, details: RunDetails) -> list[BoardSlice]:
    """Each group's BoardSlice of the run's details: what its leaderboard reads of them, kept
    apart so that a board never reads every group's tests to letter its own."""
    slices = [
        BoardSlice(
            run=run,
            cohort_id=None if group == ALL else int(group),
            details=json_safe(details.board_slice(group).to_json()),
        )
        for group in details.groups()
        if group == ALL or group.isdigit()
    ]
    return BoardSlice.objects.bulk_create(slices)


def reap_stale_runs() -> int:
    """Score runs whose process died (core/reaper.py) are marked failed."""
    running = ScoreRun.objects.filter(status=ScoreRun.Status.RUNNING)
    return reap(
        running, failed_status=ScoreRun.Status.FAILED, max_age=RUN_MAX_AGE, what="score run"
    )


def store_trade_clv(clv_rows: list[TradeClv], buys: list[int] | None = None) -> int:
    """Keep each BUY's closing-line value on record (probability and log-odds forms, with the
    closing price used), so a trade's CLV can be audited and exported, not only averaged.

    buys: every BUY of the scope scored; those without a closing line lose any earlier record
    (a trade with no closing line has no CLV, never a stale or zero one)."""
    if buys:
        with_line = {r.trade_pk for r in clv_rows}
        stale = [pk for pk in buys if pk not in with_line]
        for start in range(0, len(stale), 500):
            TradeCLV.objects.filter(trade_id__in=stale[start : start + 500]).delete()
    objs = [
        TradeCLV(
            trade_id=r.trade_pk, close_price=r.close, clv_prob=r.clv_prob, clv_logodds=r.clv_logodds
        )
        for r in clv_rows
    ]
    TradeCLV.objects.bulk_create(
        objs,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["trade"],
        update_fields=["close_price", "clv_prob", "clv_logodds", "computed_at"],
    )
    return len(objs)


@dataclass(frozen=True)
class _Shared:
    """Computed once for the scope, then sliced per cohort group."""

    entry_comp: EntryComp
    clv: list[TradeClv]
    paper: dict[int, PaperEntry]
    tournament: TournamentPairs


@dataclass(frozen=True)
class _Scored:
    rows: list[LeaderboardRow]
    details: RunDetails
    n_forecasts: int
    n_resolved: int
    clv: list[TradeClv]
    buys: list[int]  # every BUY of the scope (those without a closing line lose their CLV)
    inputs: dict  # the digest of what was scored (scoring/services_seal.py)


def _score(scope: str, as_of: datetime) -> _Scored:
    data = load_scope(scope, as_of)
    items = build_items(data)
    questions = build_questions(items, data)
    entry_comp = dict(
        zip(
            data.entries["id"].tolist(),
            zip(data.entries["cohort"].tolist(), data.entries["comp"].tolist()),
        )
    )
    yes = yes_view(items, data)
    shared = _Shared(
        entry_comp=entry_comp,
        clv=trade_clv(data, entry_comp),
        paper=paper_portfolios(paper_candidates(items, yes, data), data),
        tournament=tournament_pairs(questions, data),
    )
    rows: list[LeaderboardRow] = []
    details = RunDetails(
        headline_rule=HEADLINE_RULE,
        notes=notes(),
        cohorts=[
            CohortRef(
                id=pk,
                week_start=c["week_start"].isoformat(),
                label=c["label"],
                methodology_version=c["methodology_version"],
            )
            for pk, c in data.cohorts.items()
        ],
        methodology=Methodology(METHODOLOGY_VERSION, METHODOLOGY_HASH),
    )
    groups: list[int | str] = [*data.cohorts, ALL] if data.cohorts else []
    for group in groups:
        group_rows, headline, dm, tournament = _group_rows(data, questions, group, shared)
        rows.extend(group_rows)
        details.headline_by_cohort[str(group)] = headline
        details.dm[str(group)] = dm
        details.tournament[str(group)] = tournament
        details.counts[str(group)] = group_counts(data, questions, group, group_rows)
    buys = [t.pk for t in data.trades if t.side == Trade.Side.BUY]
    return _Scored(
        rows,
        details,
        int(questions.t.size),
        int(questions.scored.sum()),
        shared.clv,
        buys,
        inputs_digest(data),
    )


def _group_rows(
    data: ScopeData, q: Questions, group: int | str, shared: _Shared
) -> tuple[list[LeaderboardRow], str, DmTables, TournamentTable]:
    """Unsaved rows (one per competitor with an entry in the group) and the group's tables:
    headline, Diebold-Mariano and tournament."""
    cohort_ids = set(data.cohorts) if group == ALL else {int(group)}
    g = group_inputs(data, q, group, cohort_ids, shared.entry_comp, shared.clv, shared.paper)
    present = sorted(set(data.entries["comp"][g.entry_sel].tolist()))
    stats = [competitor_stats(data, g, ci) for ci in present]
    labelled = holm_labels([st.clv for st in stats])
    rows = [make_row(replace(st, clv=clv)) for st, clv in zip(stats, labelled, strict=True)]
    headline = rank_rows(rows)
    f_sel = np.isin(q.cohort, list(cohort_ids))
    scored = [ci for ci in present if g.scores.n_resolved[ci] > 0]
    dm = dm_tables(q, f_sel, data, scored)
    tournament = tournament_table(shared.tournament, cohort_ids, data, present)
    take = {r.competitor: r for r in tournament.rows}
    for row in rows:
        mine = take.get(row.details["slug"])
        row.details["tournament"] = json_safe(asdict(mine)) if mine else None
    return rows, headline, dm, tournament


def group_counts(
    data: ScopeData, q: Questions, group: int | str, rows: list[LeaderboardRow]
) -> GroupCounts:
    """What a group's header says in words: cohorts, markets (shown in a forecast sample,
    forecast or traded) and how many resolved by as_of, competitors, forecasts (questions) and
    how many are on resolved markets, and its common questions."""
    cohort_ids = set(data.cohorts) if group == ALL else {int(group)}
    f_sel = np.isin(q.cohort, list(cohort_ids))
    e_sel = np.isin(data.entries["cohort"], list(cohort_ids))
    markets = set(q.market[f_sel].tolist())
    for entry_id in data.entries["id"][e_sel].tolist():
        markets.update(data.market_pnl.get(entry_id, {}))
    for (cohort, _week), sample in data.samples.items():
        if cohort in cohort_ids:
            markets.update(sample)
    resolved = sum(
        1 for m in markets if m in data.markets and data.markets[m].status == Market.Status.RESOLVED
    )
    common = next(
        (c.get("questions") for r in rows if isinstance(c := r.details.get("common"), dict)), 0
    )
    return GroupCounts(
        cohorts=len(cohort_ids),
        markets=len(markets),
        markets_resolved=resolved,
        competitors=len(set(data.entries["comp"][e_sel].tolist())),
        forecasts=int(f_sel.sum()),
        forecasts_resolved=int((f_sel & q.scored).sum()),
        common_questions=int(common or 0),
    )


def prune_runs(keep: int = 48, at: datetime | None = None) -> int:
    """Delete all but the latest `keep` finished runs per scope, and failed runs older than two
    days (kept that long so staff can read their errors). Pages only ever read the latest run."""
    at = at or clock.now()
    deleted = 0
    for scope in ScoreRun.Scope.values:
        done = ScoreRun.objects.filter(scope=scope, status=ScoreRun.Status.DONE)
        keep_ids = list(done.order_by("-finished_at", "-pk").values_list("pk", flat=True)[:keep])
        deleted += done.exclude(pk__in=keep_ids).delete()[1].get("scoring.ScoreRun", 0)
    stale_failed = ScoreRun.objects.filter(
        status=ScoreRun.Status.FAILED, started_at__lt=at - timedelta(days=2)
    )
    deleted += stale_failed.delete()[1].get("scoring.ScoreRun", 0)
    return deleted
