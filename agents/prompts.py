"""The decision prompt: a versioned template, filled from the frozen universe and the entry.

The template text lives in agents/prompts/<version>_system.txt and _user.txt; its sha256 is
stored on every decision, so a published decision names the exact words the model was given.
Changing the words means a new version file, never an edit of an old one.

Market text (questions, outcome names, rules) is written by strangers and read by the model
next to the arena's own lines, so it is never pasted as it is: `fenced` puts each piece on one
line (a question cannot start a fake market line of its own, an outcome name cannot split a
price line) between « and », which the text itself can no longer contain, and the system
prompt says that fenced text is data, never instructions (v2).

Why look-alike marks are left as written: the fence is the two code points U+00AB and U+00BB,
named exactly in the system prompt, and a model reads code points, not glyphs. 《 》 (U+300A/B,
Chinese title marks), ｢ ｣ (U+FF62/3), 「 」, ‹ ›, ≪ ≫ and ⟪ ⟫ are other characters that open
and close nothing; inside a fence they are text like any other, so a Chinese title keeps its
marks. What a hostile text could use to leave its fence is gone before it gets here: the real
marks become plain quotes, every line break becomes a space (the arena's own lines are the only
lines), and `core.text.clean` has removed the invisible characters, so what the model is given
between the marks is what a reader of the page sees.

The universe block is the bulk of the prompt (500 markets) and identical for every entry of a
cohort week, so it is rendered once per universe and reused; only the header (cash, positions)
is per entry.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from string import Template
from typing import Protocol

from agents.budget import estimate_tokens as budget_estimate
from agents.parsing import DecisionContext
from core.methodology import CONSTANTS
from core.text import flat


class Universe(Protocol):
    """What a prompt reads of a frozen universe (cohorts.models.Universe). Spelled out here so
    the agents package does not depend on the cohorts package that sits above it."""

    pk: int
    content_hash: str
    markets: list[dict]
    forecast_sample: list


PROMPT_VERSION = "v2"
_DIR = Path(__file__).resolve().parent / "prompts"
SYSTEM_TEMPLATE = (_DIR / f"{PROMPT_VERSION}_system.txt").read_text(encoding="utf-8")
USER_TEMPLATE = (_DIR / f"{PROMPT_VERSION}_user.txt").read_text(encoding="utf-8")
REPAIR_TEMPLATE = (_DIR / f"{PROMPT_VERSION}_repair.txt").read_text(encoding="utf-8")
# One hash over the three templates: together they define a prompt version.
PROMPT_SHA256 = hashlib.sha256(
    "\0".join([SYSTEM_TEMPLATE, USER_TEMPLATE, REPAIR_TEMPLATE]).encode("utf-8")
).hexdigest()

MIN_BET = Decimal(CONSTANTS.min_bet)
MAX_FRACTION = Decimal(str(CONSTANTS.max_bet_fraction))
CENT = Decimal("0.01")
_UNIVERSE_CACHE_SIZE = 8
FENCE_OPEN, FENCE_CLOSE = "«", "»"
# The marks inside market text become plain quotes, so only the arena can open or close a fence.
_UNFENCE = str.maketrans({FENCE_OPEN: '"', FENCE_CLOSE: '"'})


@dataclass(frozen=True)
class PositionView:
    """One of the entry's positions as the prompt shows it."""

    position_id: int
    market_id: int
    question: str
    outcome: str
    shares: Decimal
    cost_basis: Decimal
    price: Decimal | None  # current price of the position's own outcome (side-correct)
    market_status: str

    @property
    def value(self) -> Decimal | None:
        return None if self.price is None else (self.shares * self.price).quantize(CENT)


def max_allocation(cash: Decimal) -> Decimal:
    """The most all bets of one decision may total: MAX_FRACTION of cash, rounded down."""
    return (Decimal(cash) * MAX_FRACTION).quantize(CENT, rounding=ROUND_DOWN)


def system_prompt() -> str:
    return Template(SYSTEM_TEMPLATE).substitute(
        min_bet=_money(MIN_BET), max_fraction_pct=_pct(MAX_FRACTION)
    )


