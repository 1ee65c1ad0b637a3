"""Writes for the markets app: syncing Polymarket markets and prices, detecting resolutions,
and staff corrections of a resolution.

Every function here is safe to run twice at once: market rows are upserted (never
check-then-insert), and a resolution is recorded by a conditional UPDATE on the market's
status, so only one run writes the audit row.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import Q, QuerySet

from core import clock
from core.versions import data_changed
from markets import signals
from markets.bulk import insert_rows
from markets.clob import CLOSED_MARKET_FIDELITY, ClobClient
from markets.gamma import (
    GammaClient,
    MarketNotFound,
    MarketParseError,
    PageLog,
    ParsedMarket,
    parse_market,
)
from markets.models import Market, PricePoint, ResolutionChange

log = logging.getLogger(__name__)

POLYMARKET = Market.Source.POLYMARKET
OPEN, CLOSED = Market.Status.OPEN, Market.Status.CLOSED
RESOLVED, VOID = Market.Status.RESOLVED, Market.Status.VOID
FINAL = (RESOLVED, VOID)
UPSTREAM_REASON = "upstream resolution"
STORE_BATCH = 100  # rows per transaction when storing lookups (same as a keyset page)


# --- sync ---------------------------------------------------------------------------------


@dataclass
class SyncReport:
    limit: int
    pages: int = 0
    fetched: int = 0
    stored: int = 0
    new: int = 0
    parse_errors: int = 0
    bad_prices: int = 0
    price_points: int = 0
    left_top: int = 0
    tracked_checked: int = 0
    tracked_refreshed: int = 0
    tracked_missing: int = 0
    stopped_early: str = ""
    seconds: float = 0.0

    def summary(self) -> str:
        text = (
            f"synced {self.stored} markets ({self.new} new) from {self.pages} pages in "
            f"{self.seconds:.1f}s: {self.price_points} price points, {self.parse_errors} unreadable, "
            f"{self.bad_prices} with bad prices, {self.left_top} left the top {self.limit}, "
            f"{self.tracked_refreshed}/{self.tracked_checked} tracked refreshed "
            f"({self.tracked_missing} not found upstream)"
        )
        return text + (f"; stopped early: {self.stopped_early}" if self.stopped_early else "")


def sync_markets(
    limit: int | None = None,
    *,
    client: GammaClient | None = None,
    on_page: Callable[[int], None] | None = None,
) -> SyncReport:
    """Pull the top `limit` open markets by volume, upsert them with one price point per
    outcome, then refresh every tracked market that is no longer in the top."""
    started = time.monotonic()
    limit = settings.ARENA_SYNC_LIMIT if limit is None else limit
    client = client or GammaClient()
    report = SyncReport(limit=limit)
    now = clock.now()  # one timestamp per sync: all its price points share it
    before = Market.objects.live().count()

    pages = PageLog()
    seen: set[str] = set()
    for raw_page in client.iter_top_markets(limit, log_to=pages):
        parsed = _parse_all(raw_page, report, seen)
        report.stored += len(parsed)
        report.price_points += store_markets(parsed, now=now, in_top=True)
        if on_page is not None:
            on_page(len(raw_page))
    report.pages, report.stopped_early = pages.pages, pages.stopped_early

    # Only a complete walk of the top N says which markets dropped out of it.
    if not report.stopped_early:
        report.left_top = (
            Market.objects.live()
            .filter(in_top=True)
            .filter(_not_synced_since(now))
            .update(in_top=False)
        )
    _refresh_tracked(client, now, report)
    report.new = Market.objects.live().count() - before
    report.seconds = time.monotonic() - started
    log.info("sync_markets: %s", report.summary())
    data_changed()
    return report


def _refresh_tracked(client: GammaClient, now: datetime, report: SyncReport) -> None:
    # A market stays tracked until it is settled, because a position may still hold it.
    stale = list(
        Market.objects.live()
        .filter(tracked=True)
        .filter(_not_synced_since(now))
        .values_list("external_id", "condition_id")
    )
    report.tracked_checked = len(stale)
    if not stale:
        return
    raw = client.markets_by_condition_ids([cid for _, cid in stale if cid])
    for ext_id, cid in stale:
        if not cid:  # no condition id to batch on: ask for it by Gamma id
            with contextlib.suppress(MarketNotFound):  # gone: counted as missing below
                raw.append(client.get_market(ext_id))
    wanted = {ext_id for ext_id, _ in stale}
    seen: set[str] = set()
    parsed = [p for p in _parse_all(raw, report, seen) if p.external_id in wanted]
    for start in range(0, len(parsed), STORE_BATCH):
        report.price_points += store_markets(
            parsed[start : start + STORE_BATCH], now=now, in_top=False
        )
    report.tracked_refreshed = len(parsed)
    report.tracked_missing = len(wanted - {p.external_id for p in parsed})


def _not_synced_since(now: datetime) -> Q:
    return Q(last_synced_at__lt=now) | Q(last_synced_at__isnull=True)


def _parse_all(raw_markets: Iterable, report: SyncReport, seen: set[str]) -> list[ParsedMarket]:
    parsed = []
    for raw in raw_markets:
        report.fetched += 1
        try:
            market = parse_market(raw)
        except MarketParseError as exc:
            report.parse_errors += 1
            log.warning("skipping unreadable Gamma market: %s", exc)
            continue
        if market.external_id in seen:  # a repeated page must not double-count
            continue
        seen.add(market.external_id)
        if market.price_error:
            report.bad_prices += 1
            log.warning("market %s: prices rejected: %s", market.external_id, market.price_error)
        parsed.append(market)
    return parsed


# Upstream fields are overwritten on every sync. The rest are guarded: a resolved or void
# status is ours to change, a rejected quote keeps the last good one, and an attention flag
# stays until staff clear it.
_UPSTREAM_COLUMNS = [
    "condition_id", "slug", "event_slug", "event_title", "url", "question", "description",
    "resolution_source", "category", "tags", "kind", "outcomes", "token_ids", "neg_risk",
    "neg_risk_market_id", "group_item_title", "group_item_threshold", "open_time", "close_time",
    "closed_time", "volume", "liquidity", "uma_status", "raw", "last_synced_at", "updated_at",
]  # fmt: skip


def _upsert_sql() -> str:
    t = Market._meta.db_table
    final = ", ".join(f"'{s}'" for s in FINAL)
    sets = [f"{c} = excluded.{c}" for c in _UPSTREAM_COLUMNS] + [
        f"status = CASE WHEN {t}.status IN ({final}) THEN {t}.status ELSE excluded.status END",
        f"last_prices = CASE WHEN excluded.last_priced_at IS NULL THEN {t}.last_prices"
        " ELSE excluded.last_prices END",
        f"last_priced_at = COALESCE(excluded.last_priced_at, {t}.last_priced_at)",
        f"needs_attention = ({t}.needs_attention OR excluded.needs_attention)",
        f"attention_reason = CASE WHEN excluded.needs_attention THEN excluded.attention_reason"
        f" ELSE {t}.attention_reason END",
        f"in_top = ({t}.in_top OR excluded.in_top)",
    ]
    return "ON CONFLICT (source, external_id) DO UPDATE SET " + ", ".join(sets)


_UPSERT_SQL = _upsert_sql()


def store_markets(parsed: list[ParsedMarket], *, now: datetime, in_top: bool) -> int:
    """Upsert these markets and add their price points, in one transaction and a fixed
    number of statements whatever the number of markets. Returns price points written."""
    if not parsed:
        return 0
    # A stable row order keeps two concurrent syncs from locking rows in opposite orders.
    parsed = sorted(parsed, key=lambda p: p.external_id)
    rows = [_market_row(p, now=now, in_top=in_top) for p in parsed]
    with transaction.atomic():
        returned = insert_rows(Market, rows, conflict=_UPSERT_SQL, returning=("id", "external_id"))
        ids = {ext_id: pk for pk, ext_id in returned}
        points = [
            pt for p in parsed if p.prices for pt in _price_points(ids[p.external_id], p, now)
        ]
        insert_rows(PricePoint, points, conflict="ON CONFLICT DO NOTHING")
    return len(points)


def _market_row(p: ParsedMarket, *, now: datetime, in_top: bool) -> dict:
    prices = p.prices
    return {
        "source": POLYMARKET,
        "external_id": p.external_id,
        "condition_id": p.condition_id,
        "slug": p.slug,
        "event_slug": p.event_slug,
        "event_title": p.event_title,
        "url": _market_url(p),
        "question": p.question,
        "description": p.description,
        "resolution_source": p.resolution_source,
        "category": p.category,
        "tags": p.tags,
        "kind": Market.Kind.BINARY if p.is_binary else Market.Kind.MULTI,
        "outcomes": p.outcomes,
        "token_ids": p.token_ids,
        "neg_risk": p.neg_risk,
        "neg_risk_market_id": p.neg_risk_market_id,
        "group_item_title": p.group_item_title,
        "group_item_threshold": p.group_item_threshold,
        "open_time": p.open_time,
        "close_time": p.close_time,
        "closed_time": p.closed_time,
        "volume": p.volume,
        "liquidity": p.liquidity,
        "status": CLOSED if p.closed else OPEN,
        "last_prices": _price_map(p.outcomes, prices) if prices else {},
        "last_priced_at": now if prices else None,
        "uma_status": p.uma_status,
        "tracked": True,
        "in_top": in_top,
        "needs_attention": bool(p.price_error),
        "attention_reason": f"upstream prices rejected: {p.price_error}"[:300]
        if p.price_error
        else "",
        "raw": p.raw,
        "last_synced_at": now,
        "created_at": now,
        "updated_at": now,
    }


def _price_points(market_id: int, p: ParsedMarket, now: datetime) -> list[dict]:
    """One point per outcome: the mid from outcomePrices; bestBid/bestAsk quote the first
    outcome, so on a binary market the second side's bid/ask are their complements."""
    bid, ask = p.best_bid, p.best_ask
    points = []
    for i, (outcome, price) in enumerate(zip(p.outcomes, p.prices or [])):
        if i == 0:
            o_bid, o_ask = bid, ask
        elif i == 1 and p.is_binary:
            o_bid = 1 - ask if ask is not None else None
            o_ask = 1 - bid if bid is not None else None
        else:
            o_bid = o_ask = None
        points.append(
            {
                "market_id": market_id,
                "outcome": outcome,
                "ts": now,
                "price": price,
                "bid": o_bid,
                "ask": o_ask,
            }
        )
    return points


