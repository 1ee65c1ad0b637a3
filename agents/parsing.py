"""Turn a model's answer into a validated decision.

The answer must contain one JSON object (bare, inside a ```json fence, or inside prose):

    {
      "action": "BET" | "SELL" | "HOLD",
      "bets": [{"market_id": "123", "outcome": "Yes", "amount": 50, "probability": 0.62}],
      "sells": [{"position_id": "17", "percentage": 50}],
      "forecasts": [{"market_id": "456", "outcome": "Yes", "probability": 0.3}],
      "reasoning": "why, in a few sentences"
    }

Rules (the prompt builder shows the same; every broken rule is reported, not just the first):
- One action per decision. BET carries at least one bet and no sells; SELL at least one sell and
  no bets; HOLD neither. Forecasts may accompany any action. The action is case-insensitive;
  when it is missing it is derived from what is present (bets and sells together are refused).
  Why: a weekly decision is easier to audit, and to explain on the page, as one kind of move.
- `bets`, `sells`, `forecasts` may be omitted or null (= empty); other keys are ignored.
- Ids are the ones shown in the prompt; a JSON integer is accepted for a numeric id.
- `amount`: USD, a positive number, kept to cents rounding down (never spend more than said);
  anything below 0.01 after that is refused. A string holding a plain number ("50", "12.5") is
  accepted because models often quote numbers; NaN, Infinity, true/false and other strings are
  not. Whether the entry can afford it is checked later, against its cash.
- `probability`: a finite number in [0, 1] (the probability of the named outcome).
- `percentage`: the share of the position to sell, in (0, 100].
- `outcome`: matched case-insensitively to the market's outcome names, so "YES"/"no" name the
  two sides of a Yes/No market; the « » marks the prompt puts around names may be kept. In
  forecasts it may be omitted for a two-outcome market: it then means "Yes" (or the first
  listed outcome when neither is called Yes).
- Two bets on the same market and outcome, two sells of the same position, or two forecasts of
  the same market and outcome are refused (combine them): silently merging would hide which
  probability the model meant.
- Each bet's probability is also a forecast. A forecast that contradicts the bet's probability
  for the same market and outcome is refused.
- Every market of the forecast sample needs a forecast (or a bet).
- `reasoning` is trimmed, cut to MAX_REASONING_CHARS, and loses control and bidi characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from core.text import clean, outcome_key

ACTIONS = ("BET", "SELL", "HOLD")
MAX_REASONING_CHARS = 4000
# Per list. A forecast per outcome of every market in the universe is legitimate (replays ask for
# all of them), so the cap scales with the universe; beyond that it is junk, not a decision.
MAX_ITEMS = 200
MAX_AMOUNT = Decimal(1_000_000_000)
MAX_PROBLEMS = 30
MAX_LISTED_IDS = 50
MAX_SCAN_STARTS = 50  # '{' positions tried when looking for the object inside prose
MAX_FENCES = 20  # ``` fences whose contents are tried before the whole text
CENT = Decimal("0.01")

_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


class NotAnObjectError(ValueError):
    """The answer is valid JSON but not an object (an array, a string...)."""


class DecisionValidationError(ValueError):
    """Every problem found, one per line, short enough to quote back to the model."""

    def __init__(self, problems: list[str]) -> None:
        # Problems quote the model's own text, which goes back to it and into the audit.
        self.problems = [clean(p) for p in problems]
        lines = [f"- {p}" for p in self.problems[:MAX_PROBLEMS]]
        if len(self.problems) > MAX_PROBLEMS:
            lines.append(f"- ... and {len(self.problems) - MAX_PROBLEMS} more problems")
        super().__init__("\n".join(lines))


@dataclass
class DecisionContext:
    """What the model was shown: ids as they appear in the prompt.

    `forecast_sample` ids must also be keys of `markets`.
    """

    markets: dict[str, list[str]]
    position_ids: set[str] = field(default_factory=set)
    forecast_sample: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Bet:
    market_id: str
    outcome: str
    amount: Decimal
    probability: float


@dataclass(frozen=True)
class Sell:
    position_id: str
    percentage: Decimal


@dataclass(frozen=True)
class Forecast:
    market_id: str
    outcome: str
    probability: float


@dataclass
class ParsedDecision:
    action: str
    bets: list[Bet]
    sells: list[Sell]
    forecasts: list[Forecast]  # explicit forecasts, then those implied by bets
    reasoning: str

    def to_json(self) -> dict:
        """A JSON-safe dict for storage; money and percentages as strings with two decimals."""
        return {
            "action": self.action,
            "bets": [
                {
                    "market_id": b.market_id,
                    "outcome": b.outcome,
                    "amount": str(b.amount),
                    "probability": b.probability,
                }
                for b in self.bets
            ],
            "sells": [
                {"position_id": s.position_id, "percentage": str(s.percentage)} for s in self.sells
            ],
            "forecasts": [
                {"market_id": f.market_id, "outcome": f.outcome, "probability": f.probability}
                for f in self.forecasts
            ],
            "reasoning": self.reasoning,
        }

    @classmethod
    def from_json(cls, data: dict) -> ParsedDecision:
        """The inverse of to_json (for stored, already validated decisions)."""
        return cls(
            action=data["action"],
            bets=[
                Bet(b["market_id"], b["outcome"], Decimal(b["amount"]), float(b["probability"]))
                for b in data["bets"]
            ],
            sells=[Sell(s["position_id"], Decimal(s["percentage"])) for s in data["sells"]],
            forecasts=[
                Forecast(f["market_id"], f["outcome"], float(f["probability"]))
                for f in data["forecasts"]
            ],
            reasoning=data["reasoning"],
        )


# --- finding the JSON ---------------------------------------------------------------------


def extract_json(text: str) -> dict:
    """The JSON object in a model's answer: fenced, bare, or the first complete one in prose.

    Raises ValueError with a message fit to show the model.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the response is empty; answer with one JSON object")
    # A real answer has a fence or two; a flood of them is junk and must not cost a parse each.
    fenced = [m.group(1) for m, _ in zip(_FENCE.finditer(text), range(MAX_FENCES))]
    first_error: ValueError | None = None
    for candidate in [*fenced, text]:
        try:
            return _object_in(candidate)
        except NotAnObjectError:
            raise  # clean JSON of the wrong type is the answer, not prose to search
        except ValueError as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def _object_in(text: str) -> dict:
    """The first JSON object in `text`, in time linear in its length.

    Each '{' is tried with the decoder's `raw_decode`, which reads one value and stops at its
    end (trailing prose is fine) or at the first character that cannot belong to it. When a
    try fails at position e, the next try starts at the first '{' from e on: every '{' before e
    was read as part of the failed object, so a try from there would meet the same error at e
    (and an object completed inside a broken one is a fragment, not the answer). So no
    character is read twice, whatever the text: 1 MB of "{{{{" costs as little as 1 MB of prose.
    """
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        pass  # not bare JSON: look for an object inside prose below
    else:
        if isinstance(value, dict):
            return value
        raise NotAnObjectError(f"expected a JSON object {{...}}, got {_json_type(value)}")
    error = ""
    start = stripped.find("{")
    for _ in range(MAX_SCAN_STARTS):
        if start == -1:
            break
        try:
            value, resume = _DECODER.raw_decode(stripped, start)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(stripped):
                error = error or "a '{' is never closed: the JSON object is incomplete"
            else:
                error = error or f"the JSON object is not valid JSON: {exc}"
            resume = max(exc.pos, start + 1)
        except RecursionError:
            error = error or "the JSON object is nested too deeply"
            resume = start + 1
        else:
            if isinstance(value, dict):
                return value
        # The first '{' may be prose ("{carefully}") or an unclosed brace: try the next one.
        start = stripped.find("{", resume)
    raise ValueError(error or "no JSON object found in the response")


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


