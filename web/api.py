"""The read-only JSON API (no login, cacheable).

Conventions, for every endpoint here:
- Money (cash, value, invested, amounts, cost basis, P/L, payouts) is a JSON **string with two
  decimals**, e.g. "10000.00", so no client ever sees a binary float of a cent amount. LLM costs
  in USD are strings with at least six decimals, more when the provider billed finer (up to ten,
  e.g. "0.00000735"). Probabilities, prices, shares, returns (percent) and
  counts are JSON numbers. The chart series (`/series`) values are numbers rounded to cents,
  because they exist to be drawn.
- Times are ISO 8601 in UTC.
- Lists are bounded: `limit` defaults to 50, at most 200; `offset` pages. A parameter value
  outside what is documented (`limit=abc`, `limit=0`, an unknown `range`) answers 400 with
  `{"error": "..."}` (web/params.py), never a silent default.
- Every cohort carries `kind` (live / replay / demo) so replayed and synthetic data are never
  mistaken for live results, and every competitor row `competitor_simulated` (true when the
  arena's built-in simulated model answered, not a real one).
- Errors are JSON `{"error": "..."}` with the status (400, 404, 405; web/api_errors.py).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404

from agents.endpoint_secrets import without_userinfo
from cohorts.llm_calls import call_dict
from cohorts.models import Cohort, Entry
from cohorts.seals import keys as seal_keys
from cohorts.seals.keys import key_dict
from cohorts.seals.sign import public_key_info
from markets.models import Market
from web import chart_reads, charts, lineage, params, seal_reads, selectors
from web.api_errors import api_view
from web.cache import page
from web.method import method_files

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
money = charts.as_money
MAX_OFFSET = 10**9
MAX_ID = 2**62
# What the endpoints read from their query strings: parsed once (web/cache.py `@page`) and
# handed to the views as keyword arguments.
LIMIT = params.integer(1, MAX_LIMIT, DEFAULT_LIMIT)
OFFSET = params.integer(0, MAX_OFFSET, 0)
KIND = params.choice(selectors.SCOPES)
RANGE = params.choice(charts.RANGES, charts.DEFAULT_RANGE, fold_case=True, arg="range_key")


def _iso(ts) -> str | None:
    return ts.isoformat() if ts else None


def _usd6(value: Decimal | None) -> str | None:
    """Six decimals at least, ten at most: a cost billed at 0.00000735 keeps its digits."""
    if value is None:
        return None
    whole, _, frac = f"{Decimal(value).quantize(Decimal('1e-10')):f}".partition(".")
    return f"{whole}.{frac.rstrip('0').ljust(6, '0')}"


def _json(data: Any, status: int = 200) -> JsonResponse:
    response = JsonResponse(data, status=status, json_dumps_params={"separators": (",", ":")})
    response["Cache-Control"] = "public, max-age=60"
    return response


def _cohort(cohort_id: int) -> Cohort:
    cohort = selectors.get_cohort(cohort_id)
    if cohort is None:
        raise Http404(f"no cohort at /api/cohorts/{cohort_id}")
    return cohort


def _chart_json(chart: chart_reads.ChartJSON) -> HttpResponse:
    # The chart's JSON text goes out as it is: the same bytes a page embeds.
    response = HttpResponse(chart.text, content_type="application/json")
    response["Cache-Control"] = "public, max-age=60"
    return response


def _cohort_dict(c: Cohort) -> dict[str, Any]:
    return {
        "id": c.pk,
        "kind": c.kind,
        "label": c.label,
        "week_start": _iso(c.week_start),
        "status": c.status,
        "decision_weeks": c.decision_weeks,
        "initial_balance": money(c.initial_balance),
        "methodology_version": c.methodology_version,
        "methodology_hash": c.methodology_hash,
    }


def _entry_dict(e: Entry) -> dict[str, Any]:
    return {
        "id": e.pk,
        "competitor": e.competitor.slug,
        "competitor_name": e.competitor.display_name,
        "competitor_simulated": e.competitor.simulated,
        "replicate": e.replicate,
        "cash": money(e.cash),
        "invested": money(e.invested),
        "value": money(e.value),
        "value_basis": "cost" if e.value_at_cost else "snapshot",
        "value_at": _iso(getattr(e, "snap_ts", None)),
        "return_pct": round(e.return_pct, 4),
        "trades": e.n_trades,
        "open_positions": e.n_open,
        "resolved_positions": e.n_resolved,
    }


@page({"kind": KIND, "limit": LIMIT, "offset": OFFSET}, depends=("data",))
@api_view
def cohorts(request: HttpRequest, kind: str, limit: int, offset: int) -> JsonResponse:
    """Cohorts, newest first, with entry counts. `?kind=live|replay|demo`, `limit`, `offset`."""
    qs = selectors.cohorts_overview(kind or None)
    rows = [
        {**_cohort_dict(c), "entries": c.n_entries, "latest_week": c.latest_week}
        for c in qs[offset : offset + limit]
    ]
    return _json({"limit": limit, "offset": offset, "cohorts": rows})


@page()
@api_view
def cohort(request: HttpRequest, cohort_id: int) -> JsonResponse:
    """One cohort with every entry's cash, invested, value and counts (money as strings)."""
    c = _cohort(cohort_id)
    entries = selectors.entry_rows(c)
    return _json({**_cohort_dict(c), "entries": [_entry_dict(e) for e in entries]})


