"""Polymarket's Gamma and CLOB APIs, served from a seeded World on a clock the caller gives: the
rehearsal's stand-in for Polymarket, so sync, price marking, back-fill and resolution run
through the arena's real HTTP clients exactly as they do live.

The wire rules are the ones the real API enforces and the client relies on:
- /markets/keyset -> {"markets": [...], "next_cursor"?}; `closed` defaults to false; `limit`
  clamped to 100 (20 when absent); `next_cursor` only on a full page, bound to the query it
  came from (a cursor reused with other filters is a 422); `offset` is a 422 here; at most 100
  `condition_ids`; order volumeNum descending (the only order the arena asks for).
- /markets/{id} -> the market open or closed, 404 when unknown or not yet listed.
- /prices-history -> {"history": [{"t", "p"}]}; windows over 15 days are a 400; a closed
  market only has data at fidelity >= 720.
Faults are queued per path prefix and consumed in order (a status with an optional
Retry-After, a stall past the client's timeout, a truncated body), so a rehearsal can print its
fault schedule and a test can assert the client's answer to each.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from simulations.world import World

PAGE_CAP = 100
DEFAULT_LIMIT = 20
MAX_CONDITION_IDS = 100
HISTORY_MAX_SECONDS = 15 * 86400
COARSE_FIDELITY = 720  # minutes: what a closed market's history is still served at


@dataclass
class Fault:
    path: str  # path prefix it applies to
    kind: str  # "status" | "stall" | "truncated"
    status: int = 503
    retry_after: str | None = None
    stall: float = 0.0  # seconds, for "stall"


class WorldServer:
    """A real HTTP server on 127.0.0.1 (port 0 picks a free one) serving `world` at `now()`."""

    def __init__(self, world: World, now: Callable[[], datetime], port: int = 0):
        self.world = world
        self.now = now
        self.faults: list[Fault] = []
        self.served = 0  # requests answered, faults included
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._http.daemon_threads = True
        self._http.standin = self  # type: ignore[attr-defined]
        # A stop waits for serve_forever's next look (0.5 s apart by default).
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> WorldServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> WorldServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def fail(self, path: str, kind: str, *, times: int = 1, **how) -> None:
        """Queue `times` faults of one kind for requests whose path starts with `path`."""
        with self._lock:
            self.faults += [Fault(path, kind, **how) for _ in range(times)]

    def take_fault(self, path: str) -> Fault | None:
        with self._lock:
            self.served += 1
            for i, fault in enumerate(self.faults):
                if path.startswith(fault.path):
                    return self.faults.pop(i)
        return None

    # -- routes: (status, JSON body) --

    def route(self, path: str, query: dict[str, list[str]]) -> tuple[int, object]:
        at = self.now()
        if path == "/markets/keyset":
            return self._keyset(query, at)
        if path == "/prices-history":
            return self._history(query, at)
        if path.startswith("/markets/") and path.count("/") == 2:
            m = self.world.by_key(path.rsplit("/", 1)[1])
            if m is None or m.open_at > at:
                return 404, {"type": "not found", "error": "market not found"}
            return 200, self.world.gamma_market(m, at)
        return 404, {"type": "not found", "error": "no such route"}

    def _keyset(self, query: dict[str, list[str]], at: datetime) -> tuple[int, object]:
        if "offset" in query:
            return 422, _invalid("offset is not allowed on keyset endpoints")
        ids = set(query.get("condition_ids", []))
        if len(ids) > MAX_CONDITION_IDS:
            return 422, _invalid("condition_ids: at most 100 values are allowed")
        closed = _first(query, "closed", "false") == "true"
        chosen = [
            market
            for market in (self.world.gamma_market(m, at) for m in self.world.listed(at))
            if market["closed"] is closed and (not ids or market["conditionId"] in ids)
        ]
        limit = max(1, min(int(_first(query, "limit", str(DEFAULT_LIMIT))), PAGE_CAP))
        binding = json.dumps(
            sorted((k, v) for k, v in query.items() if k not in ("after_cursor", "limit"))
        )
        offset = 0
        if token := _first(query, "after_cursor", ""):
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                offset, bound = int(decoded["o"]), decoded["q"]
            except (ValueError, KeyError, TypeError):
                return 422, _invalid("invalid cursor")
            if bound != binding:
                return 422, _invalid("invalid cursor")
        page = chosen[offset : offset + limit]
        body: dict = {"markets": page}
        if len(page) == limit:
            cursor = json.dumps({"o": offset + limit, "q": binding}).encode()
            body["next_cursor"] = base64.urlsafe_b64encode(cursor).decode()
        return 200, body

    def _history(self, query: dict[str, list[str]], at: datetime) -> tuple[int, object]:
        token = _first(query, "market", "")
        m = self.world.token_owner(token) if token else None
        if m is None:
            return 400, {"error": "market is required"}
        start = int(_first(query, "startTs", "0"))
        end = int(_first(query, "endTs", str(int(at.timestamp()))))
        if "startTs" in query and end - start > HISTORY_MAX_SECONDS:
            return 400, {"error": "interval is too long"}
        fidelity = int(_first(query, "fidelity", "1"))
        if at >= m.close_at and fidelity < COARSE_FIDELITY:
            return 200, {"history": []}
        points = self.world.history(m, token, _utc(start), _utc(end), at)
        step, last, kept = fidelity * 60, None, []
        for point in points:
            if last is None or point["t"] - last >= step:
                kept.append(point)
                last = point["t"]
        return 200, {"history": kept}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        server: WorldServer = self.server.standin  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        fault = server.take_fault(parts.path)
        if fault and fault.kind == "stall":
            time.sleep(fault.stall)  # the client has given up by now; then answer normally
        if fault and fault.kind == "status":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            return self._send(fault.status, b'{"error": "upstream fault"}', extra)
        try:
            status, body = server.route(parts.path, parse_qs(parts.query))
        except ValueError:  # a non-numeric limit, startTs or fidelity
            status, body = 400, {"error": "invalid parameter"}
        payload = json.dumps(body).encode()
        if fault and fault.kind == "truncated":
            payload = payload[: max(1, len(payload) // 2)]
        self._send(status, payload, {})

    def _send(self, status: int, payload: bytes, headers: dict) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args) -> None:  # noqa: A002 (signature from http.server)
        pass  # the rehearsal reports what it served; per-request lines would drown its log


def _first(query: dict[str, list[str]], key: str, default: str) -> str:
    values = query.get(key)
    return values[0] if values else default


def _invalid(message: str) -> dict:
    return {"type": "validation error", "error": message}


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
