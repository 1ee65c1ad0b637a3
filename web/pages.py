"""The public pages: one view and one template per page, a named partial for htmx swaps.

Views only read (web/selectors.py) and shape data for templates; chart data goes through
web/charts.py into `json_script` tags that static/arena/charts.js draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_safe

from agents.models import Competitor
from cohorts import seal_sign
from cohorts.models import Cohort
from markets.models import Market
from scoring.metrics import provisional_threshold
from scoring.models import ScoreRun
from scoring.stored import RowDetails
from web import (
    chart_reads,
    charts,
    colours,
    exports,
    glossary,
    leaders,
    params,
    rows,
    selectors,
    standings,
)
from web.cache import page

# The trading rules in prose; {min_bet} and {max_bet_fraction} are filled from the sealed
# constants (trading_rules), so the page cannot drift from the rules the game enforces.
TRADING_RULES = [
    "Every entry starts a cohort with $10,000 of paper cash; every cash movement is a ledger row.",
    "One decision per entry per cohort week: BET, SELL or HOLD, made on a frozen universe of markets "
    "and prices that is identical for every entry of the cohort.",
    "Minimum bet ${min_bet}; all bets of one decision together at most {max_bet_fraction} of the "
    "cash at decision time; cash can never go negative.",
    "At most one open position per entry, market and outcome (further bets average in). "
    "SELL closes 1-100% of a position at the current price.",
    "Only open markets with prices strictly between 0 and 1 can be traded.",
    "Resolved markets pay $1 per winning share; void markets refund the remaining cost basis; a staff "
    "correction reverses the earlier settlement through the ledger and is shown in the market's "
    "audit trail.",
    "Competitors also state probabilities for a seeded sample of markets they did not bet on, so "
    "forecasting skill is scored beyond the markets they chose.",
]


def trading_rules() -> list[str]:
    """TRADING_RULES with the sealed amounts of the current methodology."""
    from core.methodology import CONSTANTS

    amounts = {
        "min_bet": CONSTANTS.min_bet,
        "max_bet_fraction": f"{CONSTANTS.max_bet_fraction:.0%}",
    }
    return [rule.format(**amounts) for rule in TRADING_RULES]


# What the pages read from their query strings: parsed once (web/cache.py `@page`) and handed
# to the views as keyword arguments.
MAX_REPLICATE = 1000
MAX_PAGE = 10**9
SCOPE = params.choice(selectors.SCOPES)  # "" = the data-aware default (scope_or_default)
RANGE = params.choice(charts.RANGES, charts.DEFAULT_RANGE, fold_case=True, arg="range_key")
REPLICATE = params.integer(1, MAX_REPLICATE, 1)


def _htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


@page(
    {"scope": SCOPE, "sort": params.choice(selectors.SORTABLE, "rank"),
     "dir": params.choice(("asc", "desc"), arg="direction"), "range": RANGE},
    htmx_target="leaderboard-table",
)  # fmt: skip
@require_safe
def home(
    request: HttpRequest, scope: str, sort: str, direction: str, range_key: str
) -> HttpResponse:
    scope = selectors.scope_or_default(scope or None)
    run = selectors.latest_run(scope)
    descending = {"asc": False, "desc": True}.get(direction)
    if descending is None:
        descending = not selectors.SORTABLE[sort][1]  # each column starts best-first
    board = standings.build(run, selectors.leaderboard_rows(run, None, sort, descending)[0])
    context = {
        "scope": scope,
        "scopes": selectors.SCOPES,
        "run": run,
        "board": board,
        "rows": board.scored,
        "leader_rows": rows.leader_rows(board, scope, sort),
        "sort": sort,
        "descending": descending,
        "columns": _leaderboard_columns(scope, sort, descending, board.headline),
    }
    if _htmx(request) and request.headers.get("HX-Target") == "leaderboard-table":
        return render(request, "arena/home.html#leaderboard-table", context)
    cohorts = selectors.scope_cohorts(scope)
    context["state"] = selectors.site_state(scope, n_cohorts=len(cohorts))
    context["chart"] = chart_reads.overview_chart(scope, range_key, cohorts)
    context["range"] = range_key
    context["ranges"] = list(charts.RANGES)
    context["series_url"] = reverse("api-overview") + f"?scope={scope}"
    return render(request, "arena/home.html", context)


# (key, label, glossary term, class): "key" columns stay in view on a phone.
LEADERBOARD_COLUMNS = [
    ("rank", "Rank", "rank", "key"),
    ("competitor", "Competitor", None, "key"),
    ("skill", "Skill vs market", "skill", "key"),
    ("brier", "Brier", "brier", ""),
    ("log_score", "Log score", "log_score", ""),
    ("return", "Return", "return", "key"),
    ("pnl", "P/L", "pnl", ""),
    ("win_rate", "Win rate", "win_rate", ""),
    ("n_resolved", "Resolved", "resolved", ""),
    ("cost", "Cost", "cost", ""),
]


def _leaderboard_columns(scope: str, sort: str, descending: bool, headline: str) -> list[dict]:
    out = []
    for key, label, term, css in LEADERBOARD_COLUMNS:
        active = key == sort
        # Clicking the active column flips it; another column starts at its best-first order.
        next_dir = ("asc" if descending else "desc") if active else ""
        query = f"?scope={scope}&sort={key}" + (f"&dir={next_dir}" if next_dir else "")
        aria = ("descending" if descending else "ascending") if active else None
        out.append(
            {
                "key": key,
                "label": label,
                "term": term,
                "css": css,
                "num": key not in ("competitor",),
                "href": query,
                "active": active,
                "aria": aria,
                "headline": (key == "skill" and headline == "brier_skill_vs_market")
                or (key == "return" and headline == "return_pct"),
            }
        )
    return out


@page({"kind": SCOPE}, depends=("data",))
@require_safe
def cohort_list(request: HttpRequest, kind: str) -> HttpResponse:
    cohorts = list(selectors.cohorts_overview(kind or None)[:200])
    leads = leaders.cohort_leaders(cohorts)
    for c in cohorts:
        c.lead = leads.get(c.pk)
    return render(
        request,
        "arena/cohort_list.html",
        {"cohorts": cohorts, "kind": kind, "scopes": selectors.SCOPES},
    )


@page({"range": RANGE})
@require_safe
def cohort_detail(request: HttpRequest, cohort_id: int, range_key: str) -> HttpResponse:
    cohort = selectors.get_cohort(cohort_id)
    if cohort is None:
        raise Http404(f"no cohort {cohort_id}")
    entries = _entries_with_corrections(cohort)
    decisions = selectors.recent_decisions(cohort)
    universe_week, universe = selectors.cohort_universe(cohort)
    context = {
        "cohort": cohort,
        "entries": entries,
        "entry_rows": rows.entry_rows(cohort.pk, entries),
        "corrections": entries.corrections,
        "series": chart_reads.cohort_chart(
            cohort, range_key, entries, corrections=entries.corrections
        ),
        "range": range_key,
        "ranges": list(charts.RANGES),
        "series_url": reverse("api-cohort-series", args=[cohort.pk]),
        "universe_week": universe_week,
        "universe": rows.universe_rows(universe[:100]),
        "universe_total": len(universe),
        "decisions": rows.decision_rows(decisions),
        "seals": selectors.cohort_seal_rows(cohort),
        # Decisions are newest week first, so the first one is the latest decided week.
        "latest_week": decisions[0]["week"] if decisions else None,
    }
    return render(request, "arena/cohort_detail.html", context)


class _EntryTable(list):
    """A cohort's entry rows, with the staff corrections that moved them."""

    corrections: list


