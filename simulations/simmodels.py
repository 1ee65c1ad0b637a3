"""The simulated forecasters behind the built-in endpoint (`simulations.simllm`).

Each is a seeded character with a known recipe. It reads the arena's real decision prompt (the
v1 template in agents/prompts/) the way a model would, from the text: cash, max allocation,
minimum bet, its positions, the forecast sample and every market of the universe with its
prices. It answers in the prompt's JSON contract. Because the recipes are known, what the arena
measures about them is known in advance, which is the point: an install without an API key can
watch the whole model path (prompt, raw answer, repair, trades, scores) and check that the
scoring ranks the recipes the way it must.

  skilled        gets a private, noisy signal of each market's outcome and updates the market
                 price by Bayes' rule: calibrated and better than the market. The signal exists
                 only where the simulation serving the endpoint registered its world (the demo's
                 plan, a replay's resolution set); the stand-alone endpoint has none, so there it
                 is a market follower.
  overconfident  stretches the market's log-odds: ranks markets like the price, surer than it
                 (which pays only where the market itself is too timid).
  copier         writes the price down roughly: a slip of its own, rounded to 5 points, never
                 surer than 90 %. No information, so it cannot beat the market.
  chatty         a weak signal; wraps its JSON in prose and a ```json fence (the parser copes).
  sloppy         a moderate signal; breaks the format about half the time (percentages for
                 probabilities, missing forecasts, an unclosed object, overspending), so the one
                 repair attempt, quoting the problems, shows; most repairs come back valid.

All of them bet on their largest edges (fractional Kelly, within the rules), sell a held outcome
priced well above their belief, and otherwise hold; the thorough ones (skilled, overconfident,
copier) forecast every market they read, not only the sample, so their scores rest on more.

Signal: for a market whose winning outcome w is known, each outcome k yields s_k ~ N(a*[k=w], 1),
and the posterior is P(k) proportional to price_k * exp(a * s_k) (the likelihood ratio of k being
the winner); a is the character's `signal`. No world, a void market or an unknown outcome: no
signal.

Everything is seeded from the model id, the request's `seed` parameter and the conversation's
text, so the same prompt gets the same answer (like temperature 0), a rerun of the demo
reproduces it, and two weeks (different dates, cash and prices) get different draws.

This module is plain Python (no Django), so the server and the tests use it alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from typing import Protocol

from simulations.prompt_view import (
    MarketView,
    PromptView,
    message_text,
    read_prompt,
)

MODEL_PREFIX = "simulated/"
PROB_MAX = 0.999  # 3 decimals: the most extreme probability any character writes
TRADABLE = (0.02, 0.98)  # prices outside this band are not worth a bet
REPAIR_OPENING = "Your answer could not be accepted"  # first words of v1_repair.txt
MAX_REASONING_CHARS = 1500
MAX_THOROUGH = 200  # markets a thorough character forecasts beyond a larger sample


class World(Protocol):
    """What a simulation knows about its markets: the winning outcome, or None (unknown/void)."""

    def outcome(self, market_id: str) -> str | None: ...


@dataclass(frozen=True)
class Character:
    slug: str
    name: str
    blurb: str
    signal: float = 0.0  # a: strength of the private outcome signal (0 = none)
    stretch: float = 1.0  # multiplies the log-odds (>1: overconfident)
    noise: float = 0.0  # sd of the noise added to the log-odds
    edge: float = 0.08  # smallest belief - price worth a bet
    sell_edge: float = 0.12  # price - belief at which a held outcome is sold
    max_bets: int = 3
    kelly: float = 0.25  # fraction of full Kelly staked, of the cash
    rounding: float = 0.0  # states probabilities rounded to this step (0: to 0.001)
    certainty: float = PROB_MAX  # the most extreme probability it ever states (and 1 - it)
    thorough: bool = False  # forecasts every market it reads, not only the sample
    style: str = "plain"  # plain | prose | sloppy
    break_rate: float = 0.0  # sloppy: share of first answers that break the format
    repair_rate: float = 1.0  # share of repair answers that come back valid
    # Latency and thinking, for a realistic call: seconds to the first token, tokens per second.
    first_token: tuple[float, float] = (0.5, 1.5)
    tokens_per_second: tuple[float, float] = (100.0, 200.0)
    thinking_tokens: tuple[int, int] = (0, 0)

    @property
    def model_id(self) -> str:
        return MODEL_PREFIX + self.slug


CHARACTERS: dict[str, Character] = {
    c.model_id: c
    for c in (
        Character(
            "skilled",
            "Skilled",
            "Peeks at the simulated outcome through a noisy signal; calibrated, beats the market.",
            signal=2.0,
            thorough=True,
            max_bets=4,
            first_token=(1.0, 3.0),
            tokens_per_second=(80.0, 150.0),
            thinking_tokens=(400, 1800),
        ),
        Character(
            "overconfident",
            "Overconfident",
            "Stretches the market's log-odds: always surer than the crowd.",
            stretch=2.0,
            noise=0.15,
            edge=0.06,
            max_bets=5,
            kelly=0.4,
            thorough=True,
        ),
        Character(
            "copier",
            "Market copier",
            "Writes the market price down roughly: a slip of its own, rounded to 5 points, and "
            "never surer than 90%. No information.",
            noise=0.15,
            rounding=0.05,
            certainty=0.9,
            edge=0.1,
            max_bets=2,
            kelly=0.15,
            thorough=True,
            tokens_per_second=(150.0, 250.0),
        ),
        Character(
            "chatty",
            "Chatty",
            "A weak signal; wraps its JSON in prose and a code fence.",
            signal=0.4,
            noise=0.2,
            style="prose",
            tokens_per_second=(60.0, 100.0),
        ),
        Character(
            "sloppy",
            "Sloppy formatter",
            "A moderate signal; often breaks the answer format, so the repair attempt shows.",
            signal=0.6,
            noise=0.2,
            style="sloppy",
            break_rate=0.5,
            repair_rate=0.85,
        ),
    )
}


# --- answering -------------------------------------------------------------------------------


@dataclass
class Answer:
    text: str
    thinking_tokens: int = 0


def seed_for(model: str, messages: list[dict], seed: object = None) -> int:
    digest = hashlib.sha256()
    digest.update(f"{model}\0{seed!r}\0".encode())
    for m in messages:
        digest.update(f"{m.get('role')}\0{message_text(m.get('content'))}\0".encode())
    return int.from_bytes(digest.digest()[:8], "big")


def respond(
    character: Character, messages: list[dict], world: World | None, salt: str = ""
) -> Answer:
    """The character's reply to a chat: a decision for a decision prompt, else a HOLD saying so.

    Seeds come from what the prompt says, never from database ids (so a demo scores the same on
    any backend): the call's draws (thinking, format slips, prose) from the model, the date, the
    cash and the phase; each market's belief from its own content (`market_rng`). `salt` is the
    request's seed parameter."""
    prompt = next(
        (
            view
            for m in messages
            if m.get("role") == "user" and (view := read_prompt(message_text(m.get("content"))))
        ),
        None,
    )
    if prompt is None:
        reply = {
            "action": "HOLD",
            "forecasts": [],
            "reasoning": "I am a simulated forecaster and answer only the arena's decision prompt.",
        }
        return Answer(json.dumps(reply))
    last = messages[-1] if messages else {}
    repair = last.get("role") == "user" and message_text(last.get("content")).startswith(REPAIR_OPENING)
    rng = _seeded(character.model_id, salt, prompt.date, prompt.cash, repair)
    thinking = rng.randint(*character.thinking_tokens) if character.thinking_tokens[1] else 0
    decision = decide(character, prompt, world, salt)
    return Answer(_render(character, decision, prompt, rng, repair), thinking)