def _price_map(outcomes: list[str], prices: list[Decimal]) -> dict[str, str]:
    return {o: format(price.normalize(), "f") for o, price in zip(outcomes, prices)}


def _market_url(p: ParsedMarket) -> str:
    if p.event_slug and p.slug:
        return f"https://polymarket.com/event/{p.event_slug}/{p.slug}"[:500]
    return f"https://polymarket.com/market/{p.slug}"[:500] if p.slug else ""


# --- price history back-fill ---------------------------------------------------------------


def backfill_markets(markets: QuerySet, *, days: int = 2, client: ClobClient | None = None) -> dict:
    """Fill gaps in the price history of the given Polymarket markets (a sync missed during an
    outage leaves a hole in the chart and can move a market's closing line). Points already
    stored are kept, so running it daily costs only the missing ones. Which markets deserve it
    (the ones someone holds) is decided above this package: see cohorts.services."""
    held = markets.filter(source=POLYMARKET).order_by("pk")
    client = client or ClobClient()
    summary = {"markets": 0, "points": 0, "failed": 0}
    for market in held:
        try:
            summary["points"] += backfill_price_history(market, days=days, client=client)
            summary["markets"] += 1
        except Exception:  # one market's upstream trouble must not stop the others
            log.exception("back-filling market %s failed", market.pk)
            summary["failed"] += 1
    if summary["points"]:
        data_changed()
    return summary


