"""Structured output: the decision's JSON schema, sent as `response_format` to servers that
constrain generation with it (llama.cpp turns it into a grammar; vLLM and OpenAI support it).

Only for competitors with `structured_output` on. A small model left free copies the example
ids and forgets most of the sample; the schema makes the forecasts a fixed list whose market ids
are exactly the sample's, in order, bets name only markets the prompt showed, every list is
bounded and the reasoning short, so the answer fits its max_tokens. The parser still checks
everything (agents/parsing.py): the schema helps the model, it is not trusted.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_BETS = 10
MAX_SELLS = 10
MAX_REASONING = 600
# Any outcome name Gamma allows (markets.gamma.OUTCOME_CHARS): a shorter bound left a model
# under a grammar unable to name a long outcome at all.
MAX_OUTCOME = 200


def decision_schema(
    shown_ids: Sequence[str], sample: Sequence[str], position_ids: Sequence[str]
) -> dict:
    forecasts = [
        {
            "type": "object",
            "properties": {
                "market_id": {"type": "string", "const": str(m)},
                "probability": {"type": "number"},
            },
            "required": ["market_id", "probability"],
            "additionalProperties": False,
        }
        for m in sample
    ]
    bet = {
        "type": "object",
        "properties": {
            "market_id": {"type": "string", "enum": [str(m) for m in shown_ids]},
            "outcome": {"type": "string", "maxLength": MAX_OUTCOME},
            "amount": {"type": "number"},
            "probability": {"type": "number"},
        },
        "required": ["market_id", "outcome", "amount", "probability"],
        "additionalProperties": False,
    }
    sell = {
        "type": "object",
        "properties": {
            "position_id": {"type": "string", "enum": [str(p) for p in position_ids]},
            "percentage": {"type": "number"},
        },
        "required": ["position_id", "percentage"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["BET", "SELL", "HOLD"]},
            "bets": (
                {"type": "array", "items": bet, "maxItems": MAX_BETS}
                if shown_ids
                else {"type": "array", "maxItems": 0}
            ),
            # llama.cpp refuses an empty enum: without positions, sells is an empty list.
            "sells": (
                {"type": "array", "items": sell, "maxItems": MAX_SELLS}
                if position_ids
                else {"type": "array", "maxItems": 0}
            ),
            "forecasts": {
                "type": "array",
                # llama.cpp's grammar takes prefixItems with min/maxItems, not `items: false`.
                "prefixItems": forecasts,
                "minItems": len(forecasts),
                "maxItems": len(forecasts),
            },
            "reasoning": {"type": "string", "maxLength": MAX_REASONING},
        },
        "required": ["action", "bets", "sells", "forecasts", "reasoning"],
        "additionalProperties": False,
    }


def response_format(
    shown_ids: Sequence[str], sample: Sequence[str], position_ids: Sequence[str]
) -> dict:
    """The OpenAI-style `response_format` request field."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "decision",
            "strict": True,
            "schema": decision_schema(shown_ids, sample, position_ids),
        },
    }