def beliefs(
    character: Character, market: MarketView, rng: random.Random, world: World | None
) -> dict[str, float]:
    """The character's probability for each outcome of one market (they sum to 1)."""
    winner = world.outcome(market.market_id) if world is not None else None
    informed = character.signal > 0 and winner in market.outcomes
    # Log-weights: the log price (tempered by `stretch`: for two outcomes, the log-odds times it),
    # the character's noise, and the signal's log-likelihood ratio.
    weights = {}
    for name in market.outcomes:
        price = min(max(market.prices[name], 0.001), 0.999)
        log_weight = math.log(price) * character.stretch
        if character.noise:
            log_weight += rng.gauss(0, character.noise)
        if informed:
            a = character.signal
            log_weight += a * rng.gauss(a if name == winner else 0.0, 1.0)
        weights[name] = math.exp(min(max(log_weight, -50.0), 50.0))
    if len(market.outcomes) == 2:
        # Two outcomes: the second is the complement of the first (one number, not two).
        first, second = market.outcomes
        p = _stated(character, weights[first] / (weights[first] + weights[second]))
        return {first: p, second: round(1 - p, 3)}
    total = sum(weights.values())
    return {name: _stated(character, w / total) for name, w in weights.items()}


def _stated(character: Character, p: float) -> float:
    """A probability as the character writes it: rounded to its step, within its certainty."""
    if character.rounding:
        p = round(p / character.rounding) * character.rounding
    most = max(min(character.certainty, PROB_MAX), 0.5)
    return round(min(max(p, 1 - most), most), 3)


