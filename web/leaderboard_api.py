"""GET /api/leaderboard: the latest materialised leaderboard as JSON (no math per request).

Shape: {"as_of", "methodology_hash", "scope", "cohort", "headline",
"rows": [{"competitor", "n_forecasts", "n_resolved", "brier", "brier_ci": [lo, hi], "log_score",
"brier_skill_vs_market", "return_pct" (pooled), "return_ci", "pnl", "win_rate", "provisional",
"coverage": {"asked", "scored"}, "common": {...}, "edge_label", "edge_p_holm", ...}],
"edge": {"dm", "tournament"}}.

Every number is a JSON number, money included: pnl, realized_pnl, unrealized_pnl and cost_usd
are numbers in dollars (pnl rounded to cents, cost to 1/100 of a cent); return_pct is in percent.
A statistic that cannot be computed yet (nothing resolved, one entry only) is null.

Ranks are the page's (web/standings.py): only rows with the headline figure are ranked, 1..n in
the run's order; an unscored row has rank null and `unranked_reason` says why, and ranked rows
carry their `group_letters` (rows sharing a letter are not significantly different).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse

from cohorts.models import Cohort
from core.methodology import METHODOLOGY_HASH
from scoring.models import LeaderboardRow, ScoreRun
from scoring.selectors import details_at, done_runs, leaderboard_rows, slice_details
from scoring.stored import RunDetails
from web import params, standings
from web.api_errors import api_view, json_error
from web.cache import Values, page
from web.selectors import scope_or_default

MAX_ID = 2**62
CACHE_SECONDS = 60  # scores change at most hourly; a minute keeps the endpoint cheap and fresh


def _num(value) -> float | None:
    return None if value is None else float(value)


def row_payload(row: LeaderboardRow) -> dict[str, Any]:
    """One leaderboard row as the API (and exports) publish it, with the methodology version
    that scored it and the versions its cohorts started under."""
    details = row.details or {}
    method = details.get("methodology") or {}
    return {
        "rank": row.rank,
        "competitor": row.competitor.slug,
        "competitor_name": row.competitor.display_name,
        "competitor_simulated": row.competitor.simulated,
        "n_forecasts": row.n_forecasts,
        "n_resolved": row.n_resolved,
        "brier": row.brier,
        "brier_ci": [row.brier_lo, row.brier_hi],
        "log_score": row.log_score,
        "brier_skill_vs_market": row.skill_vs_market,
        "brier_skill_vs_market_ci": [row.skill_lo, row.skill_hi],
        "bss_vs_half": row.bss_vs_half,
        "bss_vs_market": details.get("bss_vs_market"),
        "bss_vs_base_rate": details.get("bss_vs_base_rate"),
        "brier_multiclass": details.get("brier_multiclass"),
        "return_pct": row.return_pct,
        "return_ci": [row.return_lo, row.return_hi],
        "pnl": _num(row.pnl),
        "realized_pnl": _num(row.realized_pnl),
        "unrealized_pnl": _num(row.unrealized_pnl),
        "win_rate": row.win_rate,
        "implied_confidence_brier": row.implied_confidence_brier,
        "tokens": row.tokens,
        "cost_usd": _num(row.cost_usd),
        "cost_per_resolved": row.cost_per_resolved,
        "provisional": row.provisional,
        "required_n": row.required_n,
        # About closing-line value only: NOT_TESTED (too few trades or no variance) is its own
        # state, never NO_EDGE; edge_p_holm is the adjusted p the label used.
        "edge_label": details.get("edge_label"),
        "edge_borderline": (details.get("clv") or {}).get("borderline"),
        "edge_p_holm": (details.get("clv") or {}).get("p_holm"),
        "edge_trades": (details.get("clv") or {}).get("n"),
        "edge_untested_reason": (details.get("clv") or {}).get("flag")
        if details.get("edge_label") == "NOT_TESTED"
        else None,
        "coverage": details.get("coverage"),
        "common": details.get("common"),
        "methodology_version": method.get("version"),
        "cohort_methodology_versions": method.get("cohort_versions"),
        "details": details,
    }


def _cohort_payload(cohort: Cohort | None) -> dict[str, Any] | None:
    if cohort is None:
        return None
    return {
        "id": cohort.pk,
        "kind": cohort.kind,
        "label": cohort.label,
        "week_start": cohort.week_start.isoformat(),
    }


def _depends(values: Values) -> tuple[str, ...]:
    # Without scope or cohort the answer is the default scope's, the first that has cohorts,
    # which a new cohort can change before any score run: that one depends on the data token.
    return ("scores",) if values["scope"] or values["cohort"] is not None else ("data",)


@page(
    {"cohort": params.integer(1, MAX_ID, arg="cohort_id"),
     "scope": params.choice(ScoreRun.Scope.values)},
    depends=_depends,
)  # fmt: skip
@api_view
def leaderboard_api(request: HttpRequest, cohort_id: int | None, scope: str) -> HttpResponse:
    """?cohort=<id> (omitted: all cohorts of the scope) and ?scope=live|replay|demo.

    Without scope (or cohort): the site's default, the first of live / replay / demo that has
    cohorts, named in `scope_note`. A replay or demo cohort is served from its own scope's run
    and labelled with that scope; a bad cohort id is 400, an unknown one 404; before any run:
    rows [] with a note.
    """
    status, text = _answer(scope or None, cohort_id)
    if status != 200:
        return json_error(text, status)
    response = HttpResponse(text, content_type="application/json")
    response["Cache-Control"] = f"public, max-age={CACHE_SECONDS}"
    return response


def _answer(scope: str | None, cohort_id: int | None) -> tuple[int, str]:
    cohort = None
    scope_note = None
    if cohort_id is not None:
        cohort = Cohort.objects.filter(pk=cohort_id).first()
        if cohort is None:
            return 404, f"no cohort {cohort_id}"  # the message of a json_error
        scope = cohort.kind  # a cohort is only ever scored within its own kind
    elif scope is None:
        scope = scope_or_default(None)  # what the site's home page shows
        scope_note = f"no scope given: {scope}, the first of live, replay, demo that has cohorts"
    run = done_runs(scope).defer("details").first()  # read sliced to the group below
    payload: dict[str, Any] = {
        "as_of": None,
        "methodology_hash": METHODOLOGY_HASH,
        "scope": scope,
        "cohort": _cohort_payload(cohort),
        "rows": [],
    }
    if scope_note:
        payload["scope_note"] = scope_note
    if run is None:
        return 200, _text(payload | {"note": "no score run yet"})
    key = "all" if cohort is None else str(cohort.pk)
    headline, dm, tournament = details_at(run, ("headline",), ("dm", key), ("tournament", key))
    by_cohort = headline.get("by_cohort") if isinstance(headline, dict) else None
    payload |= {
        "as_of": run.as_of.isoformat(),
        "methodology_hash": run.methodology_hash,
        "methodology_version": run.methodology_version,
        "run_id": run.pk,
        "headline": by_cohort.get(key) if isinstance(by_cohort, dict) else None,
        "headline_rule": headline.get("rule") if isinstance(headline, dict) else None,
        "rows": _ranked_payload(
            run, list(leaderboard_rows(run, cohort)), key, slice_details(key, headline, dm)
        ),
        "edge": {"dm": dm, "tournament": tournament},
    }
    if cohort is not None and not payload["rows"]:
        payload["note"] = "this cohort is not in the latest score run yet"
    return 200, _text(payload)


def _ranked_payload(
    run: ScoreRun, rows: list[LeaderboardRow], group: str, details: RunDetails
) -> list[dict]:
    """Rows in the stored order with the page's ranks: scored rows first, ranked; the unscored
    after them with rank null and the reason, as the page lists them apart."""
    board = standings.build(run, rows, group=group, details=details)
    out = []
    for s in board.scored + board.unscored:
        payload = row_payload(s.row)
        payload["rank"] = s.rank
        payload["unranked_reason"] = s.reason or None
        payload["group_letters"] = s.letters or None
        out.append(payload)
    return out


def _text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, cls=DjangoJSONEncoder)