def backfill_price_history(
    market: Market, *, days: int = 30, fidelity: int = 60, client: ClobClient | None = None
) -> int:
    """Add PricePoints from the CLOB's history for the `days` before now (or before the market
    closed). Points already stored at the same (outcome, time) are kept. Returns the number of
    points written; 0 for markets without CLOB tokens (replays, demo)."""
    if market.source != POLYMARKET or len(market.token_ids) != len(market.outcomes):
        return 0
    client = client or ClobClient()
    end = min(market.closed_time or clock.now(), clock.now())
    start = end - timedelta(days=days)
    if market.open_time and market.open_time > start:
        start = market.open_time
    if market.status != OPEN:
        fidelity = max(fidelity, CLOSED_MARKET_FIDELITY)  # finer is empty once closed
    rows: list[dict] = []
    if market.kind == Market.Kind.BINARY:
        # One token's history prices both sides: the book's mid for No is 1 - mid for Yes.
        first, second = market.outcomes
        for ts, price in client.prices_history(
            market.token_ids[0], start=start, end=end, fidelity=fidelity
        ):
            rows.append({"market_id": market.pk, "outcome": first, "ts": ts, "price": price})
            rows.append({"market_id": market.pk, "outcome": second, "ts": ts, "price": 1 - price})
    else:
        for outcome, token in zip(market.outcomes, market.token_ids):
            for ts, price in client.prices_history(token, start=start, end=end, fidelity=fidelity):
                rows.append({"market_id": market.pk, "outcome": outcome, "ts": ts, "price": price})
    with transaction.atomic():
        written = insert_rows(
            PricePoint, rows, conflict="ON CONFLICT DO NOTHING", returning=("id",)
        )
    return len(written)


