"""The public pages: one view and one template per page, a named partial for htmx swaps.

Views only read (web/selectors.py) and shape data for templates; chart data goes through
web/charts.py into `json_script` tags that static/arena/charts.js draws.
"""

from __future__ import annotations

from dataclasses import asdict

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_safe

from agents.models import Competitor
from cohorts.models import Cohort
from cohorts.seals import sign as seal_sign
from markets.models import Market
from scoring.metrics import provisional_threshold
from scoring.stored import RowDetails
from web import (
    attempts,
    chart_reads,
    charts,
    colours,
    competitor_view,
    decision_outcomes,
    glossary,
    leaders,
    lineage,
    method,
    params,
    rows,
    seal_reads,
    selectors,
    standings,
    table_html,
    visitor_reads,
)
from web.cache import is_partial, page
from web.exports import files as exports
from web.plain_text import strip_markdown
from web.templatetags.arena import version

# The trading rules in prose; {min_bet} and {max_bet_fraction} are filled from the frozen
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
    "A live week is decided only on markets synced within the last {sync_bound} minutes; a "
    "decision run more than {price_window} minutes after its universe froze (a re-run) trades at "
    "the current marked price, never the frozen one, and records both.",
    "Resolved markets pay $1 per winning share; void markets refund the remaining cost basis; a staff "
    "correction reverses the earlier settlement through the ledger and is shown in the market's "
    "audit trail.",
    "Competitors also state probabilities for a seeded sample of markets they did not bet on, so "
    "forecasting skill is scored beyond the markets they chose.",
]


def trading_rules() -> list[str]:
    """TRADING_RULES with the frozen amounts of the current methodology."""
    from core.methodology import CONSTANTS

    amounts = {
        "min_bet": CONSTANTS.min_bet,
        "max_bet_fraction": f"{CONSTANTS.max_bet_fraction:.0%}",
        "sync_bound": CONSTANTS.market_sync_bound_minutes,
        "price_window": CONSTANTS.universe_price_window_minutes,
    }
    return [rule.format(**amounts) for rule in TRADING_RULES]


# What the pages read from their query strings: parsed once (web/cache.py `@page`) and handed
# to the views as keyword arguments.
MAX_REPLICATE = 1000
MAX_PAGE = 10**9
SCOPE = params.choice(selectors.SCOPES)  # "" = the data-aware default (scope_or_default)
RANGE = params.choice(charts.RANGES, charts.DEFAULT_RANGE, fold_case=True, arg="range_key")
REPLICATE = params.integer(1, MAX_REPLICATE, 1)


@page(
    {"scope": SCOPE, "sort": params.choice(selectors.SORTABLE, "rank"),
     "dir": params.choice(("asc", "desc"), arg="direction"), "range": RANGE,
     "cohort": params.integer(1, MAX_PAGE)},
    htmx_target="leaderboard-table",
)  # fmt: skip
@require_safe
def home(
    request: HttpRequest,
    scope: str,
    sort: str,
    direction: str,
    range_key: str,
    cohort: int | None = None,
) -> HttpResponse:
    if cohort is not None:
        # The leaderboard has no per-cohort view: a cohort's standings are on its own page.
        if not Cohort.objects.filter(pk=cohort).exists():
            raise params.BadParameter(f"cohort: there is no cohort {cohort}")
        return redirect("cohort-detail", cohort_id=cohort)
    if is_partial(request):
        scope, cohorts = selectors.scope_or_default(scope or None), []
    else:
        scope, cohorts = _scope_and_cohorts(scope or None)
    with colours.in_scope(scope):  # swatches match the scope's chart lines
        descending = {"asc": False, "desc": True}.get(direction)
        if descending is None:
            descending = not selectors.SORTABLE[sort][1]  # each column starts best-first
        # The table alone (a sort click) reads the same one query: a board's run read whole
        # would parse every group's tests to letter one group.
        facts = visitor_reads.home_facts(scope, sort, descending)
        run, table = facts.run, facts.rows
        board = standings.build(run, table, details=facts.details)
        context = {
            "scope": scope,
            "scopes": selectors.SCOPES,
            "run": run,
            "board": board,
            "rows": board.scored,
            "sort": sort,
            "descending": descending,
            "columns": _leaderboard_columns(scope, sort, descending, board.headline),
        }
        run_method = version(run.methodology_version) if run else ""
        context["leader_rows_html"] = table_html.leader_rows_html(
            rows.leader_rows(board, scope, sort), board.headline, run_method
        )
        if is_partial(request):
            return render(request, "arena/home.html#leaderboard-table", context)
        context["counts_text"] = standings.counts_text(facts.details.counts.get("all"))
        context["common"] = standings.common_lines(board)
        context["common_places"] = standings.places_to_separate(
            [c.view.skill for c in context["common"]],
            [e for c in context["common"] for e in (c.view.skill_lo, c.view.skill_hi)],
            3,
        )
        context["rescoring"] = visitor_reads.rescoring_since(scope, run, facts.corrected_since_run)
        # Read only when the scope's chart found any staff correction at all (one cheap test).
        context["last_correction"] = (
            visitor_reads.last_correction(scope) if facts.staff_corrections else None
        )
        context["markets_synced"] = scope != "live" or facts.markets_synced
        if not context["markets_synced"]:
            context["sync"] = visitor_reads.sync_state()
        context["n_cohorts"] = len(cohorts)
        context["chart"] = chart_reads.overview_chart(
            scope,
            range_key,
            cohorts,
            facts.staff_corrections,
            competitors={row.competitor_id: row.competitor for row in facts.rows},
        )
        context["range"] = range_key
        context["ranges"] = list(charts.RANGES)
        context["series_url"] = reverse("api-overview") + f"?scope={scope}"
        return render(request, "arena/home.html", context)


