"""Presenting: a competitor's computed numbers shaped into an unsaved LeaderboardRow, the ranking
of a group's rows, and the texts stored with a run (HEADLINE_RULE, notes()) so readers know the
rules behind the numbers; json_safe makes any of it storable as JSON.

Owns what a row says and in which order rows stand. It never queries or saves (rows are built
unsaved; scoring/services.py stores them) and does no scoring math of its own: every number
comes in one CompetitorStats from scoring/compute.py, and the row's details are written through
scoring/stored.py's RowDetails, the same type pages read them back with.

Every row records the methodology version that scored it (details["methodology"]) next to the
versions its cohorts were opened under: scores are always recomputed with the current frozen
version, while a cohort keeps the version its trading rules were frozen under.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np

from core.methodology import CONSTANTS as C
from core.methodology import METHODOLOGY_HASH, METHODOLOGY_VERSION
from scoring import metrics
from scoring.compute import CompetitorStats
from scoring.load import CENT
from scoring.models import LeaderboardRow
from scoring.stored import Champions, Coverage, Methodology, Multiclass, RowDetails

ALL = "all"  # group key of the rows across every cohort of the scope
HEADLINE_RULE = (
    "Rank by Brier skill vs the market price at decision time (brier(market) - brier(model), "
    "higher is better) when the group has resolved forecasts with prices; otherwise by return %. "
    "Competitors without the headline number rank last, ordered by return %."
)
BRIER_CONVENTION = (
    "question Brier: half the Brier (1950) sum over the market's outcomes, one per decision and "
    "market (binary markets: (p - o)^2), range 0..1"
)
MULTICLASS_CONVENTION = "Brier (1950), summed over the K outcomes, range 0..2"


def notes() -> list[str]:
    """The rules behind a run's numbers, stored with it (run.details["notes"]); the frozen
    amounts in them are read from the current methodology, which every run is scored with."""
    return [
        "Replicates of a competitor are pooled into one row: its forecasts together, its P/L "
        "summed over the summed starting cash (pooled return).",
        "A question is one decision's forecast of one market: the stated outcomes completed to a "
        "full vector (the rest shared like the shown prices), scored once; n_forecasts and "
        "n_resolved count questions.",
        "Forecasts on void or unresolved markets are counted in n_forecasts but never scored.",
        "Brier CIs: percentile bootstrap resampling markets, the same draws for every competitor.",
        "Diebold-Mariano: common questions are (cohort, week, market), replicates averaged, in "
        "the order of their first decision time (then cohort, week, market); ranked rows that "
        "share a group letter are not significantly different (compact letter display).",
        "Edge labels: one-sided bootstrap p of the CLV Sharpe ratio, Holm-adjusted across the "
        "group's competitors; within Monte Carlo error of a level the weaker label is published "
        "as borderline.",
        "Return intervals resample the markets any competitor of the group traded (the union, "
        "sorted by id), the same draws for every competitor; a market it never traded adds 0.",
        "Coverage: of the questions the forecast samples asked the competitor that resolved, the "
        "number it scored. The common-question view scores every competitor on the group's "
        "resolved sample questions, a missing forecast imputed by the price shown; the "
        "own-question view ranks.",
        "Edge labels are about closing-line value only; a series with fewer than "
        f"{C.sb_min_n} trades or no variance is NOT_TESTED, never NO_EDGE.",
        "CLV: BUY trades on closed, non-void markets; the closing line is the last price a sealed "
        "horizon before the close or resolution, and only when it is later than the trade (else "
        "n/a).",
        "Champion's clothes: kelly_stake sides and fractions; the largest stakes are funded first "
        f"within {C.max_bet_fraction:.0%} of the paper cash per decision, bets under min_bet "
        "skipped.",
        "Tournament: questions are (cohort, market); the reference is the price shown at each "
        "decision, carried forward like the forecast; coverage over the scheduled life.",
        "Provisional: fewer resolved questions than the sealed threshold "
        f"({metrics.provisional_threshold()}), the same for all.",
        "Win rate: share of BUY trades on resolved markets whose outcome won (one per bet).",
        "Money: the latest snapshot at or before as_of, else ledger cash plus positions at last "
        "prices.",
    ]


def _f(x: Any) -> float | None:
    """A JSON-safe float: None for NaN/inf/None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def json_safe(value: Any) -> Any:
    """Recursively turn numpy scalars/arrays into Python, NaN/inf into None, keys into str."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _f(value)
    if isinstance(value, Decimal):
        return _f(value)
    return value


def make_row(stats: CompetitorStats) -> LeaderboardRow:
    """An unsaved row of one competitor in one group, its details stored as RowDetails."""
    n_res = stats.n_resolved
    required = metrics.provisional_threshold()  # one threshold for everybody (a frozen constant)
    money, paper, clv = stats.money, stats.paper, stats.clv
    initial = money.initial
    bets = money.bets_won + money.bets_lost
    details = RowDetails(
        slug=stats.slug,
        display_name=stats.display_name,
        entries=money.entries,
        n_with_price=stats.n_with_price,
        bss_vs_market=stats.bss_market,
        bss_vs_base_rate=stats.bss_base,
        base_rate=stats.base_rate,
        n_binary=stats.n_binary,
        brier_convention=BRIER_CONVENTION,
        brier_multiclass=Multiclass(stats.brier_multi, stats.n_multi, MULTICLASS_CONVENTION)
        if stats.n_multi
        else None,
        rps=stats.rps,
        calibration=stats.calibration.table,
        murphy=stats.calibration.murphy,
        ece=stats.calibration.ece,
        money_source=money.sources,
        settled_won=money.settled_won,
        settled_lost=money.settled_lost,
        bets_won=money.bets_won,
        bets_lost=money.bets_lost,
        methodology=Methodology(METHODOLOGY_VERSION, METHODOLOGY_HASH, stats.cohort_versions),
        implied_confidence_n=stats.implied[1] if stats.implied else 0,
        information_test=stats.information_test,
        clv=clv,
        edge_label=clv.label,
        champions_clothes=Champions(
            paper_pnl=paper.pnl,
            paper_return_pct=100.0 * paper.pnl / initial if initial else None,
            paper_bets=paper.bets,
            paper_clv_mean=paper.clv_mean,
            real_pnl=money.pnl,
            real_clv_mean=clv.mean_prob,
        ),
        coverage=Coverage(asked=stats.asked, scored=stats.covered),
        common=stats.common,
    )
    return LeaderboardRow(
        cohort_id=None if stats.group == ALL else stats.group,
        competitor_id=stats.competitor_id,
        n_forecasts=stats.n_forecasts,
        n_resolved=n_res,
        brier=_f(stats.brier),
        brier_lo=_f(stats.brier_ci.lo),
        brier_hi=_f(stats.brier_ci.hi),
        log_score=_f(stats.log),
        skill_vs_market=_f(stats.skill),
        skill_lo=_f(stats.skill_ci.lo),
        skill_hi=_f(stats.skill_ci.hi),
        bss_vs_half=_f(stats.bss_half),
        return_pct=_f(100.0 * float(money.pnl) / initial) if initial else None,
        return_lo=_f(money.return_ci.lo),
        return_hi=_f(money.return_ci.hi),
        pnl=money.pnl.quantize(CENT),
        realized_pnl=money.realized.quantize(CENT),
        unrealized_pnl=money.unrealized.quantize(CENT),
        win_rate=_f(money.bets_won / bets) if bets else None,
        implied_confidence_brier=_f(stats.implied[0]) if stats.implied else None,
        tokens=money.tokens,
        cost_usd=money.cost.quantize(Decimal("0.0001")),
        cost_per_resolved=_f(float(money.cost) / n_res) if n_res else None,
        provisional=n_res < required,
        required_n=required,
        details=json_safe(details.to_json()),
    )


def rank_rows(rows: list[LeaderboardRow]) -> str:
    """Assign ranks in place by the headline metric (see HEADLINE_RULE); returns its name."""
    use_skill = any(r.skill_vs_market is not None for r in rows)
    headline = "brier_skill_vs_market" if use_skill else "return_pct"

    def key(r: LeaderboardRow):
        primary = r.skill_vs_market if use_skill else r.return_pct
        ret = r.return_pct if r.return_pct is not None else -math.inf
        return (primary is None, -(primary or 0.0), -ret, r.competitor_id)

    for rank, row in enumerate(sorted(rows, key=key), start=1):
        row.rank = rank
    return headline