# --- resolution ---------------------------------------------------------------------------


@dataclass
class ResolveReport:
    checked: int = 0
    resolved: int = 0
    voided: int = 0
    waiting: int = 0
    still_open: int = 0
    flagged: int = 0
    missing: int = 0
    settled: int = 0
    settle_failed: int = 0
    settlement_unavailable: bool = False
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        text = (
            f"checked {self.checked} markets in {self.seconds:.1f}s: {self.resolved} resolved, "
            f"{self.voided} void, {self.waiting} awaiting resolution, {self.still_open} still open, "
            f"{self.flagged} flagged for staff ({self.missing} missing upstream); "
            f"{self.settled} settled, {self.settle_failed} settlement failures"
        )
        return text + ("; settlement not installed yet" if self.settlement_unavailable else "")


@dataclass(frozen=True)
class Verdict:
    action: str  # "resolve" | "void" | "wait" | "open" | "flag"
    outcome: str = ""
    reason: str = ""


def judge(p: ParsedMarket) -> Verdict:
    """What an upstream market says about its resolution (EXTERNAL_APIS §1.7).

    Resolved only when closed, umaResolutionStatus is "resolved" and the final prices name
    exactly one winner; equal final prices mean a 50-50 (void). Extreme trading prices are
    never taken as a resolution, and a legacy AMM market is never resolved automatically.
    """
    if not p.closed:
        return Verdict("open")
    prices = p.outcome_prices
    if p.uma_status == "resolved":
        if prices is None:
            return Verdict(
                "flag", reason=f"resolved upstream but final prices unreadable: {p.price_error}"
            )
        winners = [i for i, price in enumerate(prices) if price == 1]
        if len(winners) == 1 and all(
            price == 0 for i, price in enumerate(prices) if i != winners[0]
        ):
            return Verdict("resolve", outcome=p.outcomes[winners[0]])
        if len(set(prices)) == 1 and prices[0] > 0:
            return Verdict("void", reason="50-50")
        shown = [format(x.normalize(), "f") for x in prices]
        return Verdict("flag", reason=f"resolved upstream with ambiguous final prices {shown}")
    if not p.uma_status and _looks_legacy(p):
        return Verdict(
            "flag", reason="legacy AMM market without an oracle resolution; resolve by hand"
        )
    if not p.uma_status and prices is not None and _decisive(prices):
        # Final-looking prices but no oracle status (real market 1812085: ["1","0"], closed,
        # no umaResolutionStatus): never taken as a resolution (§1.7), but no longer waited on
        # for ever either - staff decide from the source.
        shown = [format(x.normalize(), "f") for x in prices]
        return Verdict(
            "flag",
            reason=f"closed upstream with final prices {shown} but no UMA resolution; "
            "check the source and resolve by hand",
        )
    return Verdict("wait", reason=p.uma_status or "no resolution proposed yet")


