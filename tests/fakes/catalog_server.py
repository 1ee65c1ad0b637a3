"""A fake model catalog (OpenRouter's `GET /api/v1/models`): a real HTTP server on 127.0.0.1.

    with CatalogServer(load_catalog("openrouter_week1")) as server:
        server.base_url          # what the arena is configured with (ends in /api/v1)
        server.catalog = load_catalog("openrouter_week2")   # next week's listing
        server.fault = "garbage" # the next answers misbehave until reset to None

Faults: "status" (HTTP `fault_status` with OpenRouter's error body), "garbage" (200 with a body
that is not JSON), "not_a_catalog" (200 with JSON lacking `data`), "huge" (200 streaming
`huge_bytes` of a valid-looking JSON array), "trickle" (200 whose body arrives one byte every
`trickle_every` seconds, for ever, until the client gives up).

The recorded payloads in tests/fakes/catalogs/ are written by hand from the shape documented in
EXTERNAL_APIS.md §3.5: prices as strings in USD per token, `created` in unix seconds.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

API_PREFIX = "/api/v1"
CATALOGS = Path(__file__).parent / "catalogs"


def load_catalog(name: str) -> dict:
    return json.loads((CATALOGS / f"{name}.json").read_text())


class CatalogServer:
    def __init__(self, catalog: dict | None = None) -> None:
        self.catalog: dict = catalog if catalog is not None else {"data": []}
        self.fault: str | None = None
        self.fault_status = 503
        self.huge_bytes = 30_000_000
        self.trickle_every = 0.05
        self.requests = 0
        self.stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{API_PREFIX}"

    def start(self) -> CatalogServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # ends a trickle still being sent
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> CatalogServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection: no idle threads outlive a test

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        fake: CatalogServer = self.server.fake  # type: ignore[attr-defined]
        fake.requests += 1
        if self.path.split("?", 1)[0].rstrip("/") != f"{API_PREFIX}/models":
            return self._send(404, {"error": {"code": 404, "message": "Not Found"}})
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if fake.fault == "status":
                message = "Service temporarily unavailable"
                return self._send(fake.fault_status, {"error": {"code": fake.fault_status,
                                                                "message": message}})  # fmt: skip
            if fake.fault == "garbage":
                return self._send(200, b"<html><body>502 Bad Gateway</body></html>")
            if fake.fault == "not_a_catalog":
                return self._send(200, {"models": "moved"})
            if fake.fault == "huge":
                return self._huge(fake)
            if fake.fault == "trickle":
                return self._trickle(fake)
            self._send(200, fake.catalog)

    def _send(self, status: int, body: Any) -> None:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _huge(self, fake: CatalogServer) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        entry = json.dumps({"id": "padding/model", "name": "x" * 900}).encode() + b","
        self.wfile.write(b'{"data": [')
        sent = 0
        while sent < fake.huge_bytes and not fake.stopping.is_set():
            self.wfile.write(entry * 64)
            sent += len(entry) * 64

    def _trickle(self, fake: CatalogServer) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"data": [')
        self.wfile.flush()
        while not fake.stopping.wait(fake.trickle_every):
            self.wfile.write(b" ")
            self.wfile.flush()
