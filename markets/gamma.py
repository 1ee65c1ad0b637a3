"""A thin client for Polymarket's Gamma API, and the parser that turns its market objects
into typed values.

Why hand-rolled: we only need three calls, and the API drifted a lot
in 2026, so owning the parsing keeps every quirk explicit and testable:

- `outcomes`, `outcomePrices`, `clobTokenIds` and `umaResolutionStatuses` are JSON *inside a
  string*; `volume`/`liquidity` are strings while `volumeNum`/`bestBid` are numbers;
  `closedTime` looks like "2025-11-01 06:28:08+00"; unset fields are usually omitted.
- List endpoints default to `closed=false`; `/markets/keyset` pages with `after_cursor` (a
  parameter named `cursor` is silently ignored and page 1 repeats for ever), caps `limit` at
  100 and binds its cursor to the query, so every filter is resent on every page.
"""

from __future__ import annotations

import json
import logging
import reprlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

from core.http import HttpConnectionError, HttpError, HttpTimeout, fetch, parse_retry_after
from core.text import clean_json, flat, outcome_key

log = logging.getLogger(__name__)

PAGE_LIMIT = 100  # keyset endpoints clamp `limit` to 100
MAX_CONDITION_IDS = 100  # more than 100 condition_ids in one request is a 422
DEFAULT_MAX_PAGES = 1000  # a runaway paginator stops here whatever the server says
RETRY_AFTER_CAP = 120.0  # seconds; a hostile Retry-After must not stall a beat task for hours
# A binary market's prices should add up to about 1 (No = 1 - Yes upstream); anything far
# off, like the legacy ["0", "0"], is not a quote we can mark positions with.
PRICE_SUM_TOLERANCE = Decimal("0.1")
PRICE_PLACES = Decimal("0.000001")  # PricePoint.price has 6 decimal places
MONEY_PLACES = Decimal("0.01")
# Real questions are a line or two and rules a few paragraphs; a megabyte of either is an attack
# on every page and prompt that shows it, so they are cut here.
QUESTION_CHARS = 1000
OUTCOME_CHARS = 200  # Gamma's own limit; the model's answer schema allows the same
DESCRIPTION_CHARS = 20_000
# A page of 100 markets with long rules is a few megabytes; far more is a broken upstream.
DEFAULT_MAX_BYTES = 32_000_000
INT_RANGE = (-(2**31), 2**31 - 1)  # an IntegerField on PostgreSQL


class GammaError(Exception):
    """Any failure talking to Gamma."""


class GammaUnavailable(GammaError):
    """Timeouts, connection errors, 429 or 5xx that outlasted every retry (transient)."""


class GammaBadResponse(GammaError):
    """A 200 whose body is not what the endpoint documents (after retries)."""


class GammaClientError(GammaError):
    """A 4xx other than 404/429: our request is wrong, retrying will not help."""

    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


class MarketNotFound(GammaError):
    """GET /markets/{id} answered 404."""


class MarketParseError(ValueError):
    """One market object is malformed; the caller skips it and keeps the rest of the page."""


# --- parsing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedMarket:
    external_id: str
    question: str
    condition_id: str = ""
    slug: str = ""
    description: str = ""
    resolution_source: str = ""
    category: str = ""
    tags: list[str] = field(default_factory=list)
    event_slug: str = ""
    event_title: str = ""
    outcomes: list[str] = field(default_factory=list)
    token_ids: list[str] = field(default_factory=list)
    # Each quote parsed and within [0, 1], index-aligned with outcomes; None when absent or
    # unreadable. price_error says why they are not usable as a market price (this includes
    # quotes that do not add up to 1, like the legacy ["0", "0"]).
    outcome_prices: list[Decimal] | None = None
    price_error: str = ""
    best_bid: Decimal | None = None
    best_ask: Decimal | None = None
    volume: Decimal = Decimal("0")
    liquidity: Decimal = Decimal("0")
    closed: bool = False
    accepting_orders: bool | None = None
    market_maker_address: str = ""
    neg_risk: bool = False
    neg_risk_market_id: str = ""
    group_item_title: str = ""
    group_item_threshold: int | None = None
    open_time: datetime | None = None
    close_time: datetime | None = None
    closed_time: datetime | None = None
    uma_end_date: datetime | None = None
    uma_status: str = ""
    uma_statuses: list[str] = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def is_binary(self) -> bool:
        return len(self.outcomes) == 2

    @property
    def prices(self) -> list[Decimal] | None:
        """The quotes if they are usable as a market price, else None."""
        return None if self.price_error else self.outcome_prices


