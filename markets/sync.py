"""Syncing Polymarket markets and prices: the top markets by volume, the tracked ones that left
the top, and back-filled price history.

Every function here is safe to run twice at once: market rows are upserted (never
check-then-insert) and price points are inserted with ON CONFLICT DO NOTHING.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import DataError, IntegrityError, transaction
from django.db.models import Q, QuerySet

from core import clock
from core.versions import data_changed
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
from markets.models import Market, PricePoint, live_path_source

log = logging.getLogger(__name__)

OPEN, CLOSED = Market.Status.OPEN, Market.Status.CLOSED
RESOLVED, VOID = Market.Status.RESOLVED, Market.Status.VOID
FINAL = (RESOLVED, VOID)
STORE_BATCH = 100  # rows per transaction when storing lookups (same as a keyset page)
# What the database says about one bad row (a value out of a column's range, a NUL or a
# surrogate the parser missed, a constraint): that market is skipped, never the whole page.
# Connection trouble is not among them: it is transient and fails the sync for its retry.
REFUSED_ROW = (DataError, IntegrityError, ValueError)


# --- sync ---------------------------------------------------------------------------------


@dataclass
class SyncReport:
    limit: int
    pages: int = 0
    fetched: int = 0
    stored: int = 0
    new: int = 0
    parse_errors: int = 0
    refused: int = 0  # parsed, but the database would not store them
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
        if self.refused:
            text += f", {self.refused} refused by the database"
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
        points, stored = _store(parsed, now=now, in_top=True, report=report)
        report.stored += len(stored)
        report.price_points += points
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
    refreshed: set[str] = set()
    for start in range(0, len(parsed), STORE_BATCH):
        batch = parsed[start : start + STORE_BATCH]
        points, stored = _store(batch, now=now, in_top=False, report=report)
        report.price_points += points
        refreshed |= stored
    report.tracked_refreshed = len(refreshed)
    report.tracked_missing = len(wanted - {p.external_id for p in parsed})


def _store(
    parsed: list[ParsedMarket], *, now: datetime, in_top: bool, report: SyncReport
) -> tuple[int, set[str]]:
    """store_markets for one page; if the database refuses a row, the page again market by
    market, so one bad upstream object costs only itself (logged and counted as refused).
    Returns the price points written and the external ids stored."""
    try:
        return store_markets(parsed, now=now, in_top=in_top), {p.external_id for p in parsed}
    except REFUSED_ROW:
        log.warning("a page of %d markets was refused; storing them one by one", len(parsed))
    points, stored = 0, set()
    for market in parsed:
        try:
            points += store_markets([market], now=now, in_top=in_top)
        except REFUSED_ROW as exc:
            report.refused += 1
            reason = " ".join(str(exc).split())[:300]
            log.warning("skipping a Gamma market: the database refused it",
                        extra={"external_id": market.external_id, "reason": reason})  # fmt: skip
        else:
            stored.add(market.external_id)
    return points, stored


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
            log.warning("prices rejected", extra={"external_id": market.external_id,
                                                  "reason": market.price_error})  # fmt: skip
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
        "source": live_path_source(),
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
    if live_path_source() != Market.Source.POLYMARKET:
        return ""  # a stand-in's slugs name no real Polymarket page
    if p.event_slug and p.slug:
        return f"https://polymarket.com/event/{p.event_slug}/{p.slug}"[:500]
    return f"https://polymarket.com/market/{p.slug}"[:500] if p.slug else ""


# --- price history back-fill ---------------------------------------------------------------


def backfill_markets(markets: QuerySet, *, days: int = 2, client: ClobClient | None = None) -> dict:
    """Fill gaps in the price history of the given Polymarket markets (a sync missed during an
    outage leaves a hole in the chart and can move a market's closing line). Points already
    stored are kept, so running it daily costs only the missing ones. Which markets deserve it
    (the ones someone holds) is decided above this package: see cohorts.services."""
    held = markets.filter(source=live_path_source()).order_by("pk")
    client = client or ClobClient()
    summary = {"markets": 0, "points": 0, "failed": 0}
    for market in held:
        try:
            summary["points"] += backfill_price_history(market, days=days, client=client)
            summary["markets"] += 1
        except Exception:  # one market's upstream trouble must not stop the others
            log.exception("back-filling a market's price history failed", extra={"market": market.pk})
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
    if market.source != live_path_source() or len(market.token_ids) != len(market.outcomes):
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
