"""What a simulated forecaster reads in the arena's decision prompt, and how many tokens a text
costs: the two things `simulations.simmodels` needs from the conversation before it answers.

It reads the prompt the way a model would, from the text alone (cash, max allocation, minimum
bet, positions, the forecast sample and every market with its prices), so a change of the
prompt's wording that a model could not follow either shows up in the simulated answers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation


@dataclass(frozen=True)
class MarketView:
    market_id: str
    question: str
    outcomes: tuple[str, ...]
    prices: dict[str, float]


@dataclass(frozen=True)
class PositionView:
    position_id: str
    market_id: str
    outcome: str
    price: float | None
    sellable: bool


@dataclass
class PromptView:
    cash: Decimal
    max_allocation: Decimal
    min_bet: Decimal
    sample: list[str]
    markets: dict[str, MarketView]  # in prompt order
    positions: list[PositionView] = field(default_factory=list)
    date: str = ""


_NUMBER = r"([\d,]+(?:\.\d+)?)"
_CASH = re.compile(rf"^Cash: \${_NUMBER}\s*$", re.M)
_ALLOCATION = re.compile(
    rf"^Max allocation for bets this week: \${_NUMBER}.*?minimum bet \${_NUMBER}", re.M
)
_SAMPLE = re.compile(r"^forecast_sample \([^)]*\): (.*)$", re.M)
_DATE = re.compile(r"^Date: (.*)$", re.M)
_POSITION = re.compile(
    r"^- position_id (\d+): \[(\d+)\] (?:«[^«»\n]*»|.*?) \| outcome («[^«»\n]*»|.+?) \| "
    r"[\d.]+ shares, cost \$[\d,.]+ \| "
    r"(?:current price ([\d.]+)[^|\n]*|current price unknown) \| (.+)$",
    re.M,
)
_MARKET = re.compile(r"^\[(\d+)\] (.*)\n  (.*?) · volume", re.M)
# Market text between the prompt's « » fences (prompt v2); the fences never nest.
_FENCED_QUOTE = re.compile(r"«([^«»]*)» ([^\s|]+)(?: \| |$)")


def read_prompt(text: str) -> PromptView | None:
    """The decision prompt's facts, or None when `text` is not one (no forecast_sample line)."""
    sample = _SAMPLE.search(text)
    cash = _CASH.search(text)
    allocation = _ALLOCATION.search(text)
    if not (sample and cash and allocation):
        return None
    markets: dict[str, MarketView] = {}
    for m in _MARKET.finditer(text):
        quotes = _quotes(m.group(3))
        if quotes:
            question = _unfenced(m.group(2))
            markets[m.group(1)] = MarketView(m.group(1), question, tuple(quotes), quotes)
    ids = [s.strip() for s in sample.group(1).split(",")]
    date = _DATE.search(text)
    return PromptView(
        cash=_money(cash.group(1)),
        max_allocation=_money(allocation.group(1)),
        min_bet=_money(allocation.group(2)),
        sample=[i for i in ids if i in markets],
        markets=markets,
        positions=[
            PositionView(
                position_id=p.group(1),
                market_id=p.group(2),
                outcome=_unfenced(p.group(3)),
                price=float(p.group(4)) if p.group(4) else None,
                sellable=p.group(5).strip() == "open",
            )
            for p in _POSITION.finditer(text)
        ],
        date=date.group(1).strip() if date else "",
    )


def _unfenced(text: str) -> str:
    text = text.strip()
    if text.startswith("«") and text.endswith("»"):
        return text[1:-1]
    return text


def _quotes(text: str) -> dict[str, float]:
    """'«Yes» 0.63 | «No» 0.37' (or, unfenced, 'Yes 0.63 | No 0.37') -> {'Yes': 0.63,
    'No': 0.37}; {} when a part is not 'name price'."""
    if text.startswith("«"):
        return _fenced_quotes(text)
    quotes: dict[str, float] = {}
    for part in text.split(" | "):
        name, _, price = part.strip().rpartition(" ")
        try:
            value = float(price)
        except ValueError:
            return {}
        if not name or not math.isfinite(value):
            return {}
        quotes[name] = value
    return quotes


def _fenced_quotes(text: str) -> dict[str, float]:
    quotes: dict[str, float] = {}
    end = 0
    for match in _FENCED_QUOTE.finditer(text):
        if match.start() != end:
            return {}
        end = match.end()
        try:
            value = float(match.group(2))
        except ValueError:
            return {}
        if not match.group(1) or not math.isfinite(value):
            return {}
        quotes[match.group(1)] = value
    return quotes if end == len(text) else {}


def _money(text: str) -> Decimal:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return Decimal(0)


# --- tokens ----------------------------------------------------------------------------------

_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]+")


def count_tokens(text: str) -> int:
    """Tokens as a BPE tokenizer roughly counts them: a token per 4 letters of a word, digits in
    threes, punctuation in pairs (`":`, `{"` merge). Within about a quarter of real counts for
    English prose, JSON and numbers, which is what a realistic usage figure needs."""
    total = 0
    for piece in _PIECES.findall(text or ""):
        if piece.isdigit():
            total += (len(piece) + 2) // 3
        elif piece.isalpha():
            total += (len(piece) + 3) // 4
        else:
            total += (len(piece) + 1) // 2
    return total


def count_prompt_tokens(messages: list[dict]) -> int:
    """The chat template adds a few tokens per message (role and separators)."""
    return sum(count_tokens(message_text(m.get("content"))) + 4 for m in messages) + 2


def message_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
