"""Writes for competitors: the default lineup.

The lineup is the methodology's seven OpenRouter model families plus the five baselines. It is
seeded once (by `arena up`) and then belongs to staff, who edit it in the admin: a model id that
OpenRouter retires is changed there, not here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction

from agents.models import Competitor

# Reasoning models spend output tokens thinking before they answer; the answer itself (a JSON
# decision plus ~20 sample forecasts) fits in ~3k tokens, so max_tokens leaves room for both.
_MAX_TOKENS = 16000
# OpenRouter normalises `reasoning`: `effort` for OpenAI/xAI style models, `max_tokens` for
# Anthropic/Gemini/Qwen style budgets. Temperature 0 everywhere: the arena measures the model,
# not sampling noise (replicates measure what noise remains).
_EFFORT = {"effort": "medium"}
_BUDGET = {"max_tokens": 8000}
# A model staff add from the lineup review starts with these (they may tune it in the admin).
NEW_MODEL_PARAMS = {"temperature": 0, "max_tokens": _MAX_TOKENS}


def _llm(
    slug: str,
    name: str,
    family: str,
    model_id: str,
    price_in: str,
    price_out: str,
    reasoning: dict | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"temperature": 0, "max_tokens": _MAX_TOKENS}
    if reasoning:
        params["reasoning"] = dict(reasoning)
    return {
        "slug": slug,
        "display_name": name,
        "kind": Competitor.Kind.LLM,
        "family": family,
        "provider": "openrouter",
        "model_id": model_id,
        "params": params,
        # Fallback USD per million tokens, used only when a response lacks usage.cost.
        "price_in_per_m": Decimal(price_in),
        "price_out_per_m": Decimal(price_out),
    }


def _baseline(slug: str, name: str, strategy: str, notes: str) -> dict[str, Any]:
    return {
        "slug": slug,
        "display_name": name,
        "kind": Competitor.Kind.BASELINE,
        "family": "Baseline",
        "provider": "builtin",
        "strategy": strategy,
        "notes": notes,
    }


S = Competitor.Strategy
DEFAULT_LINEUP: list[dict[str, Any]] = [
    _llm("gpt-5-1", "GPT-5.1", "GPT", "openai/gpt-5.1", "1.25", "10", _EFFORT),
    _llm(
        "gemini-2-5-pro", "Gemini 2.5 Pro", "Gemini", "google/gemini-2.5-pro", "1.25", "10", _BUDGET
    ),
    _llm("grok-4", "Grok 4", "Grok", "x-ai/grok-4", "3", "15", _EFFORT),
    _llm(
        "claude-sonnet-4-5",
        "Claude Sonnet 4.5",
        "Claude",
        "anthropic/claude-sonnet-4.5",
        "3",
        "15",
        _BUDGET,
    ),
    _llm(
        "deepseek-v3-2", "DeepSeek V3.2", "DeepSeek", "deepseek/deepseek-v3.2-exp", "0.27", "0.40"
    ),
    _llm(
        "kimi-k2-thinking",
        "Kimi K2 Thinking",
        "Kimi",
        "moonshotai/kimi-k2-thinking",
        "0.60",
        "2.50",
        _EFFORT,
    ),
    _llm("qwen3-max", "Qwen3 Max", "Qwen", "qwen/qwen3-max", "1.20", "6"),
    _baseline("market", "Market", S.MARKET, "States the market price for every sampled market."),
    _baseline("cash", "Cash", S.CASH, "Never bets; states the market price where it must."),
    _baseline("random", "Random", S.RANDOM, "Seeded random bets and probabilities."),
    _baseline("favorite", "Favorite", S.FAVORITE, "Backs the side priced above 0.5."),
    _baseline(
        "longshot-fader", "Longshot fader", S.LONGSHOT_FADER, "Backs the complement of longshots."
    ),
]


def ensure_default_lineup() -> int:
    """Create the default lineup when no competitor exists yet; return how many were created.

    Only on an empty table, so competitors staff deleted or renamed do not come back on the
    next `arena up`. Two concurrent calls are safe: slugs are unique and get_or_create retries
    the read after losing an insert race.
    """
    if Competitor.objects.exists():
        return 0
    created = 0
    with transaction.atomic():
        for spec in DEFAULT_LINEUP:
            fields = dict(spec)
            _, was_created = Competitor.objects.get_or_create(
                slug=fields.pop("slug"), defaults=fields
            )
            created += int(was_created)
    return created
