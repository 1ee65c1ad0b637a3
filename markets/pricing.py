"""Reading an outcome's price from a market's latest quote.

Market.last_prices is {"<outcome>": "<decimal string>"}. For a binary market the second
outcome's price is its own quote when upstream gave one, else 1 - the first outcome's price
(Polymarket quotes both sides, replays and the demo often only the first).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from markets.models import Market

# Prices are stored with 6 decimal places (PricePoint.price, Trade.price).
PRICE_PLACES = Decimal("0.000001")


def to_price(raw: Any) -> Decimal | None:
    """A finite Decimal from a quote value (string, int, float, Decimal), else None."""
    if raw is None or isinstance(raw, bool):
        return None
    try:
        # str() first so a float quote 0.1 becomes Decimal("0.1"), not its binary expansion.
        value = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite():
        return None
    return value


def outcome_price(
    market_or_last_prices: Market | dict, outcomes: list[str] | None, outcome: str
) -> Decimal | None:
    """The latest price of `outcome`, or None when there is no usable quote.

    Pass a Market (then `outcomes` may be None: the market's own list is used) or a
    last_prices dict with the market's ordered outcomes.
    """
    if isinstance(market_or_last_prices, Market):
        last_prices = market_or_last_prices.last_prices or {}
        if outcomes is None:
            outcomes = market_or_last_prices.outcomes
    else:
        last_prices = market_or_last_prices or {}
    outcomes = list(outcomes or [])

    own = to_price(last_prices.get(outcome))
    if own is not None:
        return own
    if len(outcomes) == 2 and outcome in outcomes:
        other = outcomes[1] if outcomes[0] == outcome else outcomes[0]
        other_price = to_price(last_prices.get(other))
        if other_price is not None:
            return Decimal(1) - other_price
    return None


def market_prices(market: Market) -> dict[str, Decimal]:
    """Every outcome of the market that has a usable price, in the market's order."""
    prices = {}
    for outcome in market.outcomes or []:
        price = outcome_price(market.last_prices, market.outcomes, outcome)
        if price is not None:
            prices[outcome] = price
    return prices


def price_book(markets) -> dict[tuple[int, str], Decimal]:
    """A PriceBook {(market pk, outcome): price} from the markets' latest quotes."""
    book: dict[tuple[int, str], Decimal] = {}
    for market in markets:
        for outcome, price in market_prices(market).items():
            book[(market.pk, outcome)] = price
    return book
