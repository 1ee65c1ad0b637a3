"""The shared cache on Redis, degrading to "no cache" while Redis is unreachable.

Everything the site keeps in the cache can be recomputed (rendered pages, version tokens), so
an unreachable Redis must cost speed, never a 500: while it is down every read is a miss, every
write is skipped, `add` reports "not added" and `incr` of a missing key raises the usual
ValueError. After one failure the backend stops asking Redis for BREAKER_SECONDS, so a
dead or hung server costs each request at most one socket timeout instead of one per cache call.

Writes that happened while Redis was away could not replace the version tokens
(core/versions.py), so pages cached before the outage would come back stale. The first process
that reaches Redis again after seeing it fail replaces every token before anything else.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import RedisError

from core.versions import KEYS

log = logging.getLogger(__name__)

BREAKER_SECONDS = 5.0


class ReusingRedisCacheClient(RedisCacheClient):
    """Django's client builds a `redis.Redis` object on every get/set; with redis-py that
    constructor registers a few hundred response callbacks, about 0.2 ms of CPU, which is most
    of what a page-cache hit costs. A client only wraps its connection pool and is thread-safe,
    so one per pool is reused."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ResilientRedisCache(RedisCache):
    def __init__(self, server, params):
        options = dict(params.get("OPTIONS") or {})
        self.breaker_seconds = float(options.pop("breaker_seconds", BREAKER_SECONDS))
        super().__init__(server, {**params, "OPTIONS": options})
        self._class = ReusingRedisCacheClient
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._saw_outage = False

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _call(self, name: str, fallback: Callable[[], Any], *args, **kwargs):
        if not self.available:
            return fallback()
        try:
            if self._saw_outage:
                # Before anything is read: a token read first would still name the old pages.
                self._replace_tokens()
            return getattr(super(), name)(*args, **kwargs)
        except RedisError as exc:
            with self._lock:
                if not self._saw_outage:
                    log.warning("cache unreachable, serving uncached: %s", exc)
                self._saw_outage = True
                self._down_until = time.monotonic() + self.breaker_seconds
            return fallback()

    def _replace_tokens(self) -> None:
        super().set_many({key: uuid.uuid4().hex for key in KEYS}, None)
        with self._lock:
            self._saw_outage = False
        log.warning("cache reachable again; pages cached before the outage invalidated")

    # Every public operation, with what it means when Redis is away.
    def get(self, key, default=None, version=None):
        return self._call("get", lambda: default, key, default, version)

    def get_many(self, keys, version=None):
        return self._call("get_many", dict, keys, version)

    def has_key(self, key, version=None):
        return self._call("has_key", lambda: False, key, version)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set", lambda: None, key, value, timeout, version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set_many", lambda: list(data), data, timeout, version)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("add", lambda: False, key, value, timeout, version)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("touch", lambda: False, key, timeout, version)

    def delete(self, key, version=None):
        return self._call("delete", lambda: False, key, version)

    def delete_many(self, keys, version=None):
        return self._call("delete_many", lambda: None, keys, version)

    def incr(self, key, delta=1, version=None):
        def missing():
            raise ValueError(f"Key '{key}' not found (cache unreachable)")

        return self._call("incr", missing, key, delta, version)

    def clear(self):
        return self._call("clear", lambda: False)