@dataclass
class Decision:
    action: str
    forecasts: list[dict]
    bets: list[dict]
    sells: list[dict]
    reasoning: str

    def as_json(self) -> dict:
        out: dict = {"action": self.action}
        if self.bets:
            out["bets"] = self.bets
        if self.sells:
            out["sells"] = self.sells
        out["forecasts"] = self.forecasts
        out["reasoning"] = self.reasoning
        return out


def market_rng(
    character: Character, prompt: PromptView, market: MarketView, salt: str
) -> random.Random:
    """A generator for one market's belief, seeded by what the prompt says about it (question,
    outcomes, prices, the date) and not by its database id: the same world draws the same beliefs
    whatever ids a database handed out, so a demo's scores do not depend on the backend."""
    quotes = " | ".join(f"{name} {market.prices[name]}" for name in market.outcomes)
    return _seeded(character.model_id, salt, prompt.date, market.question, quotes)


def _seeded(*parts: object) -> random.Random:
    text = "\0".join(str(p) for p in parts)
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def decide(
    character: Character, prompt: PromptView, world: World | None, salt: str = ""
) -> Decision:
    belief = {
        mid: beliefs(character, m, market_rng(character, prompt, m, salt), world)
        for mid, m in prompt.markets.items()
    }
    stated = _forecasts(character, prompt, belief)
    sells = _sells(character, prompt, belief)
    bets = [] if sells else _bets(character, prompt, belief, stated)
    action = "SELL" if sells else "BET" if bets else "HOLD"
    forecasts = [
        {"market_id": mid, "outcome": outcome, "probability": p}
        for (mid, outcome), p in stated.items()
    ]
    return Decision(
        action, forecasts, bets, sells, _reasoning(character, prompt, belief, bets, sells, world)
    )


def _forecasts(
    character: Character, prompt: PromptView, belief: dict[str, dict[str, float]]
) -> dict[tuple[str, str], float]:
    """(market, outcome) -> probability: the sample (or every market when thorough). A two-outcome
    market is stated by its first outcome; a larger one by every outcome (its distribution)."""
    wanted = list(prompt.sample)
    if character.thorough:
        # The sample first, then the rest in prompt order (by volume), up to a cap that keeps a
        # 500-market answer well inside max_tokens.
        sampled = set(wanted)
        extra = [mid for mid in prompt.markets if mid not in sampled]
        wanted += extra[: max(MAX_THOROUGH - len(wanted), 0)]
    stated: dict[tuple[str, str], float] = {}
    for mid in wanted:
        market = prompt.markets[mid]
        names = market.outcomes[:1] if len(market.outcomes) == 2 else market.outcomes
        for name in names:
            stated[(mid, name)] = belief[mid][name]
    return stated


def _sells(
    character: Character, prompt: PromptView, belief: dict[str, dict[str, float]]
) -> list[dict]:
    sells = []
    for pos in prompt.positions:
        if not pos.sellable or pos.price is None or pos.market_id not in belief:
            continue
        held = belief[pos.market_id].get(pos.outcome)
        if held is not None and pos.price - held >= character.sell_edge:
            sells.append({"position_id": pos.position_id, "percentage": 100})
    return sells


def _bets(
    character: Character,
    prompt: PromptView,
    belief: dict[str, dict[str, float]],
    stated: dict[tuple[str, str], float],
) -> list[dict]:
    """The largest edges (one outcome per market), staked by fractional Kelly within the rules:
    each at least the minimum bet, all together at most the max allocation, whole dollars."""
    candidates = []
    for mid, market in prompt.markets.items():
        best = None
        for name in market.outcomes:
            price = market.prices[name]
            edge = belief[mid][name] - price
            tradable = TRADABLE[0] <= price <= TRADABLE[1] and edge >= character.edge
            if tradable and (best is None or edge > best[0]):
                best = (edge, mid, name, price)
        if best:
            candidates.append(best)
    candidates.sort(key=lambda c: (-c[0], c[1]))
    picks = candidates[: character.max_bets]
    stakes = [
        Decimal(str(character.kelly * edge / (1 - price))) * prompt.cash
        for edge, _, _, price in picks
    ]
    total = sum(stakes, Decimal(0))
    if total > prompt.max_allocation:
        stakes = [s * prompt.max_allocation / total for s in stakes]
    bets = []
    for (_, mid, name, _), stake in zip(picks, stakes):
        amount = stake.quantize(Decimal(1), rounding=ROUND_DOWN)
        if amount < prompt.min_bet:
            continue
        # The bet's probability is the stated forecast when there is one (the parser refuses two
        # different numbers for the same outcome).
        p = stated.get((mid, name), belief[mid][name])
        bets.append({"market_id": mid, "outcome": name, "amount": int(amount), "probability": p})
    return bets