def _entries_with_corrections(cohort: Cohort) -> _EntryTable:
    positions = selectors.cohort_positions(cohort)
    rows = _EntryTable(selectors.entry_rows(cohort, positions))
    rows.corrections = selectors.staff_corrections(cohort, positions=positions)
    names = {e.pk: entry_name(e) for e in rows}
    moved = set()
    for rc in rows.corrections:
        moved |= rc.entry_ids
        rc.entry_names = sorted(names[i] for i in rc.entry_ids if i in names)
    for e in rows:
        e.corrected = e.pk in moved
    return rows


def entry_name(e) -> str:
    rep = f" #{e.replicate}" if e.replicate > 1 else ""
    return f"{e.competitor.display_name}{rep}"


@page({"replicate": REPLICATE, "range": RANGE})
@require_safe
def entry_detail(
    request: HttpRequest, cohort_id: int, slug: str, replicate: int, range_key: str
) -> HttpResponse:
    entry = selectors.get_entry(cohort_id, slug, replicate)
    open_positions, closed_positions = selectors.entry_positions(entry)
    context = {
        "entry": entry,
        "cohort": entry.cohort,
        "competitor": entry.competitor,
        "replicates": selectors.entry_replicates(entry),
        "series": chart_reads.cohort_chart(entry.cohort, range_key, [entry], only=[entry.pk]),
        "range": range_key,
        "ranges": list(charts.RANGES),
        "series_url": reverse("api-cohort-series", args=[entry.cohort_id]) + f"?entry={entry.pk}",
        "extra_query": f"replicate={entry.replicate}" if entry.replicate > 1 else "",
        "decisions": selectors.entry_decisions(entry),
        "corrections": selectors.staff_corrections(entry.cohort, entry),
        "open_positions": open_positions,
        "closed_positions": closed_positions,
        "trades": selectors.entry_trades(entry),
        "forecasts": selectors.entry_forecasts(entry),
    }
    return render(request, "arena/entry_detail.html", context)