def _decisive(prices: list) -> bool:
    """Exactly one price is 1 and every other is 0."""
    return sorted(prices) == [0] * (len(prices) - 1) + [1]


def _looks_legacy(p: ParsedMarket) -> bool:
    # 2020-22 AMM markets have a market maker address and often ["0", "0"] for ever.
    all_zero = p.outcome_prices is not None and all(x == 0 for x in p.outcome_prices)
    return bool(p.market_maker_address) or all_zero


def resolve_markets(*, client: GammaClient | None = None) -> ResolveReport:
    """Check every tracked market that is closed upstream or past its close time, record the
    resolutions upstream has made final, flag what staff must look at, then settle."""
    started = time.monotonic()
    client = client or GammaClient()
    now = clock.now()
    report = ResolveReport()
    candidates = list(
        Market.objects.live()
        .filter(tracked=True, status__in=[OPEN, CLOSED])
        .filter(Q(status=CLOSED) | Q(close_time__lte=now))
        .order_by("id")
    )
    report.checked = len(candidates)
    upstream = _look_up(client, candidates, now)
    for market in candidates:
        p = upstream.get(market.external_id)
        if isinstance(p, str):  # not found or unreadable upstream
            report.missing += p == "missing"
            _flag(
                market,
                "not found upstream (404)" if p == "missing" else p,
                missing=p == "missing",
                report=report,
            )
            continue
        _apply(market, judge(p), p, now, report)
    _settle_pending(report)
    if report.resolved or report.voided or report.settled:
        _request_rescore()
    report.seconds = time.monotonic() - started
    log.info("resolve_markets: %s", report.summary())
    data_changed()
    return report


def _look_up(
    client: GammaClient, markets: list[Market], now: datetime
) -> dict[str, ParsedMarket | str]:
    """Upstream state per external id: a ParsedMarket, or "missing", or a parse error text."""
    by_cid = {m.condition_id: m.external_id for m in markets if m.condition_id}
    raw = client.markets_by_condition_ids(by_cid, closed=True)
    found_cids = {r.get("conditionId") for r in raw if isinstance(r, dict)}
    # Past its close time but still trading: the closed=true lookup does not list it.
    still = [cid for cid in by_cid if cid not in found_cids]
    if still:
        raw += client.markets_by_condition_ids(still, closed=False)
        found_cids |= {r.get("conditionId") for r in raw if isinstance(r, dict)}
    result: dict[str, ParsedMarket | str] = {}
    for m in markets:
        if m.condition_id and m.condition_id in found_cids:
            continue
        try:  # the last word on "gone" is a 404 from /markets/{id}
            raw.append(client.get_market(m.external_id))
        except MarketNotFound:
            result[m.external_id] = "missing"
    wanted = {m.external_id for m in markets}
    parsed: list[ParsedMarket] = []
    for item in raw:
        try:
            p = parse_market(item)
        except MarketParseError as exc:
            ext = str(item.get("id", "")) if isinstance(item, dict) else ""
            if ext in wanted:
                result.setdefault(ext, f"upstream payload unreadable: {exc}"[:300])
            continue
        if p.external_id in wanted and p.external_id not in result:
            result[p.external_id] = p
            parsed.append(p)
    for ext_id in wanted - result.keys():
        result[ext_id] = "its condition id is listed upstream under another market id"
    for start in range(0, len(parsed), STORE_BATCH):
        store_markets(parsed[start : start + STORE_BATCH], now=now, in_top=False)
    return result


