"""Baseline strategies: simple, seeded competitors that give the LLMs something to beat.

A baseline answers exactly like a model would: it returns the JSON decision text, which then
goes through the same parser, the same rule check and the same execution as an LLM's answer,
and is stored as the decision's (synthetic) response in the audit trail.

Every strategy must state a probability for each market of the forecast sample. What they state:
- market: the market price of the forecast outcome. Never bets. The reference every skill score
  compares against, so it is also the proof that copying the market scores zero skill.
- cash: never bets; like `market` it states the market price where a forecast is required (it
  has no opinion, and a price is the honest "no opinion"), so it scores like `market` on
  forecasts and differs only in never trading.
- random: uniform random probabilities and 0-3 bets on random tradable outcomes with random
  stakes within the rules.
- favorite: backs the outcome priced above 0.5 in up to FAVORITE_BETS seeded markets, stating
  price + FAVORITE_MARGIN (it believes favourites are underpriced).
- longshot-fader: in two-outcome markets where one side is a longshot (price < LONGSHOT_PRICE),
  backs the other side, stating 1 - price/2 (it believes longshots win half as often as
  priced: the favourite-longshot bias).
Forecast-sample markets a baseline did not bet on get the market price (market, cash, favorite,
longshot-fader) or a random probability (random).

Seeds: sha256 of "<strategy>:<cohort id>:<week>:<entry id>", so a rerun reproduces the same
decision and two replicates of one strategy differ.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal

from agents.prompts import MIN_BET, max_allocation

CENT = Decimal("0.01")
FAVORITE_BETS = 3
FAVORITE_MARGIN = Decimal("0.05")
LONGSHOT_PRICE = Decimal("0.15")
LONGSHOT_BETS = 3
RANDOM_MAX_BETS = 3
# Stated probabilities stay off 0 and 1: a baseline is never certain.
PROB_FLOOR, PROB_CEIL = Decimal("0.01"), Decimal("0.99")


@dataclass(frozen=True)
class BaselineInput:
    strategy: str
    cohort_id: int
    week: int
    entry_id: int
    cash: Decimal
    markets: list[dict]  # universe items, in universe order
    forecast_sample: list[int]

    @property
    def seed(self) -> int:
        text = f"{self.strategy}:{self.cohort_id}:{self.week}:{self.entry_id}"
        return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)


def decide(inp: BaselineInput) -> str:
    """The strategy's answer as JSON text (what a model would have replied)."""
    strategy = STRATEGIES.get(inp.strategy)
    if strategy is None:
        raise ValueError(f"unknown baseline strategy {inp.strategy!r}")
    return json.dumps(strategy(inp, random.Random(inp.seed)), indent=1)


# --- strategies ---------------------------------------------------------------------------


def market(inp: BaselineInput, rng: random.Random) -> dict:
    return _answer([], _sample_forecasts(inp, set(), _market_price), "States the market price.")


def cash(inp: BaselineInput, rng: random.Random) -> dict:
    reasoning = "Never bets; states the market price where a forecast is required."
    return _answer([], _sample_forecasts(inp, set(), _market_price), reasoning)