# --- validating the decision -----------------------------------------------------------------


def parse_decision(text: str, ctx: DecisionContext) -> ParsedDecision:
    """Parse and validate; raises DecisionValidationError listing every problem."""
    try:
        data = extract_json(text)
    except ValueError as exc:
        raise DecisionValidationError([str(exc)]) from None
    problems: list[str] = []
    raw_bets = _list_field(data, "bets", problems)
    raw_sells = _list_field(data, "sells", problems)
    n_outcomes = sum(len(outcomes) for outcomes in ctx.markets.values())
    raw_forecasts = _list_field(data, "forecasts", problems, limit=max(MAX_ITEMS, n_outcomes))
    action = _action(data.get("action"), bool(raw_bets), bool(raw_sells), problems)
    bets = _bets(raw_bets, ctx, problems)
    sells = _sells(raw_sells, ctx, problems)
    forecasts = _merge_bet_forecasts(_forecasts(raw_forecasts, ctx, problems), bets, problems)
    _check_sample(forecasts, ctx, problems)
    reasoning = _reasoning(data.get("reasoning"), problems)
    if problems:
        raise DecisionValidationError(problems)
    return ParsedDecision(action, bets, sells, forecasts, reasoning)


def _list_field(data: dict, name: str, problems: list[str], limit: int = MAX_ITEMS) -> list:
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{name} must be a list")
        return []
    if len(value) > limit:
        problems.append(f"{name} has {len(value)} items; at most {limit}")
        return []
    return value


