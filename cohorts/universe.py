"""The universe: the markets (and prices) every entry of a cohort sees in one decision week.

Frozen once per (cohort, week) so every competitor answers the same question set at the same
prices in the same order, which is what makes their decisions comparable. The content hash is
stored on every decision so anyone can check two decisions saw the same thing.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, transaction

from agents.prompts import PositionView
from cohorts.models import Cohort, Entry, Position, Universe
from cohorts.scope import SOURCE_FOR_KIND, on_live_path
from core import clock
from core.methodology import CONSTANTS
from markets.models import Market
from markets.pricing import outcome_price

# Enough of the resolution rules to know what counts, short enough that 500 markets fit a prompt.
RULES_CHARS = 300
# Markets each entry must state a probability for (scored even where nobody bets).
FORECAST_SAMPLE_SIZE = 20
PRICE_PLACES = Decimal("0.000001")

# A live universe is built only from markets the sync refreshed this recently (the sync runs
# every 15 minutes): with the sync failing, the week is refused rather than decided on nothing
# or on last week's prices. A market never synced (entered by hand) is taken as it is.
# A sealed methodology constant, like the other rules of the game.
MARKET_SYNC_BOUND = timedelta(minutes=CONSTANTS.market_sync_bound_minutes)


class EmptyUniverse(Exception):
    """No market could be shown: the week must not be decided (nor sealed) on nothing."""


def freeze_universe(
    cohort: Cohort,
    week: int,
    at: datetime | None = None,
    *,
    markets: Iterable[Market] | None = None,
    prices: Mapping[int, Mapping[str, object]] | None = None,
    sample_size: int = FORECAST_SAMPLE_SIZE,
) -> Universe:
    """Return the (cohort, week) universe, freezing it now if it does not exist yet.

    Replay and demo may pass `markets` (in the order to show them) and `prices`
    ({market pk: {outcome: price}}) for their simulated clock; otherwise the top
    ARENA_MARKETS_PER_PROMPT open markets of the cohort's source by volume, at their last price.
    `sample_size` is how many markets every entry must forecast (replays ask for all of them,
    as ForecastBench does, so a set's Brier rests on every resolved question).
    A concurrent freeze of the same week loses the insert race and returns the winner's row.
    """
    existing = Universe.objects.filter(cohort=cohort, week=week).first()
    if existing is not None:
        return existing
    at = at or clock.now()
    # The live path only: replay and demo bring their own markets on their own clock.
    refuse_empty = markets is None and on_live_path(cohort.kind)
    if markets is None:
        markets = _candidate_markets(cohort, at)
    items = build_items(markets, at, prices=prices, limit=settings.ARENA_MARKETS_PER_PROMPT)
    if refuse_empty and not items:
        # Nothing is frozen, so a later run (once the sync is back) freezes a real universe.
        raise EmptyUniverse(universe_problem(cohort, week, at) or "no market with a price")
    sample = forecast_sample_ids(items, cohort, week, size=sample_size)
    try:
        with transaction.atomic():
            return Universe.objects.create(
                cohort=cohort,
                week=week,
                frozen_at=at,
                content_hash=content_hash(items, sample),
                markets=items,
                forecast_sample=sample,
            )
    except IntegrityError:
        return Universe.objects.get(cohort=cohort, week=week)


def _open_candidates(cohort: Cohort, at: datetime):
    source = SOURCE_FOR_KIND.get(cohort.kind, Market.Source.POLYMARKET)
    # A market past its close time may still say "open" until the next sync: not tradable.
    return Market.objects.open().filter(source=source).exclude(close_time__lte=at)


def _synced_since(cohort: Cohort, at: datetime) -> datetime | None:
    return at - MARKET_SYNC_BOUND if on_live_path(cohort.kind) else None


def _candidate_markets(cohort: Cohort, at: datetime) -> Iterable[Market]:
    qs = _open_candidates(cohort, at)
    since = _synced_since(cohort, at)
    if since is not None:
        qs = qs.exclude(last_synced_at__lt=since)
    return qs.order_by("-volume", "id").iterator(chunk_size=500)


def universe_problem(cohort: Cohort, week: int, at: datetime) -> str | None:
    """Why the (cohort, week) universe is empty or cannot be frozen at `at`, or None."""
    existing = Universe.objects.filter(cohort=cohort, week=week).first()
    if existing is not None:
        return None if existing.markets else "its frozen universe holds no market"
    candidates = _open_candidates(cohort, at)
    if not candidates.exists():
        return "no open market to show (has the market sync run?)"
    since = _synced_since(cohort, at)
    if since is not None and not candidates.exclude(last_synced_at__lt=since).exists():
        latest = candidates.order_by("-last_synced_at").values_list("last_synced_at", flat=True)[0]
        return (
            f"no open market synced since {since:%Y-%m-%d %H:%M} UTC (the sync bound is "
            f"{MARKET_SYNC_BOUND}; the latest sync of one was {latest:%Y-%m-%d %H:%M} UTC)"
        )
    return None


def build_items(
    markets: Iterable[Market],
    at: datetime,
    *,
    prices: Mapping[int, Mapping[str, object]] | None = None,
    limit: int | None = None,
) -> list[dict]:
    """Universe items in the given order, skipping markets with no tradable price."""
    items: list[dict] = []
    for market in markets:
        if limit is not None and len(items) >= limit:
            break
        quotes = prices.get(market.pk) if prices is not None else None
        item = market_item(market, at, quotes)
        if item is not None:
            items.append(item)
    return items


def market_item(
    market: Market, at: datetime, quotes: Mapping[str, object] | None = None
) -> dict | None:
    """One market as shown to competitors, or None when it has no tradable price.

    Every outcome needs a price (the prompt shows all of them) and at least one must lie strictly
    inside (0, 1), else nothing could be bought.
    """
    outcome_prices = _prices(market, quotes)
    if outcome_prices is None or not any(
        Decimal(0) < p < Decimal(1) for p in outcome_prices.values()
    ):
        return None
    close = market.close_time
    return {
        "market_id": market.pk,
        "question": market.question,
        "rules": trim(market.description, RULES_CHARS),
        "outcomes": list(market.outcomes),
        "prices": {name: _price_str(p) for name, p in outcome_prices.items()},
        "volume": str(Decimal(market.volume).quantize(Decimal(1))),
        "close_time": close.isoformat() if close else None,
        "days_to_close": round((close - at).total_seconds() / 86400, 1) if close else None,
    }


def _prices(market: Market, quotes: Mapping[str, object] | None) -> dict[str, Decimal] | None:
    outcomes = list(market.outcomes or [])
    if not outcomes:
        return None
    source = _as_decimals(quotes) if quotes is not None else market.last_prices
    result: dict[str, Decimal] = {}
    for name in outcomes:
        price = outcome_price(source, outcomes, name)
        if price is None:
            return None
        result[name] = Decimal(price).quantize(PRICE_PLACES)
    return result


def _as_decimals(quotes: Mapping[str, object]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in quotes.items():
        try:
            out[name] = str(Decimal(str(value)))
        except InvalidOperation:
            continue
    return out


def _price_str(price: Decimal) -> str:
    return format(price.normalize(), "f")


def trim(text: str, limit: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def forecast_sample_ids(
    items: list[dict], cohort: Cohort, week: int, size: int = FORECAST_SAMPLE_SIZE
) -> list[int]:
    """A seeded sample of the universe, in universe order.

    The seed mixes the cohort, the week and the methodology hash, so the sample is reproducible
    by anyone and cannot be chosen after seeing the answers.
    """
    ids = [item["market_id"] for item in items]
    if len(ids) <= size:
        return ids
    seed_text = f"{cohort.pk}:{week}:{cohort.methodology_hash}"
    rng = random.Random(int(hashlib.sha256(seed_text.encode()).hexdigest()[:16], 16))
    chosen = set(rng.sample(ids, size))
    return [market_id for market_id in ids if market_id in chosen]


def content_hash(items: list[dict], sample: list[int]) -> str:
    canonical = json.dumps(
        {"markets": items, "forecast_sample": sample}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def price_book(universe: Universe) -> dict[tuple[int, str], Decimal]:
    """(market pk, outcome) -> the price shown, for check_orders / execute_orders."""
    book: dict[tuple[int, str], Decimal] = {}
    for item in universe.markets:
        for name, price in item["prices"].items():
            book[(item["market_id"], name)] = Decimal(price)
    return book


def position_views(entry: Entry, universe: Universe) -> list[PositionView]:
    """All the entry's open positions (including those in closed, unresolved markets), as the
    prompt shows them.

    The price is the one the universe froze when the market is in it (so the prompt and the
    execution agree), else the market's latest quote for the position's own outcome.
    """
    shown = price_book(universe)
    views = []
    positions = entry.positions.filter(status=Position.Status.OPEN).select_related("market")
    for pos in positions.order_by("id"):
        market = pos.market
        price = shown.get((market.pk, pos.outcome))
        if price is None:
            price = outcome_price(market.last_prices, market.outcomes, pos.outcome)
        views.append(
            PositionView(
                position_id=pos.pk,
                market_id=market.pk,
                question=market.question,
                outcome=pos.outcome,
                shares=pos.shares,
                cost_basis=pos.cost_basis,
                price=price,
                market_status=market.status,
            )
        )
    return views