@page({"range": RANGE, "entry": params.integer(1, MAX_ID, arg="entry_id")})
@api_view
def cohort_series(
    request: HttpRequest, cohort_id: int, range_key: str, entry_id: int | None
) -> HttpResponse:
    """Per-entry value series, `?range=` one of charts.RANGES (default ALL), `?entry=<id>` for one.

    At most 400 sample times (`step_seconds` apart on a fixed UTC grid, plus the latest snapshot
    when it falls between two), each entry's value there: its last snapshot at or before that
    time (cohorts/series/write.py keeps them as snapshots are written). `x` is shared by all entries;
    `y` holds null outside an entry's life. Each entry has its competitor's fixed `color` and a
    `dash`; `annotations` ({x, kind: cohort|correction, label, detail}) mark weekly decisions,
    the cohort's lifecycle and staff corrections of markets its entries held.
    """
    c = _cohort(cohort_id)
    only = None if entry_id is None else [entry_id]  # not one of the cohort's: no entries
    return _chart_json(chart_reads.cohort_chart(c, range_key, only=only))


@page({"scope": KIND, "range": RANGE})
@api_view
def overview_series(request: HttpRequest, scope: str, range_key: str) -> HttpResponse:
    """The home chart: each competitor's chain-linked growth (%) over its entries of a scope.
    `?scope=live|replay|demo` (default: the scope the site shows by default), `?range=` as for
    cohort series. Each series has its competitor's fixed `color`; `annotations` mark cohorts
    opening and staff corrections."""
    return _chart_json(chart_reads.overview_chart(scope or None, range_key))


@page({"range": RANGE}, depends=("data",))
@api_view
def market_prices(request: HttpRequest, market_id: int, range_key: str) -> JsonResponse:
    """A market's price history per outcome, `?range=` as for cohort series (anchored at the
    market's latest price). Each line holds its price until the next point (draw it as a step)
    and runs to the resolution (or the latest quote); `annotations` mark the resolution and
    staff changes."""
    m = get_object_or_404(Market, pk=market_id)
    return _json(chart_reads.market_price_chart(m, range_key))


@page(depends=("data",))
@api_view
def decision(request: HttpRequest, decision_id: int) -> JsonResponse:
    """The full audit record of one decision: prompts, every LLM call, parsed result, trades."""
    return decision_json(selectors.get_decision(decision_id))