def _action(raw: Any, has_bets: bool, has_sells: bool, problems: list[str]) -> str:
    if raw is None:
        if has_bets and has_sells:
            problems.append("bets and sells cannot be combined in one decision; pick one action")
        return "BET" if has_bets else "SELL" if has_sells else "HOLD"
    action = raw.strip().upper() if isinstance(raw, str) else None
    if action not in ACTIONS:
        problems.append(f"action must be BET, SELL or HOLD (got {_show(raw)})")
        return "HOLD"
    if action == "BET":
        _expect(has_bets, "action BET needs at least one bet", problems)
        _expect(
            not has_sells, "action BET cannot include sells (one action per decision)", problems
        )
    elif action == "SELL":
        _expect(has_sells, "action SELL needs at least one sell", problems)
        _expect(not has_bets, "action SELL cannot include bets (one action per decision)", problems)
    else:
        _expect(not (has_bets or has_sells), "action HOLD cannot include bets or sells", problems)
    return action


def _expect(condition: bool, problem: str, problems: list[str]) -> None:
    if not condition:
        problems.append(problem)


def _bets(items: list, ctx: DecisionContext, problems: list[str]) -> list[Bet]:
    bets: list[Bet] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        where = f"bets[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        market_id = _market_id(item, where, ctx, problems)
        outcome = _outcome(item, market_id, where, ctx, problems, required=True)
        amount = _amount(item.get("amount"), where, problems)
        probability = _probability(item.get("probability"), where, problems)
        if market_id is None or outcome is None or amount is None or probability is None:
            continue
        if (market_id, outcome) in seen:
            problems.append(
                f"{where}: a second bet on market {market_id} {outcome!r}; combine them into one"
            )
            continue
        seen.add((market_id, outcome))
        bets.append(Bet(market_id, outcome, amount, probability))
    return bets


def _sells(items: list, ctx: DecisionContext, problems: list[str]) -> list[Sell]:
    sells: list[Sell] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"sells[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        position_id = _id(item.get("position_id"))
        if position_id is None:
            problems.append(f"{where}: position_id is missing or not an id")
        elif position_id not in ctx.position_ids:
            problems.append(f"{where}: unknown position_id {_show(position_id)}")
            position_id = None
        percentage = _percentage(item.get("percentage"), where, problems)
        if position_id is None or percentage is None:
            continue
        if position_id in seen:
            problems.append(f"{where}: position {position_id} is sold twice; combine the sells")
            continue
        seen.add(position_id)
        sells.append(Sell(position_id, percentage))
    return sells


def _forecasts(items: list, ctx: DecisionContext, problems: list[str]) -> list[Forecast]:
    forecasts: list[Forecast] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        where = f"forecasts[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        market_id = _market_id(item, where, ctx, problems)
        outcome = _outcome(item, market_id, where, ctx, problems, required=False)
        probability = _probability(item.get("probability"), where, problems)
        if market_id is None or outcome is None or probability is None:
            continue
        if (market_id, outcome) in seen:
            problems.append(f"{where}: market {market_id} {outcome!r} is forecast twice")
            continue
        seen.add((market_id, outcome))
        forecasts.append(Forecast(market_id, outcome, probability))
    return forecasts


def _merge_bet_forecasts(
    forecasts: list[Forecast], bets: list[Bet], problems: list[str]
) -> list[Forecast]:
    stated = {(f.market_id, f.outcome): f.probability for f in forecasts}
    merged = list(forecasts)
    for bet in bets:
        key = (bet.market_id, bet.outcome)
        if key not in stated:
            stated[key] = bet.probability
            merged.append(Forecast(bet.market_id, bet.outcome, bet.probability))
        elif abs(stated[key] - bet.probability) > 1e-9:
            problems.append(
                f"market {bet.market_id} {bet.outcome!r}: the bet says probability "
                f"{bet.probability:g} but the forecast says {stated[key]:g}; give one number"
            )
    return merged


def _check_sample(forecasts: list[Forecast], ctx: DecisionContext, problems: list[str]) -> None:
    covered = {f.market_id for f in forecasts}
    missing = list(dict.fromkeys(m for m in ctx.forecast_sample if m not in covered))
    if not missing:
        return
    shown = ", ".join(missing[:MAX_LISTED_IDS])
    if len(missing) > MAX_LISTED_IDS:
        shown += f" and {len(missing) - MAX_LISTED_IDS} more"
    problems.append(f"missing forecasts for markets {shown} (give a probability for each)")