def _apply(
    market: Market, verdict: Verdict, p: ParsedMarket, now: datetime, report: ResolveReport
) -> None:
    if market.upstream_missing:
        Market.objects.filter(pk=market.pk).update(upstream_missing=False)
    if verdict.action == "open":
        report.still_open += 1
    elif verdict.action == "wait":
        report.waiting += 1
    elif verdict.action == "flag":
        _flag(market, verdict.reason, missing=False, report=report)
    else:
        to_status = RESOLVED if verdict.action == "resolve" else VOID
        resolved_at = p.uma_end_date or p.closed_time or now
        if _record_upstream_resolution(market.pk, to_status, verdict.outcome, resolved_at, report):
            report.resolved += to_status == RESOLVED
            report.voided += to_status == VOID


def _flag(market: Market, reason: str, *, missing: bool, report: ResolveReport) -> None:
    report.flagged += 1
    report.flags.append(f"{market.external_id}: {reason}")
    log.warning("market %s needs attention: %s", market.external_id, reason)
    updates = {"needs_attention": True, "attention_reason": reason[:300]}
    if missing:
        updates["upstream_missing"] = True
    Market.objects.filter(pk=market.pk).update(**updates)


def _record_upstream_resolution(
    pk: int, to_status: str, outcome: str, resolved_at: datetime, report: ResolveReport
) -> bool:
    """Record it once and settle it in the same transaction: only the run whose conditional
    UPDATE finds the market still open/closed writes the audit row (a concurrent run sees
    rowcount 0). A database error (a killed connection) undoes both - a resolved market with
    open positions used to be left behind until the next snapshot, unlogged - and the next run
    retries; a settlement that fails for another reason leaves the resolution recorded and the
    market pending (retried by every resolve and snapshot run, flagged by settlement)."""
    try:
        with transaction.atomic():
            current = Market.objects.select_for_update().get(pk=pk)
            if current.status not in (OPEN, CLOSED):
                return False
            updated = Market.objects.filter(pk=pk, status=current.status).update(
                status=to_status,
                resolved_outcome=outcome,
                resolved_at=resolved_at,
                resolved_by=Market.ResolvedBy.UPSTREAM,
                upstream_missing=False,
                updated_at=clock.now(),
            )
            if not updated:
                return False
            ResolutionChange.objects.create(
                market_id=pk,
                changed_by=None,
                source=Market.ResolvedBy.UPSTREAM,
                from_status=current.status,
                from_outcome=current.resolved_outcome,
                to_status=to_status,
                to_outcome=outcome,
                reason=UPSTREAM_REASON,
            )
            _settle_within(Market.objects.get(pk=pk), report)
    except DatabaseError as exc:
        log.error("market %s: resolution not recorded (the next run retries): %s", pk, exc)
        report.settle_failed += 1
        return False
    return True


def _settle_within(market: Market, report: ResolveReport) -> None:
    """Settle inside the caller's transaction; a non-database failure rolls back only the
    settlement (a savepoint), a database error propagates and undoes the whole market."""
    try:
        with transaction.atomic():
            if _settle(market):
                report.settled += 1
            else:
                report.settlement_unavailable = True
    except DatabaseError:
        raise
    except Exception:
        log.exception("settling market %s failed; retried by the next resolve/snapshot", market.pk)
        report.settle_failed += 1


def _settle_pending(report: ResolveReport) -> None:
    # Resolved/void but still tracked = not settled yet: newly resolved markets, and ones
    # whose settlement failed or was not installed on an earlier run.
    pending = Market.objects.live().filter(status__in=FINAL, tracked=True).order_by("id")
    for market in pending:
        try:
            if not _settle(market):
                report.settlement_unavailable = True
                return
        except Exception:  # one market's failure must not block the others; retried hourly
            log.exception("settling market %s failed", market.pk)
            report.settle_failed += 1
            continue
        report.settled += 1