def decision_json(d) -> JsonResponse:
    """One decision's audit record (public, and an outside agent's own through the agent API)."""
    entry = d.entry
    return _json(
        {
            "id": d.pk,
            "cohort": {"id": entry.cohort_id, "kind": entry.cohort.kind},
            "entry": entry.pk,
            "competitor": entry.competitor.slug,
            "competitor_simulated": entry.competitor.simulated,
            "replicate": entry.replicate,
            "week": d.week,
            "status": d.status,
            "action": d.action,
            "decided_at": _iso(d.decided_at),
            "claimed_at": _iso(d.claimed_at),
            "finished_at": _iso(d.finished_at),
            "takeovers": d.takeovers,
            "reasoning": d.reasoning,
            "parsed": d.parsed,
            "validation_errors": d.validation_errors,
            "hold_reason": d.hold_reason,
            "error": d.error,
            "universe_hash": d.universe_hash,
            "prompt_version": d.prompt_version,
            "prompt_sha256": d.prompt_sha256,
            "system_prompt": d.system_prompt,
            "user_prompt": d.user_prompt,
            "cash_before": money(d.cash_before),
            "tokens_in": d.tokens_in,
            "tokens_out": d.tokens_out,
            "cost_usd": _usd6(d.cost_usd),
            "latency_ms": d.latency_ms,
            "llm_calls": [_shown_call(call) for call in d.llm_calls.all()],
            "forecasts": [
                {
                    "market": f.market_id,
                    "question": f.market.question,
                    "outcome": f.outcome,
                    "probability": f.probability,
                    "market_price": f.market_price,
                    "source": f.source,
                }
                for f in d.forecasts.all()
            ],
            "trades": [_trade_dict(t) for t in d.trades.all()],
            "seal": _decision_seal(d),
            "release": lineage.release_dict(d.release, d.entry.competitor),
            # Rounds lost to a provider outage, and a retryable decision's next round.
            "retry_rounds": d.retry_rounds,
            "retry_after": _iso(d.retry_after),
            # An outside agent's submissions for this decision, as received (cohorts.models
            # AgentSubmission); empty for the arena's own competitors.
            "submissions": [submission_dict(s) for s in d.submissions.all()],
        }
    )


def submission_dict(s) -> dict[str, Any]:
    return {
        "id": s.id,
        "received_at": _iso(s.received_at),
        "token_prefix": s.token_prefix,
        "content_type": s.content_type,
        "body": bytes(s.body).decode("utf-8", errors="replace"),
        "body_bytes": s.body_bytes,
        "signature": s.signature,
        "public_key": s.public_key,
        "signature_verified": s.signature_verified,
        "outcome": s.outcome,
        "http_status": s.http_status,
        "problems": s.problems,
    }


def _decision_seal(d) -> dict[str, Any] | None:
    """The decision's record hash and the roots covering it (null until its week is sealed)."""
    sealed = seal_reads.decision_seal(d)
    if sealed is None:
        return None
    digest = sealed["digest"]
    return {
        "record_hash": digest.record_hash,
        "link": digest.link,
        "chain_seq": digest.seq,
        "amendment": digest.amendment,
        "roots": [
            {"seq": r.seq, "root": r.root, "sealed_at": _iso(r.sealed_at)} for r in sealed["roots"]
        ],
    }


def _trade_dict(t) -> dict[str, Any]:
    return {
        "id": t.pk,
        "market": t.position.market_id,
        "outcome": t.position.outcome,
        "side": t.side,
        "amount": money(t.amount),
        "shares": float(t.shares),
        "price": float(t.price),
        "realized_pnl": money(t.realized_pnl),
        "executed_at": _iso(t.executed_at),
    }


def _market_dict(m: Market) -> dict[str, Any]:
    return {
        "id": m.pk,
        "source": m.source,
        "external_id": m.external_id,
        "question": m.question,
        "slug": m.slug,
        "url": m.link or None,  # only http(s): never a javascript: URL
        "kind": m.kind,
        "outcomes": m.outcomes,
        "prices": {k: float(v) for k, v in (m.last_prices or {}).items() if _is_number(v)},
        "priced_at": _iso(m.last_priced_at),
        "status": m.status,
        "close_time": _iso(m.close_time),
        "volume": money(m.volume),
        "resolved_outcome": m.resolved_outcome or None,
        "resolved_at": _iso(m.resolved_at),
        "resolved_by": m.resolved_by or None,
    }


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


@page(
    {"status": params.choice(Market.Status.values), "q": params.search(), "limit": LIMIT,
     "offset": OFFSET},
    depends=("data",),
)  # fmt: skip
@api_view
def markets(request: HttpRequest, status: str, q: str, limit: int, offset: int) -> JsonResponse:
    """Markets by volume. `?status=open|closed|resolved|void`, `?q=` (question text), `limit`
    (default 50, max 200), `offset`."""
    qs = selectors.market_search(q, status)
    rows = [_market_dict(m) for m in qs[offset : offset + limit]]
    return _json({"limit": limit, "offset": offset, "markets": rows})


