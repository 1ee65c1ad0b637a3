"""Every outbound HTTP call the arena makes (model endpoints and their probes, Gamma, CLOB, seal
publishing) goes through `fetch`, which owns two bounds no peer can stretch:

- A total deadline. A socket timeout counts one read at a time, so a peer sending one byte every
  100 ms never trips it and a "3 s" call can last minutes. Here the deadline covers connecting,
  sending, the status line and headers, and the body: each read waits at most what is left,
  and a watchdog shuts the socket down at the deadline, which also ends a read blocked inside
  header parsing that no per-read timeout could bound.
- A body cap, checked while reading (after decompression), before anything is parsed: a
  200 MB answer costs at most `max_bytes` of memory. `truncate=True` keeps the first
  `max_bytes` and says so (the model audit stores what it can); otherwise it is an error.

`parse_json` reads a body as JSON and turns a nesting bomb (RecursionError) into ValueError, so
callers handle one exception for every unreadable body.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import math
import socket
import ssl
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from core import clock

READ_SIZE = 65536


class HttpError(Exception):
    """The call did not produce an HTTP answer; the message is one line."""


class HttpTimeout(HttpError):
    """The total deadline passed before the whole answer arrived."""


class HttpConnectionError(HttpError):
    """Connecting, sending or reading failed (refused, reset, TLS, a garbled answer)."""


class BodyTooLarge(HttpError):
    """The body exceeded `max_bytes` and the caller did not ask for truncation."""


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage  # case-insensitive .get()
    body: bytes
    truncated: bool = False

    @property
    def charset(self) -> str | None:
        """The charset the server declared in Content-Type, if any."""
        for part in (self.headers.get("Content-Type") or "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip('"')
        return None

    def text(self) -> str:
        """The body decoded by its declared charset, else UTF-8 (JSON's), never guessed."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return parse_json(self.text())


def parse_json(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply to read") from exc


def fetch(
    method: str,
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    params: dict | None = None,
    json_body: Any = None,
    headers: dict[str, str] | None = None,
    truncate: bool = False,
) -> Reply:
    """One request whose answer arrives whole within `timeout` seconds in total, or raises
    HttpTimeout; see the module docstring. Redirects are not followed and no proxy is used:
    every peer we call is named by the operator."""
    deadline = time.monotonic() + max(0.001, timeout)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpConnectionError(f"not an http(s) URL: {url[:200]!r}")
    target = parts.path or "/"
    query = "&".join(q for q in (parts.query, urlencode(params or {}, doseq=True)) if q)
    if query:
        target += "?" + query
    body = None
    sent = {"Accept-Encoding": "gzip, deflate", "Connection": "close", **(headers or {})}
    if json_body is not None:
        body = json.dumps(json_body).encode()
        sent.setdefault("Content-Type", "application/json")
    conn = _connection(parts.scheme, parts.hostname, parts.port, _left(deadline))
    watchdog = threading.Timer(_left(deadline), _shut, (conn,))
    watchdog.daemon = True
    try:
        try:
            conn.connect()
            watchdog.start()
            conn.sock.settimeout(_left(deadline))
            conn.request(method, target, body=body, headers=sent)
            response = conn.getresponse()
            data, truncated = _read(conn, response, deadline, max_bytes)
        except (OSError, http.client.HTTPException, zlib.error) as exc:
            if time.monotonic() >= deadline or isinstance(exc, TimeoutError):
                raise HttpTimeout(f"no complete answer within {timeout:g}s") from exc
            raise HttpConnectionError(_one_line(f"{type(exc).__name__}: {exc}")) from exc
    finally:
        watchdog.cancel()
        conn.close()
    if truncated and not truncate:
        raise BodyTooLarge(f"response body larger than {max_bytes} bytes")
    return Reply(response.status, response.headers, data, truncated)


def _connection(scheme: str, host: str, port: int | None, timeout: float):
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=_tls())
    return http.client.HTTPConnection(host, port, timeout=timeout)


_tls_context: ssl.SSLContext | None = None


def _tls() -> ssl.SSLContext:
    global _tls_context
    if _tls_context is None:
        try:  # the same CA bundle requests uses, when installed
            import certifi

            _tls_context = ssl.create_default_context(cafile=certifi.where())
        except ImportError:
            _tls_context = ssl.create_default_context()
    return _tls_context


def _left(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        # The plain socket's shutdown, also under TLS: it wakes a blocked read at once.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _read(
    conn: http.client.HTTPConnection,
    response: http.client.HTTPResponse,
    deadline: float,
    max_bytes: int,
) -> tuple[bytes, bool]:
    encoding = (response.headers.get("Content-Encoding") or "").strip().lower()
    decoder = None
    if encoding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        decoder = zlib.decompressobj()
    chunks: list[bytes] = []
    size = 0
    limit = max_bytes + 1  # one byte over says "larger than the cap"
    while size < limit:
        if time.monotonic() >= deadline:
            raise TimeoutError("deadline passed while reading the body")
        if conn.sock is not None:
            conn.sock.settimeout(_left(deadline))
        raw = response.read1(READ_SIZE)
        if not raw:
            break
        if decoder is not None:
            # max_length bounds what one compressed chunk may expand to (a zip bomb).
            raw = decoder.decompress(raw, limit - size)
        chunks.append(raw)
        size += len(raw)
    data = b"".join(chunks)
    return data[:max_bytes], len(data) > max_bytes


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), never negative;
    None when absent or unreadable. Callers cap it: a server may not park us for an hour."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or clock.now())).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)