def _settle(market: Market) -> bool:
    """Ask the packages above (cohorts) to bring settlements in line with the market's
    resolution; False if nobody is listening (markets used on its own). Once a final market is
    settled nobody can hold it any more, so it stops being tracked."""
    if not signals.market_resolved.has_listeners(sender=Market):
        log.warning("no receiver for market_resolved; settlement skipped")
        return False
    signals.market_resolved.send(sender=Market, market=market)
    # Settlement sets settled_at once no position of the market is left open.
    Market.objects.filter(pk=market.pk, status__in=FINAL, settled_at__isnull=False).update(
        tracked=False
    )
    return True


# --- staff corrections --------------------------------------------------------------------


def set_resolution(
    market: Market,
    *,
    status: str,
    outcome: str = "",
    user=None,
    reason: str,
) -> ResolutionChange:
    """Staff sets a market's resolution: resolved to one of its outcomes, void (50-50), or
    reopened (open/closed, outcome cleared, upstream detection resumes). Writes the audit row
    and brings settlements in line (which may reverse an earlier settlement) in one transaction.

    Raises ValidationError for a bad request, and for a change that cannot be carried out (a
    reversal of a payout that was already spent, a database error mid-way): then nothing is
    changed, the reason is logged and returned to staff. Before, the resolution was committed
    first and a failed settlement left the books and the market disagreeing until someone
    fixed it by hand.
    """
    reason = (reason or "").strip()
    outcome = (outcome or "").strip()
    if not reason:
        raise ValidationError("A reason is required.")
    if status not in Market.Status.values:
        raise ValidationError(f"Unknown status {status!r}.")
    if status == RESOLVED and outcome not in market.outcomes:
        raise ValidationError(
            f"{outcome!r} is not one of this market's outcomes {market.outcomes}."
        )
    if status != RESOLVED and outcome:
        raise ValidationError("Only a resolved market has an outcome.")

    try:
        with transaction.atomic():
            current = Market.objects.select_for_update().get(pk=market.pk)
            if current.status == status and current.resolved_outcome == outcome:
                raise ValidationError(
                    f"The market is already {status}{' to ' + outcome if outcome else ''}."
                )
            final = status in FINAL
            Market.objects.filter(pk=market.pk).update(
                status=status,
                resolved_outcome=outcome,
                resolved_at=clock.now() if final else None,
                # Cleared on reopen so the hourly upstream check takes the market back.
                resolved_by=Market.ResolvedBy.ADMIN if final else "",
                tracked=True,  # until settled again
                needs_attention=False,
                attention_reason="",
                updated_at=clock.now(),
            )
            change = ResolutionChange.objects.create(
                market_id=market.pk,
                changed_by=user if getattr(user, "pk", None) else None,
                source=Market.ResolvedBy.ADMIN,
                from_status=current.status,
                from_outcome=current.resolved_outcome,
                to_status=status,
                to_outcome=outcome,
                reason=reason,
            )
            market.refresh_from_db()
            # Inside the transaction: a settlement that cannot follow undoes the change.
            _settle(market)
    except ValidationError:
        raise
    except Exception as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        log.warning(
            "staff change of market %s to %s%s refused, nothing changed: %s",
            market.pk, status, f" {outcome}" if outcome else "", why,
        )  # fmt: skip
        raise ValidationError(f"Not changed, the settlement cannot follow: {why}") from exc
    log.info(
        "staff changed market %s from %s to %s%s (%s)",
        market.pk, change.from_status, status, f" {outcome}" if outcome else "", reason,
    )  # fmt: skip
    market.refresh_from_db()
    data_changed()
    _request_rescore()
    return change


def _request_rescore() -> None:
    """Scores depend on resolutions (Brier needs the outcome even where nobody held a
    position): tell whoever computes them. The resolution is committed either way; the hourly
    score run catches up if a receiver fails."""
    for receiver, result in signals.resolutions_changed.send_robust(sender=Market):
        if isinstance(result, Exception):
            log.error("resolutions_changed receiver %r failed: %s", receiver, result)