def _scope_and_cohorts(raw: str | None) -> tuple[str, list[Cohort]]:
    """selectors.scope_or_default(raw) and that scope's scope_cohorts, in one query when no
    scope is asked for: the cohorts of every default scope are read (a few a week) and the
    first scope that has any is kept."""
    if raw in selectors.SCOPES:
        return raw, selectors.scope_cohorts(raw)
    rows = selectors.scope_cohorts(selectors.DEFAULT_SCOPES)
    kinds = {c.kind for c in rows}
    scope = next((k for k in selectors.DEFAULT_SCOPES if k in kinds), Cohort.Kind.LIVE)
    return scope, [c for c in rows if c.kind == scope]


# (key, label, glossary term, class): "key" columns stay in view on a phone.
LEADERBOARD_COLUMNS = [
    ("rank", "Rank", "rank", "key"),
    ("competitor", "Competitor", None, "key"),
    ("skill", "Skill vs market", "skill", "key"),
    ("brier", "Brier", "brier", ""),
    ("log_score", "Log score", "log_score", ""),
    ("return", "Pooled return", "return", "key"),
    ("pnl", "P/L", "pnl", ""),
    ("win_rate", "Win rate", "win_rate", ""),
    ("n_resolved", "Scored", "coverage", ""),
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
                "sortable": key in selectors.SORTABLE,
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
    with colours.in_scope(cohort.kind):
        facts = visitor_reads.cohort_facts(cohort)
        entries = _entries_with_corrections(cohort, facts.staff_corrections)
        decisions = selectors.recent_decisions(cohort)
        universes = selectors.cohort_universes(cohort)
        universe = universes.latest_markets
        run = facts.run
        scored = leaders.cohort_board(cohort, run, facts.rows, facts.details) if run else None
        context = {
            "cohort": cohort,
            "standing": scored[1] if scored else None,
            "standing_rows_html": table_html.standing_rows_html(
                rows.leader_rows(scored[1], cohort.kind, "rank"), scored[1].headline
            )
            if scored
            else "",
            "entries": entries,
            "entry_rows_html": table_html.entry_rows_html(rows.entry_rows(cohort.pk, entries)),
            "corrections": entries.corrections,
            "series": chart_reads.cohort_chart(
                cohort, range_key, entries, corrections=entries.corrections, frozen=universes.frozen
            ),
            "range": range_key,
            "ranges": list(charts.RANGES),
            "series_url": reverse("api-cohort-series", args=[cohort.pk]),
            "universe_week": universes.latest_week,
            "universe": universe_html(rows.universe_rows(universe[:100])),
            "universe_shown": min(len(universe), 100),
            "universe_total": len(universe),
            "rescoring": visitor_reads.rescoring_since(cohort.kind, run, facts.corrected_since_run),
            "decisions": bool(decisions),
            "decision_rows_html": table_html.decision_rows_html(rows.decision_rows(decisions)),
            "seals": seal_reads.cohort_seal_rows(cohort),
            # Decisions are newest week first, so the first one is the latest decided week.
            "latest_week": decisions[0]["week"] if decisions else None,
        }
        return render(request, "arena/cohort_detail.html", context)


def universe_html(markets: list[rows.UniverseRow]) -> SafeString:
    """The universe table's rows as HTML, every value escaped: a hundred rows of three cells
    cost the template engine more than the rest of the page's tables together, and
    format_html twice what plain escaping does (0.61 against 0.27 ms for a hundred)."""
    out = []
    for m in markets:
        question = escape(m.question)
        cell = f'<a href="{escape(m.href)}">{question}</a>' if m.href else question
        out.append(f"<tr><td>{cell}</td><td>{escape(m.prices)}</td></tr>")
    return mark_safe("\n".join(out))  # noqa: S308  every value above is escaped


class _EntryTable(list):
    """A cohort's entry rows, with the staff corrections that moved them."""

    corrections: list


def _entries_with_corrections(cohort: Cohort, any_staff: bool | None = None) -> _EntryTable:
    rows = _EntryTable(selectors.entry_rows(cohort))
    rows.corrections = selectors.staff_corrections(cohort, any_staff=any_staff)
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
    with colours.in_scope(entry.cohort.kind):
        open_positions, closed_positions = selectors.entry_positions(entry)
        visitor_reads.with_value(entry, open_positions)  # the header's value and return
        # The entry's staff corrections are the ones its chart marks: read once for both.
        corrections = selectors.staff_corrections(entry.cohort, entry)
        context = {
            "entry": entry,
            "cohort": entry.cohort,
            "competitor": entry.competitor,
            "replicates": selectors.entry_replicates(entry),
            "series": chart_reads.cohort_chart(
                entry.cohort, range_key, [entry], only=[entry.pk], corrections=corrections
            ),
            "range": range_key,
            "ranges": list(charts.RANGES),
            "series_url": reverse("api-cohort-series", args=[entry.cohort_id])
            + f"?entry={entry.pk}",
            "extra_query": f"replicate={entry.replicate}" if entry.replicate > 1 else "",
            "decisions": selectors.entry_decisions(entry),
            "corrections": corrections,
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
        "edge_min_n": _constant("sb_min_n"),
        "method": details.methodology,
        "multiclass": details.brier_multiclass,
        "tournament": details.tournament,
        "dm_row": competitor_view.dm_row(run, competitor),
        "extra_details": competitor_view.measures(details),
        "champions": details.champions_clothes,
        "costs": selectors.competitor_costs(competitor),
        "entries": selectors.competitor_entries(competitor),
        "releases": lineage.competitor_releases(competitor),
    }
    return context


def _coloured(payload: dict | None, competitor: Competitor) -> dict | None:
    if payload is not None:
        payload["color"] = colours.colour_for(competitor)
    return payload


@page(
    {"q": params.search(), "status": params.choice(Market.Status.values),
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
    if is_partial(request):
        return render(request, "arena/market_list.html#market-results", context)
    return render(request, "arena/market_list.html", context)


@page(
    {
        "range": RANGE,
        "page": params.integer(1, MAX_PAGE, 1, arg="number"),
        "trades": params.integer(1, MAX_PAGE, 1, arg="trades_number"),
    },
    depends=("data",),
)
@require_safe
def market_detail(
    request: HttpRequest, market_id: int, range_key: str, number: int, trades_number: int
) -> HttpResponse:
    market = get_object_or_404(Market, pk=market_id)
    forecasts = visitor_reads.market_forecasts_page(market, number)
    trades = visitor_reads.market_trades_page(market, trades_number)
    prices = chart_reads.market_price_chart(market, range_key)
    holders = selectors.market_holders(market, limit=visitor_reads.HOLDERS_SHOWN + 1)
    context = {
        "market": market,
        "prices": prices,
        "range": prices["range"],
        "ranges": list(charts.RANGES),
        "series_url": reverse("api-market-prices", args=[market.pk]),
        "holders": holders[: visitor_reads.HOLDERS_SHOWN],
        "more_holders": len(holders) > visitor_reads.HOLDERS_SHOWN,
        "forecasts": forecasts,
        "trades": trades,
        "trail": selectors.market_resolution_trail(market),
        "final": market.status in (Market.Status.RESOLVED, Market.Status.VOID),
        "last_prices": (
            visitor_reads.final_prices(market)
            if market.status in (Market.Status.RESOLVED, Market.Status.VOID)
            else visitor_reads.outcome_prices(market)
        ),
        "description": strip_markdown(market.description),
    }
    return render(request, "arena/market_detail.html", context)


@page(depends=("data",))
@require_safe
def decision_detail(request: HttpRequest, decision_id: int) -> HttpResponse:
    # Submissions are shown for an outside agent's decision only (its template reads them).
    decision = selectors.get_decision(decision_id, submissions=False)
    # Baselines answer through the same path but no model runs: zero tokens and latency would
    # read as a model answering instantly for free, so the page says so instead.
    model_called = bool(decision.llm_calls.all()) and decision.entry.competitor.kind != "baseline"
    context = {
        "decision": decision,
        "calls": attempts.call_views(decision, list(decision.llm_calls.all())),
        "model_called": model_called,
        "seal": seal_reads.decision_seal(decision),
        "release": lineage.release_view(decision.release, decision.entry.competitor)
        if decision.release
        else None,
        "questions": decision_outcomes.question_views(decision),
        "trade_views": decision_outcomes.trade_views(decision),
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
        "stray_hashes": sorted(m.UNSEALED_HASHES.items()),
        "glossary": glossary.TERMS,
        "signing_key": seal_sign.public_key_info(),
        "spec": method.scoring_spec(),
        "sb_resamples": m.CONSTANTS.sb_resamples,
        "p_error_strict": _mc_error(m.CONSTANTS.edge_label_alphas[0], m.CONSTANTS.sb_resamples),
        "p_error_loose": _mc_error(m.CONSTANTS.edge_label_alphas[1], m.CONSTANTS.sb_resamples),
    }
    return render(request, "arena/methodology.html", context)


def _mc_error(p: float, resamples: int) -> str:
    """The Monte Carlo standard error of a bootstrap p-value p, as the page prints it."""
    return f"{(p * (1 - p) / resamples) ** 0.5:.4f}"


@require_safe
def exports_page(request: HttpRequest) -> HttpResponse:
    """What can be downloaded, with every filter, cap and default window (web/exports/files.py)."""
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
                "columns": spec.header,
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
        "spec_url": reverse("methodology-spec") + "?download=1",
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