def _reasoning(
    character: Character,
    prompt: PromptView,
    belief: dict[str, dict[str, float]],
    bets: list[dict],
    sells: list[dict],
    world: World | None,
) -> str:
    lines = [f"Simulated forecaster '{character.slug}': {character.blurb}"]
    if character.signal and world is None:
        lines.append("No outcome signal is available on this endpoint, so I follow the market.")
    if sells:
        lines.append(f"Selling {len(sells)} position(s) now priced above what I believe.")
    for bet in bets:
        market = prompt.markets[bet["market_id"]]
        price = market.prices[bet["outcome"]]
        lines.append(
            f"[{market.market_id}] {market.question[:120]}: {bet['outcome']} at "
            f"{bet['probability']:.2f} against a price of {price:.2f}; ${bet['amount']}."
        )
    if not (bets or sells):
        lines.append(
            f"No edge worth the risk among {len(prompt.markets)} markets; holding and stating "
            "my forecasts."
        )
    return "\n".join(lines)[:MAX_REASONING_CHARS]


# --- rendering, and breaking the format on purpose -------------------------------------------


def _render(
    character: Character, decision: Decision, prompt: PromptView, rng: random.Random, repair: bool
) -> str:
    body = decision.as_json()
    if character.style == "sloppy":
        rate = (1 - character.repair_rate) if repair else character.break_rate
        if rng.random() < rate:
            return _broken(body, prompt, rng)
    text = to_json(body)
    if character.style == "prose":
        return _prose(decision, text, rng)
    return text


def to_json(body: dict) -> str:
    """Pretty JSON the way models write it: one key per line, one list item per line."""
    lines = []
    for key, value in body.items():
        if isinstance(value, list) and value:
            items = ",\n".join(f"    {json.dumps(item)}" for item in value)
            lines.append(f"  {json.dumps(key)}: [\n{items}\n  ]")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}"


def _prose(decision: Decision, text: str, rng: random.Random) -> str:
    openings = [
        "Let me work through this week's markets.",
        "Here is my read on the universe this week.",
        "Sure! I looked at the prices and my positions.",
    ]
    closings = [
        "Happy to revisit any of these next week.",
        "These are my honest probabilities, not the market's.",
        "That is my decision for this week.",
    ]
    summary = {
        "BET": "I see a few prices I disagree with enough to bet.",
        "SELL": "Some positions look overpriced now, so I am selling.",
        "HOLD": "Nothing looks mispriced enough to trade.",
    }[decision.action]
    return f"{rng.choice(openings)} {summary}\n\n```json\n{text}\n```\n\n{rng.choice(closings)}"


def _broken(body: dict, prompt: PromptView, rng: random.Random) -> str:
    """One realistic formatting failure the parser or the rule check reports."""
    modes: list[Callable[[dict], str]] = [_as_percentages, _unclosed]
    sample_ids = set(prompt.sample) - {b["market_id"] for b in body.get("bets", [])}
    if sample_ids:
        modes.append(lambda b: _missing_forecasts(b, sample_ids, rng))
    if body.get("bets"):
        modes.append(lambda b: _overspend(b, prompt))
    return rng.choice(modes)(json.loads(json.dumps(body)))


def _as_percentages(body: dict) -> str:
    for item in [*body.get("bets", []), *body.get("forecasts", [])]:
        item["probability"] = round(item["probability"] * 100, 1)
    return to_json(body)


def _unclosed(body: dict) -> str:
    return to_json(body).rstrip().removesuffix("}").rstrip()


def _missing_forecasts(body: dict, sample_ids: set[str], rng: random.Random) -> str:
    dropped = set(rng.sample(sorted(sample_ids), min(3, len(sample_ids))))
    body["forecasts"] = [f for f in body["forecasts"] if f["market_id"] not in dropped]
    return to_json(body)


def _overspend(body: dict, prompt: PromptView) -> str:
    share = (prompt.max_allocation * 2 / len(body["bets"])).quantize(Decimal(1))
    for bet in body["bets"]:
        bet["amount"] = int(max(share, prompt.min_bet))
    return to_json(body)