@page(depends=("data",))
@api_view
def market(request: HttpRequest, market_id: int) -> JsonResponse:
    """One market with its rules, open positions (money as strings) and resolution trail."""
    m = get_object_or_404(Market, pk=market_id)
    data = _market_dict(m)
    data["description"] = m.description
    data["positions"] = [
        {
            "cohort": p.entry.cohort_id,
            "cohort_kind": p.entry.cohort.kind,
            "competitor": p.entry.competitor.slug,
            "competitor_simulated": p.entry.competitor.simulated,
            "replicate": p.entry.replicate,
            "outcome": p.outcome,
            "shares": float(p.shares),
            "cost_basis": money(p.cost_basis),
        }
        for p in selectors.market_holders(m)
    ]
    data["resolution_changes"] = [
        {
            "changed_at": _iso(rc.changed_at),
            "source": rc.source,
            "by": rc.staff_name or None,
            "from": {"status": rc.from_status, "outcome": rc.from_outcome},
            "to": {"status": rc.to_status, "outcome": rc.to_outcome},
            "reason": rc.reason,
        }
        for rc in selectors.market_resolution_trail(m)
    ]
    return _json(data)


def _seal_dict(s, digests) -> dict[str, Any]:
    return {
        "cohort": {"id": s.cohort_id, "kind": s.scope},
        "week": s.week,
        "seq": s.seq,
        "reason": s.reason,
        "root": s.root,
        "genesis": s.genesis,
        "count": s.count,
        "format": s.format,
        "sealed_at": _iso(s.sealed_at),
        "digests": [
            {
                "seq": d.seq,
                "entry": d.entry_id,
                "decision": d.decision_id,
                "state": d.state,
                "status": d.status,
                "amendment": d.amendment,
                "record_hash": d.record_hash,
                "link": d.link,
            }
            for d in digests
        ],
    }


def _shown_call(call) -> dict[str, Any]:
    """A call as shown: a URL stored with a user name or password (before ARENA_LLM_ENDPOINTS
    refused them) is shown without them; the sealed record keeps what was stored."""
    shown = call_dict(call, time=_iso, money=_usd6)
    shown["url"] = without_userinfo(shown["url"] or "") or shown["url"]
    return shown


@page(
    {"cohort": params.integer(1, MAX_ID, arg="cohort_id"), "kind": KIND, "limit": LIMIT,
     "offset": OFFSET},
    depends=("data",),
)  # fmt: skip
@api_view
def seals(
    request: HttpRequest, cohort_id: int | None, kind: str, limit: int, offset: int
) -> JsonResponse:
    """Week roots, newest first, each with the record hash of every decision it covers; the
    head of each event log; the newest signed checkpoint of each log and the public key it
    verifies with (on every page, so the newest is one request away). `?cohort=ID`,
    `?kind=live|replay|demo`, `limit` (default 50, max 200), `offset`; `total` counts the roots
    and `next` is the following page's path and query (null on the last). The records themselves:
    /exports/seals.json; how to check them: docs/verification.md (`arena verify --published`)."""
    feed = seal_reads.seal_feed(kind or None, cohort_id)
    checkpoints, withheld = seal_keys.servable_checkpoints(kind or None)
    total = feed.count()
    found = list(feed[offset : offset + limit])
    digests = seal_reads.seal_digests(found)
    following = None
    if offset + limit < total:
        query = {
            "cohort": cohort_id,
            "kind": kind or None,
            "limit": limit,
            "offset": offset + limit,
        }
        # A path, not an absolute URL: the response is cached across hosts (web/cache.py).
        following = (
            request.path + "?" + urlencode({k: v for k, v in query.items() if v is not None})
        )
    return _json(
        {
            "format": "arena-seal/1",
            "limit": limit,
            "offset": offset,
            "total": total,
            "next": following,
            "seals": [_seal_dict(s, digests[s.pk]) for s in found],
            "event_logs": [
                {**h, "updated_at": _iso(h["updated_at"])} for h in seal_reads.event_log_heads()
            ],
            "signing_key": public_key_info(),
            "signing_keys": [key_dict(k) for k in seal_keys.history()],
            # How to check all of this, served by the site (web/method.py).
            "method_files": [
                {k: f[k] for k in ("name", "sha256", "url")} for f in method_files().values()
            ],
            "checkpoints": checkpoints,
            **({"checkpoints_withheld": withheld} if withheld else {}),
        }
    )