@page(depends=("data",))
@require_safe
def competitor_list(request: HttpRequest) -> HttpResponse:
    competitors = list(selectors.competitors_overview())
    headlines = leaders.competitor_headlines(competitors)
    for c in competitors:
        c.headline = headlines.get(c.pk)
    return render(request, "arena/competitor_list.html", {"competitors": competitors})


@page({"scope": SCOPE})
@require_safe
def competitor_detail(request: HttpRequest, slug: str, scope: str) -> HttpResponse:
    context = _competitor_context(slug, scope or None)
    if context is None:
        raise Http404(f"no competitor {slug}")
    return render(request, "arena/competitor_detail.html", context)


def _competitor_context(slug: str, asked: str | None) -> dict | None:
    competitor = Competitor.objects.filter(slug=slug).first()
    if competitor is None:
        return None
    scope = selectors.scope_or_default(asked, competitor)
    run, rows = selectors.competitor_rows(competitor, scope)
    overall = next((r for r in rows if r.cohort_id is None), None)
    details = overall.stored_details if overall else RowDetails()
    bins = [asdict(b) for b in details.calibration]
    clv = details.clv
    context = {
        "competitor": competitor,
        "scope": scope,
        "scopes": selectors.SCOPES,
        "run": run,
        "overall": overall,
        "cohort_rows": [r for r in rows if r.cohort_id is not None],
        "details": details,
        "calibration_bins": bins,
        "reliability": _coloured(charts.reliability(bins), competitor),
        "clock": standings.clock(run),
        "provisional_n": provisional_threshold(),
        "provisional_delta": standings.PROVISIONAL_DELTA,
        "skill_places": standings.places_to_separate(
            [overall.skill_vs_market] if overall else [],
            [overall.skill_lo, overall.skill_hi] if overall else [],
            3,
        ),
        "murphy": details.murphy,
        "clv": clv,
        "edge_label": details.edge_label or (clv.label if clv else None),
        "method": details.methodology,
        "multiclass": details.brier_multiclass,
        "tournament": details.tournament,
        "dm_row": _dm_row(run, competitor),
        "extra_details": _scalar_extras(details),
        "champions": details.champions_clothes,
        "costs": selectors.competitor_costs(competitor),
        "entries": selectors.competitor_entries(competitor),
    }
    return context


def _coloured(payload: dict | None, competitor: Competitor) -> dict | None:
    if payload is not None:
        payload["color"] = colours.colour_for(competitor)
    return payload