def parse_market(raw: Any) -> ParsedMarket:
    """Turn one Gamma market object into a ParsedMarket, or raise MarketParseError.

    Fields the app cannot work without (id, question, outcomes, numbers, dates) are strict;
    prices are validated separately so a market with a garbage quote is still stored (and
    flagged) rather than dropped; cosmetic fields (tags, group threshold) are lenient.
    """
    if not isinstance(raw, dict):
        raise MarketParseError(f"market is a {type(raw).__name__}, not an object")
    # Upstream text is untrusted: NUL (which PostgreSQL refuses in text and JSON, and so would
    # abort the whole page's write), surrogates, control and bidi characters (a stored "seY"
    # shown as "Yes") go, everywhere in the object, including the raw copy that is kept.
    raw = clean_json(raw)
    external_id = _text(raw, "id", required=True, max_len=120)
    try:
        return _parse_fields(raw, external_id)
    except MarketParseError as exc:
        raise MarketParseError(f"market {external_id}: {exc}") from exc


def _parse_fields(raw: dict, external_id: str) -> ParsedMarket:
    # Labels are one line: an outcome "No\nforecast_sample: 1" must not split a prompt line.
    outcomes = [flat(o) for o in _json_string_list(raw, "outcomes", required=True)]
    if len(outcomes) < 2:
        raise MarketParseError(f"needs at least 2 outcomes, got {_short(outcomes)}")
    if any(not o.strip() or len(o) > OUTCOME_CHARS for o in outcomes):
        raise MarketParseError(f"outcome names must be non-empty and short: {_short(outcomes)}")
    # Names a reader cannot tell apart ("Yes" and "YES", or "Yes" and a fullwidth "Ｙｅｓ") would
    # be two sides of a market shown as one; no choice between them is ours to make.
    seen: dict[str, str] = {}
    for name in outcomes:
        key = outcome_key(name)
        if key in seen:
            raise MarketParseError(
                f"outcome names must be distinct: {_short(seen[key])} and {_short(name)} read the same: "
                f"{_short(outcomes)}"
            )
        seen[key] = name
    token_ids = _json_string_list(raw, "clobTokenIds", required=False)
    if token_ids and len(token_ids) != len(outcomes):
        raise MarketParseError("clobTokenIds and outcomes differ in length")
    outcome_prices, price_error = _parse_prices(raw.get("outcomePrices"), len(outcomes))
    best_bid, best_ask = _parse_bid_ask(raw)
    event = _first_event(raw)
    tags = _tag_labels(raw.get("tags"))
    category = _text(raw, "category", max_len=120) or (tags[0][:120] if tags else "")
    return ParsedMarket(
        external_id=external_id,
        question=flat(_text(raw, "question", required=True))[:QUESTION_CHARS],
        condition_id=_text(raw, "conditionId", max_len=100),
        slug=_text(raw, "slug", max_len=300),
        description=_text(raw, "description", max_len=DESCRIPTION_CHARS),
        resolution_source=_text(raw, "resolutionSource", max_len=500),
        category=category,
        tags=tags,
        event_slug=_clip(_str_or_empty(event.get("slug")), 300),
        event_title=_clip(flat(_str_or_empty(event.get("title"))), 500),
        outcomes=outcomes,
        token_ids=token_ids,
        outcome_prices=outcome_prices,
        price_error=price_error,
        best_bid=best_bid,
        best_ask=best_ask,
        volume=_amount(raw, "volumeNum", "volume"),
        liquidity=_amount(raw, "liquidityNum", "liquidity"),
        closed=_flag(raw, "closed"),
        accepting_orders=raw.get("acceptingOrders")
        if isinstance(raw.get("acceptingOrders"), bool)
        else None,
        market_maker_address=_text(raw, "marketMakerAddress"),
        neg_risk=_flag(raw, "negRisk"),
        neg_risk_market_id=_text(raw, "negRiskMarketID", max_len=100),
        group_item_title=flat(_text(raw, "groupItemTitle", max_len=200)),
        group_item_threshold=_lenient_int(raw.get("groupItemThreshold")),
        open_time=_when(raw, "startDate"),
        close_time=_when(raw, "endDate"),
        closed_time=_when(raw, "closedTime"),
        uma_end_date=_when(raw, "umaEndDate"),
        uma_status=_text(raw, "umaResolutionStatus", max_len=30).lower(),
        uma_statuses=_json_string_list(raw, "umaResolutionStatuses", required=False),
        raw=raw,
    )


