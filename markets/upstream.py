"""Upstream resolution detection: which tracked Polymarket markets Gamma now calls final.

The hourly resolve run reads every tracked market that is closed upstream or past its close
time, judges what upstream says (`judge`), records the final ones through
markets.resolution.record_resolution (audit row, settlement, event log, rescore request), flags
what staff must look at, and retries settlements an earlier run could not finish.

Safe to run twice at once: record_resolution records a market only while it is still
open/closed, under a row lock, so only one run writes the audit row.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DatabaseError
from django.db.models import Q

from core import clock
from core.versions import data_changed
from markets.gamma import GammaClient, MarketNotFound, MarketParseError, ParsedMarket, parse_market
from markets.models import Market
from markets.resolution import FINAL, record_resolution, request_rescore, settle
from markets.sync import STORE_BATCH, store_markets

log = logging.getLogger(__name__)

OPEN, CLOSED = Market.Status.OPEN, Market.Status.CLOSED
RESOLVED, VOID = Market.Status.RESOLVED, Market.Status.VOID
UPSTREAM_REASON = "upstream resolution"


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
    """What an upstream market says about its resolution.

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
        # no umaResolutionStatus): trading prices are never taken as a resolution, and waiting
        # would last for ever, so staff decide from the source.
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
        p = upstream[market.external_id]
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
        request_rescore()
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
    log.warning("market needs attention", extra={"market": market.pk,
                "external_id": market.external_id, "reason": reason})  # fmt: skip
    updates = {"needs_attention": True, "attention_reason": reason[:300]}
    if missing:
        updates["upstream_missing"] = True
    Market.objects.filter(pk=market.pk).update(**updates)


def _record_upstream_resolution(
    pk: int, to_status: str, outcome: str, resolved_at: datetime, report: ResolveReport
) -> bool:
    """Record it once and settle it in the same transaction. A database error (a killed
    connection) undoes both and the next run retries, so a resolved market is never left with
    open positions and no audit row; a settlement that fails for another reason leaves the
    resolution recorded and the market pending (retried by every resolve and snapshot run,
    flagged by settlement)."""
    try:
        recorded = record_resolution(
            pk,
            status=to_status,
            outcome=outcome,
            by=Market.ResolvedBy.UPSTREAM,
            reason=UPSTREAM_REASON,
            at=resolved_at,
            only_unresolved=True,
            settle_failures="keep",
            market_fields={"upstream_missing": False},
        )
    except DatabaseError as exc:
        log.error("resolution not recorded (the next run retries)",
                  extra={"market": pk, "reason": exc})  # fmt: skip
        report.settle_failed += 1
        return False
    if recorded is None:
        return False
    report.settled += recorded.settlement == "settled"
    report.settle_failed += recorded.settlement == "failed"
    report.settlement_unavailable |= recorded.settlement == "unavailable"
    return True


def _settle_pending(report: ResolveReport) -> None:
    # Resolved/void but still tracked = not settled yet: newly resolved markets, and ones
    # whose settlement failed or was not installed on an earlier run.
    pending = Market.objects.live().filter(status__in=FINAL, tracked=True).order_by("id")
    for market in pending:
        try:
            if not settle(market):
                report.settlement_unavailable = True
                return
        except Exception:  # one market's failure must not block the others; retried hourly
            log.exception("settling a market failed", extra={"market": market.pk})
            report.settle_failed += 1
            continue
        report.settled += 1