# Measures the competitor page draws in their own sections; every other stored measure is listed
# under "Other measures".
KNOWN_DETAIL_KEYS = {
    "calibration",
    "murphy",
    "clv",
    "edge_label",
    "tournament",
    "slug",
    "display_name",
    "champions_clothes",
    "methodology",
    "brier_multiclass",
    "bss_vs_base_rate",
}
DETAIL_LABELS = {
    "ece": "Expected calibration error (ECE)",
    # Not the headline "skill vs market" (a difference of Brier scores): same sign, other scale.
    "bss_vs_market": "Brier skill score vs market, 1 - ratio of mean Brier scores",
    "n_with_price": "Forecasts with a market price",
    "entries": "Entries",
    "settled_won": "Positions won",
    "settled_lost": "Positions lost",
    "bets_won": "Bets won (resolved markets)",
    "bets_lost": "Bets lost (resolved markets)",
    "n_binary": "Resolved binary questions (calibration, Murphy, base rate)",
    "base_rate": "Base rate of YES in resolved binary questions",
    "implied_confidence_n": "Bets in the implied-confidence diagnostic",
    "brier_convention": "Brier convention",
}


def _scalar_extras(details: RowDetails) -> list[tuple[str, object]]:
    """Other measures the scoring engine stored: scalars, and flat groups of scalars (e.g. the
    RPS and its count), labelled for readers where we know the measure."""
    out: list[tuple[str, object]] = []
    for key, value in sorted(details.to_json().items()):
        if key in KNOWN_DETAIL_KEYS:
            continue
        label = DETAIL_LABELS.get(key, key.replace("_", " ").capitalize())
        if isinstance(value, dict):
            flat = [f"{k}: {_short(v)}" for k, v in value.items() if _is_scalar(v)]
            if flat:
                out.append((label, "; ".join(flat)))
        elif _is_scalar(value):
            out.append((label, _short(value)))
    return out


def _is_scalar(v: object) -> bool:
    return v is None or isinstance(v, int | float | str | bool)


def _short(v: object) -> object:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "—" if v is None else v


@dataclass(frozen=True)
class DmCell:
    """One pair of the Diebold-Mariano matrix, seen from the page's competitor: a negative
    statistic or mean difference favours it."""

    other: str
    n: int | None
    mean_diff: float | None
    stat: float | None
    p: float | None
    level: float | None
    verdict: str  # "better", "worse" or "no difference"


def _dm_row(run: ScoreRun | None, competitor: Competitor) -> list[DmCell]:
    """This competitor's row of the run's all-cohorts Diebold-Mariano matrix (Brier loss)."""
    if run is None:
        return []
    out = []
    for pair in run.stored_details.dm_for("all").brier:
        if competitor.slug not in (pair.a, pair.b):
            continue
        mine_first = pair.a == competitor.slug
        sign = 1 if mine_first else -1
        winner = {"a_better": pair.a, "b_better": pair.b}.get(pair.verdict or "")
        verdict = (
            "no difference"
            if winner is None
            else "better"
            if winner == competitor.slug
            else "worse"
        )
        out.append(
            DmCell(
                other=(pair.b if mine_first else pair.a) or "",
                n=pair.n,
                mean_diff=_signed(pair.mean_diff, sign),
                stat=_signed(pair.stat, sign),
                p=pair.p,
                level=pair.level,
                verdict=verdict,
            )
        )
    return sorted(out, key=lambda r: r.other)


def _signed(value: float | None, sign: int) -> float | None:
    return value * sign if isinstance(value, int | float) else None


@page(
    {"q": params.text(), "status": params.choice(Market.Status.values),
     "page": params.integer(1, MAX_PAGE, 1, arg="number")},
    depends=("data",),
    htmx_target="market-results",
)  # fmt: skip
@require_safe
def market_list(request: HttpRequest, q: str, status: str, number: int) -> HttpResponse:
    paginator = Paginator(selectors.market_search(q, status), selectors.MARKET_PAGE_SIZE)
    if number > paginator.num_pages:
        raise Http404(f"there are {paginator.num_pages} pages")
    page = paginator.page(number)
    context = {
        "page": page,
        "q": q,
        "status": status,
        "statuses": Market.Status.choices,
    }
    if _htmx(request) and request.headers.get("HX-Target") == "market-results":
        return render(request, "arena/market_list.html#market-results", context)
    return render(request, "arena/market_list.html", context)