def parse_price(value: Any) -> Decimal:
    """A probability in [0, 1] from a decimal string or a JSON number; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"price {_short(value)} is not a number")
    try:
        price = Decimal(value.strip() if isinstance(value, str) else str(value))
    except InvalidOperation as exc:
        raise ValueError(f"price {_short(value)} is not a number") from exc
    if not price.is_finite() or not Decimal(0) <= price <= Decimal(1):
        raise ValueError(f"price {_short(value)} is outside [0, 1]")
    return price.quantize(PRICE_PLACES)


def _parse_prices(value: Any, n_outcomes: int) -> tuple[list[Decimal] | None, str]:
    if value is None:
        return None, ""
    try:
        items = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None, f"outcomePrices {_short(value)} is not JSON"[:300]
    try:
        if not isinstance(items, list) or len(items) != n_outcomes:
            raise ValueError(f"outcomePrices {_short(value)} does not match {n_outcomes} outcomes")
        prices = [parse_price(item) for item in items]
    except ValueError as exc:
        return None, str(exc)[:300]
    if abs(sum(prices, Decimal(0)) - 1) > PRICE_SUM_TOLERANCE:
        return prices, f"outcomePrices {_short(value)} do not add up to 1"
    return prices, ""


def _parse_bid_ask(raw: dict) -> tuple[Decimal | None, Decimal | None]:
    # Bid/ask are extras next to the mid: a bad one is dropped, it never rejects the market.
    try:
        bid = parse_price(raw["bestBid"]) if raw.get("bestBid") is not None else None
        ask = parse_price(raw["bestAsk"]) if raw.get("bestAsk") is not None else None
    except ValueError:
        return None, None
    if bid is not None and ask is not None and bid > ask:
        return None, None
    return bid, ask


def parse_when(value: str) -> datetime:
    """Gamma timestamps in any of the forms seen: ISO with Z, "2025-11-01 06:28:08+00",
    a bare date. Naive values are UTC."""
    # fromisoformat (3.11+) reads "Z", "+00" and a space separator.
    parsed = datetime.fromisoformat(value.strip())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _when(raw: dict, key: str) -> datetime | None:
    value = raw.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MarketParseError(f"{key} {_short(value)} is not a timestamp string")
    try:
        return parse_when(value)
    except ValueError as exc:
        raise MarketParseError(f"{key} {_short(value)} is not a timestamp") from exc


def _text(raw: dict, key: str, *, required: bool = False, max_len: int | None = None) -> str:
    value = raw.get(key)
    if value is None:
        value = ""
    if isinstance(value, int) and not isinstance(value, bool) and key == "id":
        value = str(value)  # ids are numeric strings; accept a bare number too
    if not isinstance(value, str):
        raise MarketParseError(f"{key} {_short(value)} is not a string")
    value = value.strip()
    if required and not value:
        raise MarketParseError(f"{key} is missing")
    if max_len is not None and len(value) > max_len:
        if key in {"id", "conditionId", "negRiskMarketID"}:  # identifiers must not be cut
            raise MarketParseError(f"{key} is longer than {max_len} characters")
        value = value[:max_len]
    return value


def _json_string_list(raw: dict, key: str, *, required: bool) -> list[str]:
    value = raw.get(key)
    if value is None or value == "":
        if required:
            raise MarketParseError(f"{key} is missing")
        return []
    try:
        items = json.loads(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise MarketParseError(f"{key} {_short(value)} is not JSON") from exc
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise MarketParseError(f"{key} {_short(value)} is not a list of strings")
    return [i.strip() for i in items]


def _amount(raw: dict, number_key: str, string_key: str) -> Decimal:
    # Prefer the numeric twin (volumeNum); the string form (volume) is the fallback.
    value = raw.get(number_key)
    if value is None:
        value = raw.get(string_key)
    if value is None or value == "":
        return Decimal("0")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise MarketParseError(f"{number_key} {_short(value)} is not a number")
    try:
        amount = Decimal(value if isinstance(value, str) else str(value))
    except InvalidOperation as exc:
        raise MarketParseError(f"{number_key} {_short(value)} is not a number") from exc
    if not amount.is_finite() or amount < 0 or amount >= Decimal("1e17"):
        raise MarketParseError(f"{number_key} {_short(value)} is out of range")
    return amount.quantize(MONEY_PLACES)


def _flag(raw: dict, key: str) -> bool:
    value = raw.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise MarketParseError(f"{key} {_short(value)} is not a boolean")
    return value


def _lenient_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if INT_RANGE[0] <= number <= INT_RANGE[1] else None


def _first_event(raw: dict) -> dict:
    events = raw.get("events")
    if isinstance(events, list) and events and isinstance(events[0], dict):
        return events[0]
    return {}


def _tag_labels(tags: Any) -> list[str]:
    if not isinstance(tags, list):
        return []
    labels = []
    for tag in tags:
        if isinstance(tag, dict):
            label = tag.get("label") or tag.get("slug")
            if isinstance(label, str) and label.strip():
                labels.append(label.strip()[:120])
    return labels


# Values quoted in errors and logs: a megabyte-long or deeply nested field is shown cut short.
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlevel = 3


def _short(value: Any) -> str:
    return _REPR.repr(value)


def _str_or_empty(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _clip(value: str, max_len: int) -> str:
    return value[:max_len]


# --- HTTP ---------------------------------------------------------------------------------


@dataclass
class PageLog:
    """What a paginated read did, for reports and tests."""

    pages: int = 0
    stopped_early: str = ""  # why pagination stopped before the server said so, if it did


class JsonHttpClient:
    """GET-and-decode-JSON through core.http.fetch: every call has a total deadline however slowly
    the server answers and a body cap (ARENA_HTTP_MAX_BYTES) before parsing, transient
    failures are retried with exponential backoff (honouring Retry-After), and an explicit
    User-Agent is sent (some default UAs are blocked by Cloudflare). Shared by the Gamma and
    CLOB clients; its errors are the Gamma* exceptions above."""

    default_base_setting = "ARENA_GAMMA_URL"

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
        backoff: float = 0.5,
        backoff_cap: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        user_agent: str | None = None,
    ):
        self.base_url = (base_url or getattr(settings, self.default_base_setting)).rstrip("/")
        self.timeout = settings.ARENA_HTTP_TIMEOUT if timeout is None else timeout
        self.retries = settings.ARENA_HTTP_RETRIES if retries is None else retries
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self.sleep = sleep
        self.max_bytes = int(getattr(settings, "ARENA_HTTP_MAX_BYTES", DEFAULT_MAX_BYTES))
        self.headers = {
            "User-Agent": user_agent or settings.ARENA_USER_AGENT,
            "Accept": "application/json",
        }

    # -- transport --

    def _get_json(
        self, path: str, params: dict, shape: Callable[[Any], bool] = lambda body: True
    ) -> Any:
        """GET and decode JSON, retrying transient failures. A body that is not JSON or not of
        the expected `shape` (a truncated answer, a proxy's HTML page) counts as transient."""
        url = self.base_url + path
        attempts = self.retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                reply = fetch(
                    "GET",
                    url,
                    params=params,
                    headers=self.headers,
                    timeout=self.timeout,
                    max_bytes=self.max_bytes,
                )
            except (HttpTimeout, HttpConnectionError) as exc:
                if last:
                    raise GammaUnavailable(
                        f"GET {path}: {type(exc).__name__} after {attempts} tries"
                    ) from exc
                self._wait(attempt, None, f"{type(exc).__name__}")
                continue
            except HttpError as exc:  # larger than the cap: a repeat would be too
                raise GammaBadResponse(f"GET {path}: {exc}") from exc
            status = reply.status
            if status == 404:
                raise MarketNotFound(f"GET {path}: 404")
            if status == 429 or status >= 500:
                if last:
                    raise GammaUnavailable(f"GET {path}: HTTP {status} after {attempts} tries")
                self._wait(attempt, reply.headers.get("Retry-After"), f"HTTP {status}")
                continue
            if status >= 400:
                raise GammaClientError(status, reply.text())
            try:
                body = reply.json()
                problem = "" if shape(body) else "not the documented shape"
            except ValueError:
                problem = "not JSON"
            if not problem:
                return body
            if last:
                raise GammaBadResponse(
                    f"GET {path}: body is {problem} after {attempts} tries: {reply.text()[:120]!r}"
                )
            self._wait(attempt, None, f"body is {problem}")
        raise AssertionError("unreachable")  # the loop always returns or raises

    def _wait(self, attempt: int, retry_after: str | None, why: str) -> None:
        parsed = parse_retry_after(retry_after)
        delay = None if parsed is None else min(parsed, RETRY_AFTER_CAP)
        if delay is None:
            delay = min(self.backoff_cap, self.backoff * 2**attempt)
        log.info("%s: %s, retrying in %.1fs", self.base_url, why, delay)
        self.sleep(delay)


class GammaClient(JsonHttpClient):
    """Read-only Gamma API client: keyset pages of markets, lookups by id and condition id."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        max_pages: int = DEFAULT_MAX_PAGES,
        page_size: int = PAGE_LIMIT,
        **kwargs,
    ):
        super().__init__(base_url, **kwargs)
        self.max_pages = max_pages
        self.page_size = max(1, min(page_size, PAGE_LIMIT))  # the server clamps at 100 anyway

    # -- public reads --

    def iter_top_markets(self, limit: int, log_to: PageLog | None = None) -> Iterator[list[dict]]:
        """Pages of raw open markets by volume, highest first, `limit` markets in all."""
        if limit <= 0:
            return
        page_size = min(self.page_size, limit)
        params = {
            "closed": "false",
            "order": "volumeNum",
            "ascending": "false",
            "include_tag": "true",
        }
        remaining = limit
        for page in self.iter_keyset(params, page_size=page_size, log_to=log_to):
            yield page[:remaining]
            remaining -= min(len(page), remaining)
            if remaining <= 0:
                return

    def get_market(self, market_id: str) -> dict:
        """One raw market by Gamma id, open or closed; MarketNotFound on 404."""
        return self._get_json(
            f"/markets/{market_id}",
            {"include_tag": "true"},
            shape=lambda body: isinstance(body, dict),
        )

    def markets_by_condition_ids(
        self, condition_ids: Iterable[str], *, closed: bool | None = None
    ) -> list[dict]:
        """Raw markets for these condition ids, in batches of 100.

        closed=None asks for both open and closed markets: the API defaults to closed=false,
        so a plain lookup would silently miss every market that has closed.
        """
        ids = sorted({c for c in condition_ids if c})
        states = ["false", "true"] if closed is None else ["true" if closed else "false"]
        found: list[dict] = []
        for start in range(0, len(ids), MAX_CONDITION_IDS):
            batch = ids[start : start + MAX_CONDITION_IDS]
            for state in states:
                params = {"condition_ids": batch, "closed": state, "include_tag": "true"}
                for page in self.iter_keyset(params, page_size=self.page_size):
                    found.extend(page)
        return found

    def iter_keyset(
        self, params: dict, *, page_size: int | None = None, log_to: PageLog | None = None
    ) -> Iterator[list[dict]]:
        """Walk /markets/keyset with after_cursor until next_cursor is absent.

        Stops (logged, recorded in log_to) on a repeated cursor, which is what a server that
        ignores our cursor looks like, and after max_pages whatever happens.
        """
        log_to = log_to if log_to is not None else PageLog()
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            if log_to.pages >= self.max_pages:
                log_to.stopped_early = f"page cap of {self.max_pages} reached"
                log.warning("gamma keyset: %s", log_to.stopped_early)
                return
            query = dict(params, limit=min(page_size or self.page_size, PAGE_LIMIT))
            if cursor:
                query["after_cursor"] = cursor
            markets, cursor = self._keyset_page(query)
            log_to.pages += 1
            yield markets
            if not cursor:
                return
            if cursor in seen:
                log_to.stopped_early = f"cursor {cursor[:40]!r} repeated"
                log.warning("gamma keyset: %s; stopping", log_to.stopped_early)
                return
            seen.add(cursor)

    def _keyset_page(self, query: dict) -> tuple[list[dict], str | None]:
        body = self._get_json("/markets/keyset", query, shape=_is_keyset_page)
        return body["markets"], body.get("next_cursor") or None


def _is_keyset_page(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("markets"), list)
        and isinstance(body.get("next_cursor"), str | None)
    )
