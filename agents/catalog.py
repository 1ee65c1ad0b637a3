"""A provider's model catalog (OpenRouter's `GET /models`), read and checked for the weekly
lineup review (agents/lineup_review.py); docs/lineup-review.md lists the fields used.

The catalog is untrusted input: an entry whose id is not a short plain string is skipped, a
price that is not a finite non-negative number (OpenRouter's router models say "-1") is
unknown, never zero, and a name is only ever text (the pages escape it). A catalog that cannot be
read at all (no answer within the deadline, an HTTP error, a body over the cap, JSON that is not
a catalog) raises CatalogUnreadable with a one-line reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agents.attempts import MILLION, decimal_or_none, one_line
from agents.llm import LLMClient, LLMError

MAX_ID_LENGTH = 200  # CatalogModel.model_id
MAX_NAME_LENGTH = 200
# Prices per million tokens are stored with 6 decimals below a million dollars.
MAX_PRICE_PER_M = Decimal(1_000_000)
SIX_PLACES = Decimal("0.000001")
# Unix times outside these years are not a model's creation date.
EARLIEST, LATEST = datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)


class CatalogUnreadable(Exception):
    """The catalog could not be read; the message is one line."""


@dataclass(frozen=True)
class Catalog:
    name: str  # matched with Competitor.provider
    url: str  # the API base, e.g. https://openrouter.ai/api/v1


@dataclass(frozen=True)
class Filters:
    """Which new models are worth proposing (the operator's settings)."""

    prefixes: tuple[str, ...] = ()  # id prefixes such as "openai/"; empty: any
    min_context: int = 0
    max_price_per_m: Decimal | None = None  # for prompt and completion tokens alike

    def why_not(self, model: ListedModel) -> str:
        """Why `model` is not proposed, or "" when it passes."""
        if self.prefixes and not model.model_id.startswith(self.prefixes):
            return "provider not reviewed"
        if self.min_context and (model.context_length or 0) < self.min_context:
            return f"context under {self.min_context}"
        if self.max_price_per_m is not None:
            prices = (model.price_in_per_m, model.price_out_per_m)
            if any(p is None or p > self.max_price_per_m for p in prices):
                return f"price unknown or over {self.max_price_per_m} per million tokens"
        return ""


@dataclass(frozen=True)
class ListedModel:
    model_id: str
    name: str
    context_length: int | None
    price_in_per_m: Decimal | None
    price_out_per_m: Decimal | None
    created: datetime | None


def configured_catalogs() -> list[Catalog]:
    """ARENA_LINEUP_CATALOGS: comma-separated `name=URL` (the name is the competitors'
    `provider`); an entry without a name is the provider "openrouter"."""
    catalogs = []
    for item in settings.ARENA_LINEUP_CATALOGS.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, url = item.partition("=") if "=" in item.split("://")[0] else ("", "", item)
        name, url = (name.strip() or "openrouter"), url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")) or len(name) > 60:
            raise ImproperlyConfigured(
                f"ARENA_LINEUP_CATALOGS: {item!r} is not name=http(s)://host/path"
            )
        catalogs.append(Catalog(name, url))
    return catalogs


def configured_filters() -> Filters:
    prefixes = tuple(p.strip() for p in settings.ARENA_LINEUP_PREFIXES.split(",") if p.strip())
    return Filters(
        prefixes, settings.ARENA_LINEUP_MIN_CONTEXT, settings.ARENA_LINEUP_MAX_PRICE_PER_M
    )


def read_catalog(catalog: Catalog) -> tuple[list[ListedModel], int]:
    """The catalog's usable models (first of each id) and how many entries were skipped."""
    client = LLMClient(catalog.url, None, timeout=settings.ARENA_LINEUP_TIMEOUT, max_retries=0)
    try:
        entries = client.model_catalog(max_bytes=settings.ARENA_LINEUP_MAX_BYTES)
    except LLMError as exc:
        raise CatalogUnreadable(one_line(str(exc))) from exc
    models: dict[str, ListedModel] = {}
    skipped = 0
    for entry in entries:
        model = listed_model(entry)
        if model is None or model.model_id in models:
            skipped += 1
            continue
        models[model.model_id] = model
    if entries and not models:
        raise CatalogUnreadable(f"none of the {len(entries)} catalog entries is a usable model")
    return list(models.values()), skipped


def listed_model(entry: Any) -> ListedModel | None:
    if not isinstance(entry, dict):
        return None
    model_id = entry.get("id")
    if not isinstance(model_id, str) or not 0 < len(model_id) <= MAX_ID_LENGTH:
        return None
    if not model_id.isprintable() or any(c.isspace() for c in model_id):
        return None
    name = entry.get("name")
    name = one_line(name)[:MAX_NAME_LENGTH] if isinstance(name, str) else ""
    pricing = _object(entry.get("pricing"))
    top = _object(entry.get("top_provider"))
    return ListedModel(
        model_id=model_id,
        name=name or model_id,
        context_length=_count(entry.get("context_length")) or _count(top.get("context_length")),
        price_in_per_m=_per_million(pricing.get("prompt")),
        price_out_per_m=_per_million(pricing.get("completion")),
        created=_unix_time(entry.get("created")),
    )


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        return None
    return value


def _per_million(value: Any) -> Decimal | None:
    per_token = decimal_or_none(value)
    if per_token is None or per_token < 0:
        return None
    per_m = per_token * MILLION
    if per_m >= MAX_PRICE_PER_M:
        return None
    return per_m.quantize(SIX_PLACES)


def _unix_time(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not EARLIEST.timestamp() <= value < LATEST.timestamp():
        return None
    return datetime.fromtimestamp(value, UTC)
