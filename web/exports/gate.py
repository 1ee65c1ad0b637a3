"""What an anonymous export may cost the site.

Exports bypass the page cache and one can cost seconds of CPU (`snapshots.csv?limit=100000`):
twelve at once once held every gunicorn thread while the cached home page timed out. So:

- An export is kept (with the page cache on, ARENA_PAGE_CACHE), whole, in the cache under the data version it was read at (every token of
  core/versions.py, and its normalised bounds): a repeated export is one cache read, like a
  cached page, until a write moves a token. Bodies over CACHED_BYTES are streamed every time.
- Exports that must be read run at most ARENA_EXPORTS_CONCURRENT at once per process and
  ARENA_EXPORTS_PER_CLIENT per client network (core/clients.py); beyond that the answer is a
  429 with Retry-After at once, so a flood never holds the threads cached pages are served on.
- The slot is held while the body streams and freed when it ends or the client goes away.
- The decision (kept copy, slot or 429) is taken by web/exports/door.py before any other
  middleware runs: under a flood of exports each refusal is a cache read and a one-line 429,
  not a pass through sessions, auth, CSRF and the page cache competing with the cached pages
  for the same threads and CPU (an attack run saw cached `/` go from 13 ms p99 to over 1 s).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse

from core.clients import client_network
from core.versions import KEYS, versions

CACHED_BYTES = 8_000_000
CACHE_SECONDS = 3600
RETRY_AFTER_SECONDS = 5


class _Slots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._by_client: Counter[str] = Counter()
        self._machine: list[int] = []  # descriptors of the machine-wide slots held (flock)

    def take(self, client: str) -> bool:
        overall = int(getattr(settings, "ARENA_EXPORTS_CONCURRENT", 1))
        each = int(getattr(settings, "ARENA_EXPORTS_PER_CLIENT", 1))
        with self._lock:
            if self._running >= overall or self._by_client[client] >= each:
                return False
            held = _machine_slot()
            if held == -1:
                return False
            if held is not None:
                self._machine.append(held)
            self._running += 1
            self._by_client[client] += 1
            return True

    def give_back(self, client: str) -> None:
        with self._lock:
            self._running -= 1
            self._by_client[client] -= 1
            if self._by_client[client] <= 0:
                del self._by_client[client]
            if self._machine:
                os.close(self._machine.pop())  # closing the descriptor drops its flock


def _machine_slot() -> int | None:
    """A machine-wide export slot (ARENA_EXPORTS_MACHINE of them; 0: no such limit): the
    descriptor of a lock file held with flock, -1 when all are taken.

    Per process, ARENA_EXPORTS_CONCURRENT exports still add up across gunicorn's workers: three
    workers ran three CPU-heavy exports at once on two cores and cached `/` reached a 1 s p99
    behind them. flock is released by the kernel if the process dies, so no slot leaks."""
    count = int(getattr(settings, "ARENA_EXPORTS_MACHINE", 0))
    for i in range(count):
        fd = os.open(settings.VAR_DIR / f"export-slot-{i}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            os.close(fd)
    return -1 if count > 0 else None


SLOTS = _Slots()


def busy() -> HttpResponse:
    response = HttpResponse(
        f"Too many exports at once; try again in {RETRY_AFTER_SECONDS} seconds.\n",
        status=429,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def cache_key(request_key: str) -> tuple[str | None, tuple]:
    """The cache key of an export read now, and the tokens it is read under (None, ... when
    the cache is unreachable or the page cache is off: then nothing is kept)."""
    if not settings.ARENA_PAGE_CACHE:
        return None, ()
    current = versions(cache.get_many(list(KEYS)), KEYS)
    if None in current:
        return None, current
    digest = hashlib.sha256(f"{current}|{request_key}".encode()).hexdigest()[:40]
    return f"arena:export:{digest}", current


def cached(key: str | None) -> tuple[dict[str, str], bytes] | None:
    """(headers, body) of an export kept under `key`, if any."""
    if key is None:
        return None
    found = cache.get(key)
    return found if isinstance(found, tuple) and len(found) == 2 else None


class Admission:
    """What the gate decided for one export request: its bounds (or why they are refused), the
    cache key and kept copy, and the client whose slot it holds (None: none held). Whoever
    admitted it calls settle() once the response is built: a slot no streaming body took over
    is freed there, so every path out (a kept copy, a 400, an exception) gives it back."""

    def __init__(
        self,
        bounds: Any = None,
        error: str | None = None,
        key: str | None = None,
        kept: tuple[dict[str, str], bytes] | None = None,
        client: str | None = None,
    ) -> None:
        self.bounds = bounds
        self.error = error
        self.key = key
        self.kept = kept
        self.client = client
        self.slots = SLOTS  # the instance the slot was taken from (tests replace SLOTS)

    def hand_over(self) -> str:
        """The slot's client, now owned by the streaming body (Gated), which frees it."""
        client = self.client
        assert client is not None, "an export body needs a slot"
        self.client = None
        return client

    def settle(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            self.slots.give_back(client)


class Gated(Iterable[bytes]):
    """The body of one export: holds its slot until the last byte is sent (or the response is
    closed without being read), and keeps a copy in the cache when it is small enough."""

    def __init__(
        self,
        body: Iterator[str],
        slots: _Slots,
        client: str,
        key: str | None,
        headers: dict[str, str],
    ) -> None:
        self.body = body
        self.slots = slots
        self.client = client
        self.key = key
        self.headers = headers
        self._released = False

    def __iter__(self) -> Iterator[bytes]:
        kept: list[bytes] | None = [] if self.key is not None else None
        size = 0
        try:
            for text in self.body:
                chunk = text.encode()
                if kept is not None:
                    size += len(chunk)
                    kept = kept if size <= CACHED_BYTES else None
                    if kept is not None:
                        kept.append(chunk)
                yield chunk
            if kept is not None:
                cache.set(self.key, (self.headers, b"".join(kept)), CACHE_SECONDS)
        finally:
            self.close()

    def close(self) -> None:
        if not self._released:
            self._released = True
            self.slots.give_back(self.client)
        # A body left unread is closed now, not when it is collected: the seal export reads in
        # a transaction of its own, which must end before the request gives its connection back.
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


def client_of(request) -> str:
    return client_network(request) or "unknown"