@page({"range": RANGE}, depends=("data",))
@require_safe
def market_detail(request: HttpRequest, market_id: int, range_key: str) -> HttpResponse:
    market = get_object_or_404(Market, pk=market_id)
    forecasts = selectors.market_forecasts(market)
    prices = chart_reads.market_price_chart(market, range_key)
    context = {
        "market": market,
        "prices": prices,
        "range": prices["range"],
        "ranges": list(charts.RANGES),
        "series_url": reverse("api-market-prices", args=[market.pk]),
        "holders": selectors.market_holders(market),
        "forecasts": forecasts,
        "trail": selectors.market_resolution_trail(market),
        "last_prices": sorted((market.last_prices or {}).items()),
    }
    return render(request, "arena/market_detail.html", context)


@page(depends=("data",))
@require_safe
def decision_detail(request: HttpRequest, decision_id: int) -> HttpResponse:
    decision = selectors.get_decision(decision_id)
    # Baselines answer through the same path but no model runs: zero tokens and latency would
    # read as a model answering instantly for free, so the page says so instead.
    model_called = bool(decision.llm_calls.all()) and decision.entry.competitor.kind != "baseline"
    context = {
        "decision": decision,
        "model_called": model_called,
        "seal": selectors.decision_seal(decision),
    }
    return render(request, "arena/decision_detail.html", context)


@page(depends=("data",))
@require_safe
def methodology(request: HttpRequest) -> HttpResponse:
    from core import methodology as m

    context = {
        "version": m.METHODOLOGY_VERSION,
        "hash": m.METHODOLOGY_HASH,
        "constants": m.describe(),
        "rules": trading_rules(),
        "provisional_n": provisional_threshold(),
        "horizon_hours": m.CONSTANTS.clv_close_horizon_hours,
        "history": m.history(),
        "unsealed": sorted(m.UNSEALED_HASHES.items()),
        "glossary": glossary.TERMS,
        "signing_key": seal_sign.public_key_info(),
    }
    return render(request, "arena/methodology.html", context)


@require_safe
def exports_page(request: HttpRequest) -> HttpResponse:
    """What can be downloaded, with every filter, cap and default window (web/exports.py)."""
    kinds = selectors.scopes_with_cohorts()
    own_clock = [k for k in kinds if k in exports.OWN_CLOCK]
    items = []
    for name, spec in exports.SPECS.items():
        links = [(f"all kinds, last {exports.DEFAULT_DAYS} days", "")]
        if own_clock and "live" in kinds:
            links.append((f"live only, last {exports.DEFAULT_DAYS} days", "?scope=live"))
        links += [(f"{kind} only, all of its time", f"?scope={kind}") for kind in own_clock]
        items.append(
            {
                "name": name,
                "spec": spec,
                "columns": [column for column, _ in spec.columns],
                "links": [
                    {
                        "label": label,
                        "csv": reverse("export", args=[name, "csv"]) + query,
                        "json": reverse("export", args=[name, "json"]) + query,
                    }
                    for label, query in links
                ],
            }
        )
    context = {
        "items": items,
        "scopes": exports.SCOPES,
        "default_days": exports.DEFAULT_DAYS,
        "default_limit": exports.DEFAULT_LIMIT,
        "max_limit": exports.MAX_LIMIT,
    }
    return render(request, "arena/exports.html", context)


@page(depends=("data",))
@require_safe
def about(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "arena/about.html",
        {
            "competitors": selectors.competitors_overview(),
            "min_bet": _constant("min_bet"),
            "max_bet_fraction": _constant("max_bet_fraction"),
        },
    )


def _constant(name: str):
    from core import methodology as m

    return getattr(m.CONSTANTS, name, None)