def _reasoning(raw: Any, problems: list[str]) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        problems.append("reasoning must be a string")
        return ""
    # Published on the pages and in exports: no control or bidi characters (a right-to-left
    # override would make the reasoning read differently from what was stored).
    text = clean(raw).strip()
    if len(text) > MAX_REASONING_CHARS:
        text = text[: MAX_REASONING_CHARS - 1].rstrip() + "…"
    return text


# --- fields ------------------------------------------------------------------------------------


def _id(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _market_id(item: dict, where: str, ctx: DecisionContext, problems: list[str]) -> str | None:
    market_id = _id(item.get("market_id"))
    if market_id is None:
        problems.append(f"{where}: market_id is missing or not an id")
        return None
    if market_id not in ctx.markets:
        problems.append(f"{where}: unknown market_id {_show(market_id)}")
        return None
    return market_id


def _outcome(
    item: dict,
    market_id: str | None,
    where: str,
    ctx: DecisionContext,
    problems: list[str],
    required: bool,
) -> str | None:
    raw = item.get("outcome")
    if market_id is None:  # already reported; the outcome cannot be checked
        return None
    outcomes = ctx.markets[market_id]
    if raw is None and not required and len(outcomes) == 2:
        return _yes_outcome(outcomes)
    if raw is None:
        problems.append(f"{where}: outcome is missing (market {market_id}: {_listed(outcomes)})")
        return None
    if isinstance(raw, str):
        wanted = _outcome_key(raw)
        for name in outcomes:
            if _outcome_key(name) == wanted:
                return name
    problems.append(
        f"{where}: market {market_id} has no outcome {_show(raw)} (outcomes: {_listed(outcomes)})"
    )
    return None


def _outcome_key(name: str) -> str:
    """An outcome name as compared: the prompt shows names on one line between « » marks, and
    a model may copy the marks or not, and names are distinct under this key (markets whose
    names are not are refused at ingest)."""
    return outcome_key(name.replace("«", " ").replace("»", " "))


def _yes_outcome(outcomes: list[str]) -> str:
    for name in outcomes:
        if name.strip().casefold() == "yes":
            return name
    return outcomes[0]


def _amount(raw: Any, where: str, problems: list[str]) -> Decimal | None:
    number = _number(raw, f"{where}: amount", problems)
    if number is None:
        return None
    if number <= 0:
        problems.append(f"{where}: amount must be positive (got {_show(raw)})")
        return None
    if number > MAX_AMOUNT:
        problems.append(f"{where}: amount {_show(raw)} is too large")
        return None
    amount = number.quantize(CENT, rounding=ROUND_DOWN)
    if amount < CENT:
        problems.append(f"{where}: amount must be at least 0.01 (got {_show(raw)})")
        return None
    return amount


def _probability(raw: Any, where: str, problems: list[str]) -> float | None:
    number = _number(raw, f"{where}: probability", problems)
    if number is None:
        return None
    if not 0 <= number <= 1:
        problems.append(f"{where}: probability must be between 0 and 1 (got {_show(raw)})")
        return None
    return float(number)


def _percentage(raw: Any, where: str, problems: list[str]) -> Decimal | None:
    number = _number(raw, f"{where}: percentage", problems)
    if number is None:
        return None
    if not 0 < number <= 100:
        problems.append(f"{where}: percentage must be above 0 and at most 100 (got {_show(raw)})")
        return None
    percentage = number.quantize(CENT, rounding=ROUND_DOWN)
    if percentage <= 0:
        problems.append(f"{where}: percentage must be at least 0.01 (got {_show(raw)})")
        return None
    return percentage


def _number(raw: Any, label: str, problems: list[str]) -> Decimal | None:
    """A finite Decimal from a JSON number or a string holding one; reports why not."""
    if raw is None:
        problems.append(f"{label} is missing")
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        problems.append(f"{label} must be a number (got {_show(raw)})")
        return None
    try:
        # repr keeps a float's shortest decimal form (0.1 -> 0.1, not 0.1000000000000000055...).
        number = Decimal(repr(raw) if isinstance(raw, float) else raw)
    except (InvalidOperation, ValueError):
        problems.append(f"{label} must be a number (got {_show(raw)})")
        return None
    if not number.is_finite():
        problems.append(f"{label} must be a finite number (got {_show(raw)})")
        return None
    return number


def _show(value: Any, limit: int = 40) -> str:
    """A short, quotable rendering of what the model sent."""
    try:
        text = repr(value) if isinstance(value, float) else json.dumps(value)
    except (ValueError, RecursionError):  # e.g. an integer too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _listed(outcomes: list[str], limit: int = 10) -> str:
    shown = ", ".join(outcomes[:limit])
    return shown + (f" and {len(outcomes) - limit} more" if len(outcomes) > limit else "")
