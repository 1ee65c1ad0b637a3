"""Presenting: a competitor's computed numbers shaped into an unsaved LeaderboardRow, the ranking
of a group's rows, and the texts stored with a run (HEADLINE_RULE, NOTES) so readers know the
rules behind the numbers; json_safe makes any of it storable as JSON.

Owns what a row says and in which order rows stand. It never queries or saves (rows are built
unsaved; scoring/services.py stores them) and does no scoring math of its own beyond finishing a
row (return interval, provisional badge, CLV summary) with the helpers of scoring/compute.py.

Every row records the methodology version that scored it (details["methodology"]) next to the
versions its cohorts were opened under: scores are always recomputed with the current sealed
version, while a cohort keeps the version its trading rules were sealed under.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np

from core.methodology import METHODOLOGY_HASH, METHODOLOGY_VERSION
from scoring import metrics
from scoring.compute import calibration_extras, clv_summary
from scoring.load import CENT
from scoring.models import LeaderboardRow

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
NOTES = [
    "Replicates of a competitor are pooled into one row; return_ci bootstraps over its entries.",
    "A question is one decision's forecast of one market: the stated outcomes completed to a full "
    "vector (the rest shared like the shown prices), scored once; n_forecasts and n_resolved "
    "count questions.",
    "Forecasts on void or unresolved markets are counted in n_forecasts but never scored.",
    "Brier CIs: percentile bootstrap resampling markets, the same draws for every competitor.",
    "Diebold-Mariano: common questions are (cohort, week, market), replicates averaged.",
    "CLV: BUY trades on closed, non-void markets; the closing line is the last price a sealed "
    "horizon before the close or resolution, and only when it is later than the trade (else "
    "n/a).",
    "Champion's clothes: kelly_stake sides and fractions; the largest stakes are funded first "
    "within 25% of the paper cash per decision, bets under min_bet skipped.",
    "Tournament: questions are (cohort, market); the reference is the price shown at each "
    "decision, carried forward like the forecast; coverage over the scheduled life.",
    "Provisional: fewer resolved questions than the sealed threshold (350), the same for all.",
    "Win rate: share of BUY trades on resolved markets whose outcome won (one per bet).",
    "Money: the latest snapshot at or before as_of, else ledger cash plus positions at last prices.",
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


def make_row(data, group, ci, s, money, rps, implied, info_tests, clv_rows, paper, e_sel):
    n_res = int(s["n_resolved"][ci])
    required = metrics.provisional_threshold()  # one threshold for everybody (sealed)
    initial = money["initial"][ci]
    pnl = money["pnl"][ci]
    returns = [r for r in money["returns"][ci] if math.isfinite(r)]
    return_ci = metrics.bootstrap_ci(np.asarray(returns)) if len(returns) >= 2 else (None, None)
    won, lost = money["won"][ci], money["lost"][ci]
    bets_won, bets_lost = money["bets"].get(ci, (0, 0))
    cost = money["cost"][ci]
    ic = implied.get(ci)
    comp_entries = set(data.entries["id"][e_sel & (data.entries["comp"] == ci)].tolist())
    paper_pnl = sum(paper[e]["pnl"] for e in comp_entries if e in paper)
    paper_clv = sorted(c for e in comp_entries if e in paper for c in paper[e]["clv"])
    clv = clv_summary([r for r in clv_rows if r[1] == ci])
    details = {
        "slug": data.competitors[ci][1],
        "display_name": data.competitors[ci][2],
        "entries": int(money["entries"][ci]),
        "n_with_price": int(s["n_with_price"][ci]),
        "bss_vs_market": s["bss_market"][ci],
        "bss_vs_base_rate": s["bss_base"][ci],
        "base_rate": s["base_rate"][ci],
        "n_binary": int(s["n_binary"][ci]),
        "brier_convention": BRIER_CONVENTION,
        "brier_multiclass": {
            "value": s["brier_multi"][ci],
            "n": int(s["n_multi"][ci]),
            "convention": MULTICLASS_CONVENTION,
        }
        if s["n_multi"][ci]
        else None,
        "rps": rps.get(ci),
        **calibration_extras(s, ci),
        "money_source": sorted(money["sources"][ci]),
        "settled_won": int(won),
        "settled_lost": int(lost),
        "bets_won": int(bets_won),
        "bets_lost": int(bets_lost),
        "methodology": {
            "version": METHODOLOGY_VERSION,
            "hash": METHODOLOGY_HASH,
            "cohort_versions": money["cohort_versions"],
        },
        "implied_confidence_n": ic[1] if ic else 0,
        "information_test": info_tests.get(ci),
        "clv": clv,
        "edge_label": clv["label"],
        "champions_clothes": {
            "paper_pnl": paper_pnl,
            "paper_return_pct": 100.0 * paper_pnl / initial if initial else None,
            "paper_bets": sum(paper[e]["n_bets"] for e in comp_entries if e in paper),
            "paper_clv_mean": float(np.mean([c[1] for c in paper_clv])) if paper_clv else None,
            "real_pnl": pnl,
            "real_clv_mean": clv.get("mean_prob"),
        },
    }
    return LeaderboardRow(
        cohort_id=None if group == ALL else group,
        competitor_id=data.competitors[ci][0],
        n_forecasts=int(s["n_forecasts"][ci]),
        n_resolved=n_res,
        brier=_f(s["brier"][ci]),
        brier_lo=_f(s["brier_ci"][0][ci]),
        brier_hi=_f(s["brier_ci"][1][ci]),
        log_score=_f(s["log"][ci]),
        skill_vs_market=_f(s["skill"][ci]),
        skill_lo=_f(s["skill_ci"][0][ci]),
        skill_hi=_f(s["skill_ci"][1][ci]),
        bss_vs_half=_f(s["bss_half"][ci]),
        return_pct=_f(100.0 * float(pnl) / initial) if initial else None,
        return_lo=_f(return_ci[0]),
        return_hi=_f(return_ci[1]),
        pnl=pnl.quantize(CENT),
        realized_pnl=money["realized"][ci].quantize(CENT),
        unrealized_pnl=money["unrealized"][ci].quantize(CENT),
        win_rate=_f(bets_won / (bets_won + bets_lost)) if bets_won + bets_lost else None,
        implied_confidence_brier=_f(ic[0]) if ic else None,
        tokens=int(money["tokens"][ci]),
        cost_usd=cost.quantize(Decimal("0.0001")),
        cost_per_resolved=_f(float(cost) / n_res) if n_res else None,
        provisional=n_res < required,
        required_n=required,
        details=json_safe(details),
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