def user_prompt(
    *,
    universe: Universe,
    week: int,
    weeks: int,
    at: datetime,
    cash: Decimal,
    positions: list[PositionView],
    markets: list[dict] | None = None,
) -> str:
    """The user message; `markets` is the part of the universe a context budget lets the prompt
    show (agents/budget.py), the whole universe when None."""
    sample = universe.forecast_sample
    whole = markets is None or len(markets) == len(universe.markets)
    return Template(USER_TEMPLATE).substitute(
        date=f"{at:%Y-%m-%d %H:%M} UTC ({at:%A})",
        week=week,
        weeks=weeks,
        cash=_money(cash),
        max_allocation=_money(max_allocation(cash)),
        max_fraction_pct=_pct(MAX_FRACTION),
        min_bet=_money(MIN_BET),
        position_count=len(positions),
        positions=positions_text(positions),
        sample_count=len(sample),
        forecast_sample=", ".join(str(m) for m in sample) or "(none)",
        market_count=len(universe.markets) if whole else len(markets or []),
        universe=universe_text(universe) if whole else render_universe(markets or []),
    )


def repair_prompt(problems: list[str]) -> str:
    """The follow-up message of the one repair attempt, quoting every problem found."""
    listed = "\n".join(f"- {p}" for p in problems) or "- (no details)"
    return Template(REPAIR_TEMPLATE).substitute(problems=listed)


def positions_text(positions: list[PositionView]) -> str:
    if not positions:
        return "(none)"
    return "\n".join(_position_line(p) for p in positions)


_MARKET_STATES = {
    "open": "open",
    "closed": "market closed, awaiting resolution (cannot sell)",
    "resolved": "market resolved, awaiting settlement (cannot sell)",
    "void": "market void, awaiting refund (cannot sell)",
}


def _position_line(p: PositionView) -> str:
    if p.price is None:
        now = "current price unknown"
    else:
        now = f"current price {_num(p.price)} (value ${_money(p.value)})"
    status = _MARKET_STATES.get(p.market_status, f"market {p.market_status} (cannot sell)")
    return (
        f"- position_id {p.position_id}: [{p.market_id}] {fenced(p.question)} | "
        f"outcome {fenced(p.outcome)} | "
        f"{_num(p.shares)} shares, cost ${_money(p.cost_basis)} | {now} | {status}"
    )


# Rendered universe blocks, keyed by (universe pk, content hash): every entry of a cohort week
# shares one, and a worker process handles many entries of the same week.
_universe_cache: OrderedDict[tuple[int, str], str] = OrderedDict()


def universe_text(universe: Universe) -> str:
    key = (universe.pk, universe.content_hash)
    text = _universe_cache.get(key)
    if text is None:
        text = render_universe(universe.markets)
        _universe_cache[key] = text
        while len(_universe_cache) > _UNIVERSE_CACHE_SIZE:
            _universe_cache.popitem(last=False)
    return text


def render_universe(items: list[dict]) -> str:
    return "\n".join(_market_block(item) for item in items)


def _market_block(item: dict) -> str:
    quotes = " | ".join(f"{fenced(name)} {item['prices'][name]}" for name in item["outcomes"])
    close = item.get("close_time")
    closes = f"closes {close[:10]} ({item['days_to_close']} days)" if close else "no close date"
    lines = [
        f"[{item['market_id']}] {fenced(item['question'])}",
        f"  {quotes} · volume ${int(Decimal(item['volume'])):,} · {closes}",
    ]
    if item.get("rules"):
        lines.append(f"  rules: {fenced(item['rules'])}")
    return "\n".join(lines)


def fenced(text: str) -> str:
    """Market text as the prompt shows it: on one line, without control, bidi or invisible
    characters, between « and » (see the module docstring)."""
    return f"{FENCE_OPEN}{flat(str(text)).translate(_UNFENCE)}{FENCE_CLOSE}"


def decision_context(
    universe: Universe, positions: list[PositionView], markets: list[dict] | None = None
) -> DecisionContext:
    """What the parser checks ids against: exactly what the prompt showed (`markets`, when a
    budget showed only part of the universe)."""
    shown = universe.markets if markets is None else markets
    return DecisionContext(
        markets={str(item["market_id"]): list(item["outcomes"]) for item in shown},
        position_ids={str(p.position_id) for p in positions if p.market_status == "open"},
        forecast_sample=[str(m) for m in universe.forecast_sample],
    )


def estimate_tokens(text: str) -> int:
    """A safe token count without a tokenizer (agents/budget.py: 2.8 characters per token, since
    the prompt's ids, prices and dates tokenize much worse than English prose)."""
    return budget_estimate(text)


def _money(value: Decimal | None) -> str:
    if value is None:
        return "?"
    return f"{Decimal(value).quantize(CENT):,}"


def _pct(fraction: Decimal) -> str:
    return format((fraction * 100).normalize(), "f")


def _num(value: Decimal) -> str:
    return format(Decimal(value).normalize(), "f")