def random_strategy(inp: BaselineInput, rng: random.Random) -> dict:
    candidates = [(item, name) for item in inp.markets for name in _tradable(item)]
    budget = max_allocation(inp.cash)
    wanted = rng.randint(0, RANDOM_MAX_BETS)
    count = min(wanted, int(budget // MIN_BET), len(candidates))
    bets = []
    picks = rng.sample(candidates, count) if count else []
    remaining = budget
    for i, (item, name) in enumerate(picks):
        # Leave at least MIN_BET for each bet still to place.
        most = remaining - MIN_BET * (count - i - 1)
        amount = _cents(Decimal(str(rng.uniform(float(MIN_BET), float(most)))))
        amount = min(max(amount, MIN_BET), most)
        remaining -= amount
        bets.append(_bet(item, name, amount, _random_prob(rng)))
    forecasts = _sample_forecasts(inp, _bet_ids(bets), lambda item, name: _random_prob(rng))
    return _answer(bets, forecasts, f"Random: {len(bets)} seeded bets.")


def favorite(inp: BaselineInput, rng: random.Random) -> dict:
    picks = []
    for item in inp.markets:
        fav = max(_tradable(item), key=lambda name: Decimal(item["prices"][name]), default=None)
        if fav is not None and Decimal(item["prices"][fav]) > Decimal("0.5"):
            picks.append((item, fav))
    picks = rng.sample(picks, min(FAVORITE_BETS, len(picks)))

    def belief(item: dict, name: str) -> Decimal:
        return _clip(Decimal(item["prices"][name]) + FAVORITE_MARGIN)

    bets = _equal_stakes(inp, picks, belief)
    forecasts = _sample_forecasts(inp, _bet_ids(bets), _market_price)
    return _answer(bets, forecasts, "Backs favourites priced above 0.5.")


def longshot_fader(inp: BaselineInput, rng: random.Random) -> dict:
    picks = []
    for item in inp.markets:
        if len(item["outcomes"]) != 2:
            continue
        a, b = item["outcomes"]
        for longshot, other in ((a, b), (b, a)):
            price = Decimal(item["prices"][longshot])
            if Decimal(0) < price < LONGSHOT_PRICE and other in _tradable(item):
                picks.append((item, other))
    picks = rng.sample(picks, min(LONGSHOT_BETS, len(picks)))

    def belief(item: dict, name: str) -> Decimal:
        longshot_price = Decimal(1) - Decimal(item["prices"][name])
        return _clip(Decimal(1) - longshot_price / 2)

    bets = _equal_stakes(inp, picks, belief)
    forecasts = _sample_forecasts(inp, _bet_ids(bets), _market_price)
    return _answer(bets, forecasts, "Backs the complement of longshots priced below 0.15.")


STRATEGIES: dict[str, Callable[[BaselineInput, random.Random], dict]] = {
    "market": market,
    "cash": cash,
    "random": random_strategy,
    "favorite": favorite,
    "longshot-fader": longshot_fader,
}


# --- helpers ------------------------------------------------------------------------------


def _tradable(item: dict) -> list[str]:
    return [n for n in item["outcomes"] if Decimal(0) < Decimal(item["prices"][n]) < Decimal(1)]


def _equal_stakes(
    inp: BaselineInput, picks: list[tuple[dict, str]], belief: Callable[[dict, str], Decimal]
) -> list[dict]:
    budget = max_allocation(inp.cash)
    count = min(len(picks), int(budget // MIN_BET))
    if count == 0:
        return []
    amount = _cents(budget / count)
    return [_bet(item, name, amount, belief(item, name)) for item, name in picks[:count]]


def _bet(item: dict, outcome: str, amount: Decimal, probability: Decimal | float) -> dict:
    return {
        "market_id": str(item["market_id"]),
        "outcome": outcome,
        "amount": str(amount),
        "probability": float(probability),
    }


def _bet_ids(bets: list[dict]) -> set[str]:
    return {b["market_id"] for b in bets}


def _sample_forecasts(
    inp: BaselineInput, skip: set[str], probability: Callable[[dict, str], Decimal | float]
) -> list[dict]:
    """One forecast per sample market not already covered by a bet (the parser counts a bet's
    probability as that market's forecast), for its "Yes" (or first) outcome."""
    by_id = {item["market_id"]: item for item in inp.markets}
    forecasts = []
    for market_id in inp.forecast_sample:
        item = by_id.get(market_id)
        if item is None or str(market_id) in skip:
            continue
        name = _forecast_outcome(item["outcomes"])
        forecasts.append(
            {
                "market_id": str(market_id),
                "outcome": name,
                "probability": float(probability(item, name)),
            }
        )
    return forecasts


def _forecast_outcome(outcomes: list[str]) -> str:
    for name in outcomes:
        if name.strip().casefold() == "yes":
            return name
    return outcomes[0]


def _market_price(item: dict, name: str) -> Decimal:
    return Decimal(item["prices"][name])


def _random_prob(rng: random.Random) -> float:
    return round(rng.uniform(float(PROB_FLOOR), float(PROB_CEIL)), 3)


def _clip(p: Decimal) -> Decimal:
    return min(max(p, PROB_FLOOR), PROB_CEIL)


def _cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_DOWN)


def _answer(bets: list[dict], forecasts: list[dict], reasoning: str) -> dict:
    return {
        "action": "BET" if bets else "HOLD",
        "bets": bets,
        "forecasts": forecasts,
        "reasoning": reasoning,
    }
