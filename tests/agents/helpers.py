"""Builders shared by the decision tests: markets, a cohort, competitors on the fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from agents.models import Competitor
from cohorts.models import Cohort
from cohorts.services import open_cohort
from markets.models import Market
from tests.fakes.openai_server import FakeOpenAIServer

# A Sunday, five minutes after the cohort opened (the beat's decision time).
WEEK_START = datetime(2026, 11, 22, tzinfo=UTC)
AT = WEEK_START + timedelta(minutes=5)
KEY_ENV = "ARENA_TEST_LLM_KEY"


def make_market(
    n: int,
    *,
    yes: str = "0.40",
    volume: int | None = None,
    source: str = Market.Source.POLYMARKET,
    status: str = Market.Status.OPEN,
    outcomes: list[str] | None = None,
    prices: dict | None = None,
    close_in_days: float | None = 30,
) -> Market:
    outcomes = outcomes or ["Yes", "No"]
    if prices is None:
        prices = {"Yes": yes} if outcomes == ["Yes", "No"] else {}
    return Market.objects.create(
        source=source,
        external_id=f"{source}-{n}",
        question=f"Will event {n} happen?",
        description=f"Resolves Yes if event {n} happens before the close date. " * 3,
        outcomes=outcomes,
        last_prices=prices,
        volume=Decimal(volume if volume is not None else 1_000_000 - n),
        status=status,
        close_time=AT + timedelta(days=close_in_days) if close_in_days is not None else None,
    )


def make_markets(count: int, **kw) -> list[Market]:
    # Prices spread over (0, 1) so favourites and longshots both exist.
    return [
        make_market(i, yes=str(Decimal(5 + (i * 37) % 90) / 100), **kw) for i in range(1, count + 1)
    ]


def allowed_endpoints(server) -> str:
    """ARENA_LLM_ENDPOINTS as an operator would write it to let competitors use the fake."""
    return f"{server.base_url}|{KEY_ENV}"


@contextmanager
def fake_model_server(
    settings,
    monkeypatch,
    *,
    timeout: float = 5,
    retries: int = 3,
    backoff: float = 0.01,
    max_backoff: float = 0.05,
    extra_endpoints: str = "",
    **server_kw,
) -> Iterator[FakeOpenAIServer]:
    """A real OpenAI-compatible server on 127.0.0.1 that the operator allows, with retries fast
    enough for a test (the client's real backoff, scaled down) and the key in the environment."""
    settings.ARENA_LLM_TIMEOUT = timeout
    settings.ARENA_LLM_BACKOFF_BASE = backoff
    settings.ARENA_LLM_MAX_BACKOFF = max_backoff
    settings.ARENA_LLM_MAX_RETRIES = retries
    monkeypatch.setenv(KEY_ENV, "sk-or-v1-test")
    with FakeOpenAIServer(**server_kw) as fake:
        allowed = allowed_endpoints(fake)
        settings.ARENA_LLM_ENDPOINTS = (
            f"{allowed},{extra_endpoints.format(fake=fake)}" if extra_endpoints else allowed
        )
        yield fake


def llm_competitor(server, slug: str = "gpt-test", **kw) -> Competitor:
    defaults = {
        "display_name": slug,
        "kind": Competitor.Kind.LLM,
        "family": "GPT",
        "provider": "openrouter",
        "model_id": f"openai/{slug}",
        "params": {"temperature": 0, "max_tokens": 4000},
        "base_url": server.base_url if server is not None else "",
        "api_key_env": KEY_ENV if server is not None else "",
        "price_in_per_m": Decimal("1.25"),
        "price_out_per_m": Decimal("10"),
    }
    defaults.update(kw)
    return Competitor.objects.create(slug=slug, **defaults)


def baseline_competitor(strategy: str, replicates: int = 1) -> Competitor:
    return Competitor.objects.create(
        slug=f"baseline-{strategy}",
        display_name=strategy,
        kind=Competitor.Kind.BASELINE,
        strategy=strategy,
        replicates=replicates,
    )


def make_cohort(competitors, kind: str = Cohort.Kind.LIVE) -> Cohort:
    cohort, _ = open_cohort(WEEK_START, kind=kind, competitors=competitors, at=WEEK_START)
    return cohort


def answer(universe, bets=(), sells=(), action=None, reasoning="test", **extra) -> str:
    """A valid decision text for `universe`: the bets/sells given plus a forecast of "Yes" at
    0.5 for every sample market not bet on."""
    bet_markets = {str(b["market_id"]) for b in bets}
    forecasts = [
        {"market_id": str(m), "probability": 0.5}
        for m in universe.forecast_sample
        if str(m) not in bet_markets
    ]
    body = {
        "action": action or ("BET" if bets else "SELL" if sells else "HOLD"),
        "bets": list(bets),
        "sells": list(sells),
        "forecasts": forecasts,
        "reasoning": reasoning,
    }
    body.update(extra)
    return json.dumps(body)
