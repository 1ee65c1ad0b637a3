"""A fake Polymarket Gamma API: a real HTTP server on 127.0.0.1 for tests and benchmarks.

It reproduces what EXTERNAL_APIS.md §1 and §6 describe, so the client is exercised against
the same traps as the real thing:

- /markets/keyset -> {"markets": [...], "next_cursor"?}; next_cursor only on a full page; the
  cursor is bound to the query (a cursor reused with other filters is a 422); `limit` clamped
  to 100; `offset` -> 422; a parameter named `cursor` is ignored (page 1 again); `closed`
  defaults to false; more than 100 condition_ids -> 422; order=volumeNum&ascending=false.
- /markets (legacy) -> a bare list, limit clamped to 100, offset beyond 2,000 -> 422;
  unknown slug -> [].
- /markets/{id} -> the market whether open or closed, 404 when unknown.
- Market objects keep the wire quirks: JSON inside strings, `volume` string vs `volumeNum`
  number, `closedTime` as "2025-11-01 06:28:08+00", omitted fields, unknown fields,
  the snake_case `submitted_by` key, `active: true` on closed markets.
- Fault injection, consumed in order per path: an HTTP status (500, 503, 429 with
  Retry-After), a delay beyond the client's timeout, a malformed body; and `repeat_cursor`,
  the April-2026 behaviour where page 1 and its cursor come back for ever.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

OFFSET_TOO_LARGE = {
    "type": "validation error",
    "error": "offset too large, use /markets/keyset for deeper pagination",
}
OFFSET_ON_KEYSET = {
    "type": "validation error",
    "error": "offset is not allowed on keyset endpoints",
}
INVALID_CURSOR = {"type": "validation error", "error": "invalid cursor"}
INVALID_ORDER = {"type": "validation error", "error": "order fields are not valid"}
TOO_MANY_CONDITION_IDS = {
    "type": "validation error",
    "error": "condition_ids: at most 100 values are allowed",
}
INTERNAL_ERROR = {"type": "internal error", "error": "cannot get the information"}
ORDERABLE = {"volumeNum", "liquidityNum", "volume24hr", "endDate", "startDate", "id", "closedTime"}


@dataclass
class Fault:
    path: str  # path prefix the fault applies to
    # "status" | "timeout" | "malformed" (truncated JSON) | "shape" (wrong JSON) | "trickle"
    # (the real answer, status line included, one byte every `delay` seconds)
    kind: str
    status: int = 500
    retry_after: str | None = None
    delay: float = 0.0


@dataclass
class SeenRequest:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


class FakeGamma:
    def __init__(self, markets: list[dict] | None = None):
        self._markets: list[dict] = list(markets or [])
        self._version = 0  # bumped on every change, so cached query results stay honest
        self._cache: dict[tuple, list[dict]] = {}
        self.requests: list[SeenRequest] = []
        self.faults: list[Fault] = []
        self.repeat_cursor = False
        # When set, /markets/keyset answers this list as its one page, as it is: hostile objects
        # (wrong types, duplicate or missing ids) that the fake's own filters could not sort.
        # Lookups by id or condition id still see only `markets`.
        self.verbatim_page: list | None = None
        # CLOB /prices-history, served by the same fake: token id -> [(unix seconds, price)]
        self.history: dict[str, list[tuple[int, object]]] = {}
        self.history_max_days = 15  # longer explicit windows -> 400 "interval is too long"
        self.keyset_default_limit = 20
        self.offset_ceiling = 2000
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> FakeGamma:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a handler stuck in a "timeout" must not block stop()
        # serve_forever looks for a shutdown every poll_interval: at its default 0.5 s every
        # test that stops a fake waited up to half a second for nothing.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGamma:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- state helpers for tests (change markets through these, not by mutating the dicts) --

    @property
    def markets(self) -> list[dict]:
        return self._markets

    @markets.setter
    def markets(self, markets: list[dict]) -> None:
        with self._lock:
            self._markets = list(markets)
            self._changed()

    def add(self, *markets: dict) -> None:
        with self._lock:
            self._markets.extend(markets)
            self._changed()

    def remove(self, market_id: str) -> None:
        with self._lock:
            self._markets = [m for m in self._markets if m["id"] != market_id]
            self._changed()

    def update(self, market_id: str, **changes) -> dict:
        """Change wire fields of one market (pass wire names, e.g. outcomePrices=...)."""
        with self._lock:
            for market in self._markets:
                if market["id"] == market_id:
                    market.update(changes)
                    self._changed()
                    return market
        raise KeyError(market_id)

    def _changed(self) -> None:
        self._version += 1
        self._cache.clear()

    def set_prices(self, market_id: str, prices: list[str]) -> None:
        self.update(market_id, outcomePrices=json.dumps(prices))

    def fail(
        self,
        kind: str = "status",
        *,
        path: str = "/markets",
        status: int = 500,
        retry_after: str | None = None,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Queue `times` faults for the next requests whose path starts with `path`."""
        with self._lock:
            for _ in range(times):
                self.faults.append(Fault(path, kind, status, retry_after, delay))

    def requests_to(self, path: str) -> list[SeenRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # -- request handling (called from server threads) --

    def _record(self, path: str, query: dict, headers: dict) -> Fault | None:
        with self._lock:
            self.requests.append(SeenRequest(path, query, headers))
            for i, fault in enumerate(self.faults):
                if path.startswith(fault.path):
                    return self.faults.pop(i)
        return None

    def _snapshot(self) -> tuple[int, list[dict]]:
        with self._lock:
            return self._version, list(self._markets)

    def route(self, path: str, query: dict[str, list[str]]) -> tuple[int, object]:
        if path == "/status":
            return 200, "OK"
        if path == "/markets/keyset":
            return self._keyset(query)
        if path == "/prices-history":
            return self._prices_history(query)
        if path == "/markets":
            return self._legacy_list(query)
        if path.startswith("/markets/") and path.count("/") == 2:
            market_id = path.rsplit("/", 1)[1]
            for market in self._snapshot()[1]:
                if market["id"] == market_id:
                    return 200, _with_tags(market, _bool(query, "include_tag", False))
            return 404, {"type": "not found", "error": "market not found"}
        return 404, {"type": "not found", "error": "no such route"}

    def _keyset(self, query: dict[str, list[str]]) -> tuple[int, object]:
        if "offset" in query:
            return 422, OFFSET_ON_KEYSET
        if self.verbatim_page is not None:
            return 200, {"markets": list(self.verbatim_page)}
        status, selected = self._select(query)
        if status != 200:
            return status, selected
        limit = _clamped_limit(query, self.keyset_default_limit)
        binding = _query_binding(query)
        offset = 0
        token = _first(query, "after_cursor")  # `cursor` is not a parameter here: ignored
        if token and not self.repeat_cursor:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                offset, bound_to = int(decoded["o"]), decoded["q"]
            except (ValueError, KeyError, TypeError):
                return 422, INVALID_CURSOR
            if bound_to != binding:
                return 422, INVALID_CURSOR
        include_tag = _bool(query, "include_tag", False)
        page = [_with_tags(m, include_tag) for m in selected[offset : offset + limit]]
        body: dict = {"markets": page}
        if len(page) == limit:
            next_offset = limit if self.repeat_cursor else offset + limit
            cursor = json.dumps({"o": next_offset, "q": binding}).encode()
            body["next_cursor"] = base64.urlsafe_b64encode(cursor).decode()
        return 200, body

    def _prices_history(self, query: dict[str, list[str]]) -> tuple[int, object]:
        token = _first(query, "market")
        if not token:
            return 400, {"error": "market is required"}
        start, end = int(_first(query, "startTs") or 0), int(_first(query, "endTs") or 2**31)
        if "startTs" in query and end - start > self.history_max_days * 86400:
            return 400, {"error": "interval is too long"}
        fidelity = int(_first(query, "fidelity") or 1)
        closed = any(
            m.get("closed") and token in json.loads(m.get("clobTokenIds") or "[]")
            for m in self._snapshot()[1]
        )
        if closed and fidelity < 720:
            return 200, {"history": []}  # resolved markets: only coarse fidelity has data
        points, last = [], None
        for t, p in sorted(self.history.get(token, []), key=lambda point: point[0]):
            if start <= t <= end and (last is None or t - last >= fidelity * 60):
                points.append({"t": t, "p": p})
                last = t
        return 200, {"history": points}

    def _legacy_list(self, query: dict[str, list[str]]) -> tuple[int, object]:
        offset = int(_first(query, "offset") or 0)
        if offset > self.offset_ceiling:
            return 422, OFFSET_TOO_LARGE
        status, selected = self._select(query)
        if status != 200:
            return status, selected
        limit = _clamped_limit(query, self.keyset_default_limit)
        include_tag = _bool(query, "include_tag", False)
        return 200, [_with_tags(m, include_tag) for m in selected[offset : offset + limit]]

    def _select(self, query: dict[str, list[str]]) -> tuple[int, object]:
        """The markets matching the query's filters, in the query's order. Cached per query
        until the markets change: a 5,000-market benchmark asks the same query 50 times."""
        version, markets = self._snapshot()
        key = (version, _query_binding({k: v for k, v in query.items() if k != "limit"}))
        cached = self._cache.get(key)
        if cached is not None:
            return 200, cached
        status, selected = self._filter_and_order(markets, query)
        if status == 200:
            with self._lock:
                if version == self._version:
                    self._cache[key] = selected
        return status, selected

    def _filter_and_order(
        self, markets: list[dict], query: dict[str, list[str]]
    ) -> tuple[int, object]:
        closed = _bool(query, "closed", False)  # the documented default
        markets = [m for m in markets if bool(m.get("closed", False)) == closed]
        condition_ids = _multi(query, "condition_ids")
        if len(condition_ids) > 100:
            return 422, TOO_MANY_CONDITION_IDS
        if condition_ids:
            wanted = set(condition_ids)
            markets = [m for m in markets if m.get("conditionId") in wanted]
        for key, wire in (("id", "id"), ("slug", "slug")):
            values = set(_multi(query, key))
            if values:
                markets = [m for m in markets if m.get(wire) in values]
        order = _first(query, "order")
        if order:
            fields = order.split(",")
            if any(f not in ORDERABLE for f in fields):
                return 422, INVALID_ORDER
            descending = not _bool(query, "ascending", True)
            markets.sort(key=lambda m: (_sort_key(m, fields), int(m["id"])), reverse=descending)
        else:
            markets.sort(key=lambda m: int(m["id"]))  # oldest ids first, as observed
        return 200, markets


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGamma
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, a small body waits for the
    # client's delayed ACK (~40 ms per request), which would time the fake, not the client.
    disable_nagle_algorithm = True
    timeout = 10  # idle keep-alive connections are closed after this

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        fault = self.fake._record(parts.path, query, dict(self.headers.items()))
        try:
            if fault is not None and self._inject(fault):
                return
            status, body = self.fake.route(parts.path, query)
            if fault is not None and fault.kind == "trickle":
                self._trickle(status, json.dumps(body).encode(), fault.delay)
                return
            if isinstance(body, str):
                self._send(status, body.encode(), "text/plain")
            else:
                self._send(status, json.dumps(body).encode(), "application/json")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer

    def _inject(self, fault: Fault) -> bool:
        if fault.kind == "trickle":
            return False  # the real answer, sent slowly by do_GET
        if fault.kind == "timeout":
            # Hold the answer past the client's timeout; stop() releases it at teardown.
            self.fake._release.wait(fault.delay)
            return False
        if fault.kind == "shape":  # valid JSON, wrong shape
            self._send(200, b"[]", "application/json")
            return True
        if fault.kind == "malformed":
            self._send(200, b'{"markets": [{"id": "1", "question": ', "application/json")
            return True
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        body = INTERNAL_ERROR if fault.status >= 500 else {"error": "Too Many Requests"}
        self._send(fault.status, json.dumps(body).encode(), "application/json", headers)
        return True

    def _trickle(self, status: int, payload: bytes, every: float) -> None:
        head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        for byte in head.encode() + payload:
            if self.fake._release.wait(every):
                break  # stop() at teardown
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
        self.close_connection = True

    def _send(self, status: int, payload: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args) -> None:  # noqa: A002 (signature from http.server)
        pass


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


def _multi(query: dict[str, list[str]], key: str) -> list[str]:
    # Repeated (?k=a&k=b) and comma-separated (?k=a,b) forms are both accepted upstream.
    out: list[str] = []
    for value in query.get(key, []):
        out.extend(v for v in value.split(",") if v)
    return out


def _bool(query: dict[str, list[str]], key: str, default: bool) -> bool:
    value = _first(query, key)
    return default if value is None else value.lower() == "true"


def _clamped_limit(query: dict[str, list[str]], default: int) -> int:
    raw = _first(query, "limit")
    limit = int(raw) if raw not in (None, "") else default
    return max(0, min(limit, 100))  # clamped without an error


def _query_binding(query: dict[str, list[str]]) -> str:
    # The cursor is valid only with the exact same filters (and limit) it was issued for.
    items = sorted((k, tuple(v)) for k, v in query.items() if k not in {"after_cursor", "cursor"})
    return hashlib.sha256(repr(items).encode()).hexdigest()[:16]


def _sort_key(market: dict, fields: list[str]) -> tuple:
    return tuple(market.get(f) or 0 for f in fields)


def _with_tags(market: dict, include_tag: bool) -> dict:
    if include_tag or "tags" not in market:
        return market
    return {k: v for k, v in market.items() if k != "tags"}


# --- market builders ----------------------------------------------------------------------


def token_id(seed: str) -> str:
    """A ~77-digit decimal string, like a real CLOB token id (a uint256)."""
    return str(int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big"))


def condition_id(seed: str) -> str:
    return "0x" + hashlib.sha256(("condition:" + seed).encode()).hexdigest()


def gamma_time(dt: datetime) -> str:
    """closedTime's non-ISO wire form: "2025-11-01 06:28:08+00"."""
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00")


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_market(
    market_id: str,
    question: str | None = None,
    *,
    outcomes: tuple[str, ...] | list[str] = ("Yes", "No"),
    prices: tuple[str, ...] | list[str] | None = ("0.5", "0.5"),
    volume: float = 1000.0,
    liquidity: float = 500.0,
    closed: bool = False,
    end_date: datetime | None = None,
    closed_time: datetime | None = None,
    uma_status: str | None = None,
    uma_statuses: list[str] | None = None,
    best_bid: float | None = None,
    best_ask: float | None = None,
    event: dict | None = None,
    tags: list[dict] | None = None,
    neg_risk_market_id: str | None = None,
    group_item_title: str = "",
    group_item_threshold: str = "0",
    **extra,
) -> dict:
    """A market object as Gamma sends it (wire types, omitted unset fields, unknown extras)."""
    end_date = end_date or datetime(2030, 1, 1, 12, tzinfo=UTC)
    start = end_date - timedelta(days=60)
    market: dict = {
        "id": market_id,
        "question": question or f"Will thing #{market_id} happen?",
        "conditionId": condition_id(market_id),
        "slug": f"will-thing-{market_id}-happen",
        "resolutionSource": "",
        "endDate": iso(end_date),
        "liquidity": repr(float(liquidity)),
        "startDate": start.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "image": f"https://polymarket-upload.s3.us-east-2.amazonaws.com/thing-{market_id}.png",
        "description": f'This market will resolve to "{outcomes[0]}" if thing #{market_id} happens.\n\nOtherwise "{outcomes[1]}".',
        "outcomes": json.dumps(list(outcomes)),
        "volume": repr(float(volume)),
        "active": True,  # true even when closed
        "closed": closed,
        "marketMakerAddress": "",
        "createdAt": iso(start),
        "updatedAt": iso(end_date - timedelta(days=1)),
        "new": False,
        "featured": False,
        "submitted_by": "0x91430CaD2d3975766499717fA0D66A78D814E5c5",
        "archived": False,
        "resolvedBy": "0x6A9D222616C90FcA5754cd1333cFD9b7fb6a4F74",
        "restricted": True,
        "groupItemTitle": group_item_title,
        "groupItemThreshold": group_item_threshold,
        "questionID": "0x" + hashlib.sha256(("question:" + market_id).encode()).hexdigest(),
        "enableOrderBook": True,
        "orderPriceMinTickSize": 0.001,
        "orderMinSize": 5,
        "volumeNum": float(volume),
        "liquidityNum": float(liquidity),
        "endDateIso": end_date.strftime("%Y-%m-%d"),
        "hasReviewedDates": True,
        "volume24hr": round(float(volume) / 30, 6),
        "clobTokenIds": json.dumps([token_id(f"{market_id}:{o}") for o in outcomes]),
        "umaBond": "500",
        "umaReward": "5",
        "acceptingOrders": not closed,
        "negRisk": neg_risk_market_id is not None,
        "negRiskRequestID": "",
        "cyom": False,
        "competitive": 0.8015991903848178,
        "pagerDutyNotificationEnabled": False,
        "feeType": None,
        "feeSchedule": {"exponent": 1, "rate": 0.05, "takerOnly": True, "rebateRate": 0.25},
        "events": [
            event
            or {
                "id": f"9{market_id}",
                "ticker": f"thing-{market_id}",
                "slug": f"thing-{market_id}",
                "title": f"Thing #{market_id}?",
                "active": True,
                "closed": closed,
                "liquidity": float(liquidity),
                "volume": float(volume),  # a number on events
            }
        ],
    }
    if prices is not None:
        market["outcomePrices"] = json.dumps(list(prices))
    if closed:
        closed_time = closed_time or end_date
        market["closedTime"] = gamma_time(closed_time)
    if uma_status is not None:
        market["umaResolutionStatus"] = uma_status
        market["umaEndDate"] = iso(closed_time or end_date)
    market["umaResolutionStatuses"] = json.dumps(
        uma_statuses or ([uma_status] if uma_status else [])
    )
    if best_bid is not None:
        market["bestBid"] = best_bid
    if best_ask is not None:
        market["bestAsk"] = best_ask
        market["spread"] = round(best_ask - (best_bid or 0), 6)
    if tags is not None:
        market["tags"] = tags
    if neg_risk_market_id is not None:
        market["negRiskMarketID"] = neg_risk_market_id
        market["negRiskOther"] = False
    market.update(extra)
    return market


# Example A of EXTERNAL_APIS §1.8 (fetched 2025-12-10), type mix kept exactly.
def example_open_binary() -> dict:
    return {
        "id": "516706",
        "question": "Fed rate hike in 2025?",
        "conditionId": "0x4319532e181605cb15b1bd677759a3bc7f7394b2fdf145195b700eeaedfd5221",
        "slug": "fed-rate-hike-in-2025",
        "resolutionSource": "",
        "endDate": "2025-12-10T12:00:00Z",
        "liquidity": "51025.13654",
        "startDate": "2024-12-29T22:50:33.584839Z",
        "image": "https://polymarket-upload.s3.us-east-2.amazonaws.com/fed.jpg",
        "description": "This market will resolve to “Yes” if the upper bound of the target federal funds rate is increased at any point between January 1, 2025 and the Fed's December 2025 meeting...",
        "outcomes": '["Yes", "No"]',
        "outcomePrices": '["0.0025", "0.9975"]',
        "volume": "1089143.410872",
        "active": True,
        "closed": False,
        "marketMakerAddress": "",
        "createdAt": "2024-12-29T17:38:00.916304Z",
        "updatedAt": "2025-12-10T09:19:59.824472Z",
        "new": False,
        "featured": False,
        "submitted_by": "0x91430CaD2d3975766499717fA0D66A78D814E5c5",
        "archived": False,
        "resolvedBy": "0x6A9D222616C90FcA5754cd1333cFD9b7fb6a4F74",
        "restricted": True,
        "groupItemTitle": "",
        "groupItemThreshold": "0",
        "questionID": "0x8428884817cbc26422ec451101fcedfc5995907a8df6e5905bc29cd30d2867e7",
        "enableOrderBook": True,
        "orderPriceMinTickSize": 0.001,
        "orderMinSize": 5,
        "volumeNum": 1089143.410872,
        "liquidityNum": 51025.13654,
        "endDateIso": "2025-12-10",
        "startDateIso": "2024-12-29",
        "hasReviewedDates": True,
        "volume24hr": 82453.682256,
        "clobTokenIds": '["60487116984468020978247225474488676749601001829886755968952521846780452448915", "81104637750588840860328515305303028259865221573278091453716127842023614249200"]',
        "umaBond": "500",
        "umaReward": "5",
        "volumeClob": 1089143.410872,
        "acceptingOrders": True,
        "negRisk": False,
        "events": [
            {
                "id": "100205",
                "ticker": "FED-RATE-HIKE-2025",
                "slug": "fed-rate-hike-in-2025",
                "title": "Fed rate hike in 2025?",
                "active": True,
                "closed": False,
                "liquidity": 51025.13654,
                "volume": 1089143.410872,
                "openInterest": 0,
            }
        ],
        "tags": [
            {"id": "100196", "label": "Fed Rates", "slug": "fed-rates", "forceShow": False},
            {"id": "2", "label": "Politics", "slug": "politics"},
        ],
        "ready": False,
        "funded": False,
        "cyom": False,
        "competitive": 0.8015991903848178,
        "approved": True,
        "rewardsMinSize": 100,
        "rewardsMaxSpread": 3.5,
        "spread": 0.001,
        "oneDayPriceChange": -0.001,
        "lastTradePrice": 0.004,
        "bestBid": 0.002,
        "bestAsk": 0.003,
    }


# Example B: a resolved binary ("No" won). bestBid omitted, lastTradePrice a stale 1, and the
# status history lagging behind the status, all as captured.
def example_resolved_binary() -> dict:
    return {
        "id": "604489",
        "question": "Will Trump visit China by October 31?",
        "conditionId": "0x3d69cc559693ee46ba58da16e43c4e75b8da67b99c2e9a9d2f72bb0222d0f137",
        "slug": "will-trump-visit-china-by-october-31",
        "resolutionSource": "",
        "endDate": "2025-10-31T00:00:00Z",
        "startDate": "2025-09-19T21:22:54.912576Z",
        "description": 'If U.S. President Donald Trump visits China by October 31, 2025, 11:59 PM ET, this market will resolve to "Yes". Otherwise, this market will resolve to "No".',
        "outcomes": '["Yes", "No"]',
        "outcomePrices": '["0", "1"]',
        "volume": "549414.493468",
        "active": True,
        "closed": True,
        "marketMakerAddress": "",
        "closedTime": "2025-11-01 06:28:08+00",
        "submitted_by": "0x91430CaD2d3975766499717fA0D66A78D814E5c5",
        "resolvedBy": "0x65070BE91477460D8A7AeEb94ef92fe056C2f2A7",
        "groupItemTitle": "October 31, 2025",
        "groupItemThreshold": "0",
        "umaEndDate": "2025-11-01T06:28:08Z",
        "umaResolutionStatus": "resolved",
        "volumeNum": 549414.493468,
        "clobTokenIds": '["45601394554497090173642354630373884477724604907691447337031201817815960365378", "102652665954921241745169157447280060113772926009745753029489061659654862632571"]',
        "customLiveness": 0,
        "acceptingOrders": False,
        "negRisk": False,
        "negRiskRequestID": "",
        "lastTradePrice": 1,
        "bestAsk": 0.001,
        "umaResolutionStatuses": '["proposed"]',
        "holdingRewardsEnabled": False,
        "feeType": None,
    }


# Example D: a legacy 2020 AMM market; ["0", "0"] and no umaResolutionStatus.
def example_legacy_zero() -> dict:
    return json.loads(
        '{"id":"12","question":"Will Joe Biden get Coronavirus before the election?",'
        '"conditionId":"0xe3b423dfad8c22ff75c9899c4e8176f628cf4ad4caa00481764d320e7415f7a9",'
        '"slug":"will-joe-biden-get-coronavirus-before-the-election","endDate":"2020-11-04T00:00:00Z",'
        '"category":"US-current-affairs","liquidity":"0","outcomes":"[\\"Yes\\", \\"No\\"]",'
        '"outcomePrices":"[\\"0\\", \\"0\\"]","volume":"32257.445115","active":true,'
        '"marketType":"normal","closed":true,'
        '"marketMakerAddress":"0x8BD6C3D7a57D650A1870dd338234f90051fe9918",'
        '"closedTime":"2020-11-02 16:31:01+00","archived":false,"restricted":false,'
        '"volumeNum":32257.45,"liquidityNum":0,"endDateIso":"2020-11-04",'
        '"clobTokenIds":"[\\"53135072462907880191400140706440867753044989936304433583131786753949599718775\\", '
        '\\"60869871469376321574904667328762911501870754872924453995477779862968218702336\\"]",'
        '"fpmmLive":true,"umaResolutionStatuses":"[]","spread":1,"lastTradePrice":0,'
        '"bestBid":0,"bestAsk":1}'
    )


def void_market(market_id: str = "700001") -> dict:
    closed_at = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    return make_market(
        market_id,
        "Will the match be played on March 1?",
        prices=("0.5", "0.5"),
        closed=True,
        closed_time=closed_at,
        end_date=closed_at - timedelta(days=1),
        uma_status="resolved",
        uma_statuses=["proposed", "resolved"],
    )


def disputed_market(market_id: str = "700002") -> dict:
    return make_market(
        market_id,
        "Will the bill pass the Senate by March 1?",
        prices=("0.9995", "0.0005"),
        closed=True,
        closed_time=datetime(2026, 3, 1, 12, tzinfo=UTC),
        end_date=datetime(2026, 3, 1, 12, tzinfo=UTC),
        uma_status="disputed",
        uma_statuses=["proposed", "disputed"],
    )


def proposed_market(market_id: str = "700003") -> dict:
    return make_market(
        market_id,
        "Will it snow in Paris on March 1?",
        prices=("0.0005", "0.9995"),
        closed=True,
        closed_time=datetime(2026, 3, 1, 23, tzinfo=UTC),
        end_date=datetime(2026, 3, 1, 23, tzinfo=UTC),
        uma_status="proposed",
    )


def neg_risk_event(first_id: int = 1046093, *, resolved: bool = True) -> list[dict]:
    """The NYC temperature event of Example C: three mutually exclusive Yes/No legs, one
    resolved after a dispute. With resolved=False the legs are still trading."""
    group = "0x7f1e6b8a52c94b0e3f1d2a9c8b7e6d5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c00"
    event = {
        "id": "128661",
        "ticker": "highest-temperature-in-nyc-on-december-30",
        "slug": "highest-temperature-in-nyc-on-december-30",
        "title": "Highest temperature in NYC on December 30?",
        "volume": 41237.51,
        "liquidity": 0,
    }
    legs = [
        ("27°F or below", "0", ("0", "1"), ("0.05", "0.95"), ["proposed", "resolved"]),
        (
            "32-33°F",
            "3",
            ("1", "0"),
            ("0.7", "0.3"),
            ["proposed", "disputed", "proposed", "resolved"],
        ),
        ("38°F or higher", "6", ("0", "1"), ("0.25", "0.75"), ["proposed", "resolved"]),
    ]
    markets = []
    for offset, (title, threshold, final, trading, history) in enumerate(legs):
        end = datetime(2025, 12, 30, 12, tzinfo=UTC)
        markets.append(
            make_market(
                str(first_id + 3 * offset),
                f"Will the highest temperature in New York City be {title} on December 30?",
                prices=final if resolved else trading,
                volume=[2315.4107, 9120.55, 1088.02][offset],
                liquidity=0,
                closed=resolved,
                end_date=end,
                closed_time=end + timedelta(hours=21, minutes=offset),
                uma_status="resolved" if resolved else None,
                uma_statuses=history if resolved else [],
                event=event,
                tags=[
                    {"id": "104596", "label": "Highest temperature", "slug": "highest-temperature"},
                    {"id": "84", "label": "Weather", "slug": "weather"},
                ],
                neg_risk_market_id=group,
                group_item_title=title,
                group_item_threshold=threshold,
            )
        )
    return markets


def up_down_market(market_id: str = "800001") -> dict:
    return make_market(
        market_id,
        "Bitcoin Up or Down - March 3, 10AM ET",
        outcomes=("Up", "Down"),
        prices=("0.515", "0.485"),
        best_bid=0.51,
        best_ask=0.52,
        volume=250000,
    )


def team_names_market(market_id: str = "800002") -> dict:
    return make_market(
        market_id,
        "LoL: K27 vs Walczaki (BO3)",
        outcomes=("K27", "Walczaki"),
        prices=("0.345", "0.655"),
        best_bid=0.34,
        best_ask=0.35,
        volume=180000,
        sportsMarketType="moneyline",
        gameStartTime="2026-06-09 15:00:00+00",
    )


def over_under_market(market_id: str = "800003") -> dict:
    return make_market(
        market_id,
        "Lakers vs. Celtics: O/U 224.5",
        outcomes=("Over", "Under"),
        prices=("0.48", "0.52"),
        volume=90000,
        line=224.5,
    )


def bulk_markets(n: int, *, first_id: int = 2_000_000, shift: float = 0.0) -> list[dict]:
    """n plain open binary markets with distinct volumes (highest first by id order) and
    prices that move by `shift` between calls (for re-sync tests and the benchmark)."""
    markets = []
    for i in range(n):
        yes = round(0.05 + ((i * 37) % 90) / 100 + shift, 4)
        yes = min(max(yes, 0.001), 0.999)
        no = round(1 - yes, 4)
        markets.append(
            make_market(
                str(first_id + i),
                volume=1_000_000 - i * 10,
                prices=(repr(yes), repr(no)),
                best_bid=round(max(yes - 0.005, 0.0), 4),
                best_ask=round(min(yes + 0.005, 1.0), 4),
                tags=[{"id": "1", "label": "Bulk", "slug": "bulk"}],
            )
        )
    return markets
