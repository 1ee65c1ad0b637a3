"""The shared cache, on Redis or in files, degrading to "no cache" while it cannot be used.

Everything the site keeps in the cache can be recomputed (rendered pages, version tokens), so
an unreachable Redis must cost speed, never a 500: while it is down every read is a miss, every
write is skipped, `add` reports "not added" and `incr` of a missing key raises the usual
ValueError. After one failure the backend stops asking Redis for BREAKER_SECONDS, so a
dead or hung server costs each request at most one socket timeout instead of one per cache call.

Writes that happened while Redis was away could not replace the version tokens
(core/versions.py), so pages cached before the outage would come back stale. The first process
that reaches Redis again after seeing it fail replaces every token before anything else.

The file cache (one machine, no Redis) fails the same way when var/ is full or unwritable: a write
that raises OSError (ENOSPC, EACCES, EROFS, ...) is skipped and logged once per streak, a file that
cannot be read is a miss, and the page is served uncached. A write that fails removes the key's
old file (that works on a full disk), so a version token that could not be replaced is gone
rather than still naming the pages of before the write: the next read renders uncached. On a
read-only disk even that fails, and PAGE_TTL (web/cache.py) bounds what is served.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.core.files import locks
from redis.exceptions import RedisError

from core.versions import KEYS

log = logging.getLogger(__name__)

BREAKER_SECONDS = 5.0
FILE_LOG_SECONDS = 60.0


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


# What reading a cache file can raise besides "no such file": a disk error, or a file cut short
# (a crash between write and rename cannot leave one, a bad sector or a manual copy can).
ZLIB_HEADER = b"\x78"  # the first byte of every zlib stream Django's file cache wrote
UNREADABLE = (OSError, EOFError, ValueError, zlib.error, pickle.UnpicklingError)


class _DiskState:
    """Whether one cache directory refuses writes, shared by every thread's cache object (Django
    makes one per thread) so the process logs a streak once, not once per thread; and how many
    more writes this process may make before it lists the directory again (`_cull`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failing = False
        self.logged = False
        self.quiet_until = 0.0
        self.unlisted_writes = 0  # since the last listing
        self.write_budget = 0  # writes the last listing's room allows before the next


# A process spends at most this share of the room the last listing saw before listing again:
# with up to this many processes writing at once the folder stays within MAX_ENTRIES, with more
# it may run past by a share per extra process until their next listings cull it.
ROOM_SHARE = 8


_DISKS: dict[str, _DiskState] = {}
_DISKS_LOCK = threading.Lock()


class ResilientFileBasedCache(FileBasedCache):
    """Django's file cache, failing as the module says, and storing values uncompressed: a
    page-cache hit reads four files (three version tokens and the page), and inflating a page
    of 20 to 80 kB was a third of the hit's CPU. Files written compressed (by Django's own
    writer, before) are still read: a pickle starts with its PROTO opcode, never with the
    zlib header."""

    def _write_content(self, file, timeout, value):
        file.write(pickle.dumps(self.get_backend_timeout(timeout), self.pickle_protocol))
        file.write(pickle.dumps(value, self.pickle_protocol))

    @staticmethod
    def _value(data: bytes) -> Any:
        return pickle.loads(zlib.decompress(data) if data[:1] == ZLIB_HEADER else data)

    def validate_key(self, key):
        """Every key is a valid file name here (the file is named by the key's hash), so
        Django's memcached checks, a Python loop over each key's characters, are skipped: a
        page-cache hit made one per file it read, 2.5 us each."""

    def _read(self, key, default, version):
        try:
            with open(self._key_to_file(key, version), "rb") as f:
                if not self._is_expired(f):
                    return self._value(f.read())
        except FileNotFoundError:
            pass
        return default

    def __init__(self, dir, params):
        with _DISKS_LOCK:
            self._disk = _DISKS.setdefault(os.path.abspath(dir), _DiskState())
        super().__init__(dir, params)

    @property
    def _failing(self) -> bool:
        return self._disk.failing

    def _failed(self, action: str, exc: BaseException) -> None:
        # Once per streak, and once a minute at most: a nearly full disk flaps (each failed
        # write frees the file it replaced, so the next small one fits).
        disk = self._disk
        with disk.lock:
            now = time.monotonic()
            if not disk.failing and now >= disk.quiet_until:
                log.warning("file cache cannot %s, serving uncached: %s", action, exc)
                disk.quiet_until = now + FILE_LOG_SECONDS
                disk.logged = True
            disk.failing = True

    def _worked(self) -> None:
        disk = self._disk
        if not disk.failing:
            return
        with disk.lock:
            disk.failing = False
            if disk.logged and time.monotonic() >= disk.quiet_until:
                disk.logged = False
                log.warning("file cache writable again")

    def _createdir(self):
        try:
            super()._createdir()
        except OSError as exc:  # at start-up too: a full or read-only var/ must not stop the site
            self._failed("create its directory", exc)

    def get(self, key, default=None, version=None):
        try:
            return self._read(key, default, version)
        except UNREADABLE as exc:
            self._failed("read", exc)
            return default

    def has_key(self, key, version=None):
        try:
            return super().has_key(key, version)
        except UNREADABLE as exc:
            self._failed("read", exc)
            return False

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            super().set(key, value, timeout, version)
        except OSError as exc:
            self._failed("write", exc)
            # The old value must not outlive a write that replaced it (a version token would
            # keep naming pages the write made stale); removing a file works on a full disk.
            with contextlib.suppress(OSError):
                super().delete(key, version)
        else:
            self._worked()

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        """Atomic across threads and processes: the value is written to a file of its own and
        linked under the key's name, which fails when the name exists. Django's add (does the
        file exist? then write it) let several threads or processes take one render lock (six
        threads racing over 150 keys: up to five winners for one key). An expired
        file under the name is removed and the link tried once more. "Not added" when the disk
        refuses the write, so no caller believes it holds a lock it never stored."""
        name = self._key_to_file(key, version)
        try:
            self._createdir()
            self._cull()
            fd, tmp = tempfile.mkstemp(dir=self._dir)
            try:
                with open(fd, "wb") as f:
                    self._write_content(f, timeout, value)
                for _ in range(2):
                    try:
                        os.link(tmp, name)
                    except FileExistsError:
                        if self.has_key(key, version):  # live: another holds it
                            return False
                        continue  # expired, and has_key removed it
                    self._worked()
                    return True
                return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
        except OSError as exc:
            self._failed("write", exc)
            return False

    def _cull(self):
        """Past MAX_ENTRIES, Django deletes a third of the files at random, the version tokens
        among them: one culled token makes every page depending on it a miss at once, and a
        culled page has no previous version to serve while it renders again, so each of its
        visitors at that moment renders it. Here the expired files go first (the render
        locks of past versions are most of them), then the least recently written; the
        version tokens never.

        Django lists the whole directory before every write to count it, and a worker's
        committed write takes a render lock per hot page (web/prerender.py): with the render
        locks of past versions in it (hundreds of files) such listings take a quarter of a busy
        rehearsal worker's CPU. So the count is taken again only once this process's writes
        could have filled a share of the room the last listing left (ROOM_SHARE)."""
        disk = self._disk
        with disk.lock:
            if disk.unlisted_writes < disk.write_budget:
                disk.unlisted_writes += 1
                return
        files = self._list_cache_files()
        with disk.lock:
            disk.unlisted_writes = 0
            disk.write_budget = max(0, self._max_entries - len(files)) // ROOM_SHARE
        if len(files) < self._max_entries:
            return
        tokens = {self._key_to_file(key) for key in KEYS}
        aged, kept = [], 0
        for path in files:
            if path in tokens:
                kept += 1
                continue
            try:
                with open(path, "rb") as f:
                    if self._is_expired(f):  # closes and removes the file
                        continue
                aged.append((os.stat(path).st_mtime, path))
            except (FileNotFoundError, EOFError, pickle.UnpicklingError):
                continue
        over = kept + len(aged) - self._max_entries
        if over < 0:  # the expired files made the room
            return
        share = len(files) // self._cull_frequency if self._cull_frequency else len(aged)
        aged.sort()
        for _, path in aged[: max(over + 1, share)]:
            self._delete(path)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        # Django's touch, reading this cache's values (not deflated) with _value.
        try:
            with open(self._key_to_file(key, version), "r+b") as f:
                locks.lock(f, locks.LOCK_EX)
                try:
                    if self._is_expired(f):
                        return False
                    value = self._value(f.read())
                    f.seek(0)
                    self._write_content(f, timeout, value)
                    f.truncate()
                    return True
                finally:
                    if not f.closed:  # an expired file was closed and removed
                        locks.unlock(f)
        except FileNotFoundError:
            return False
        except UNREADABLE as exc:
            self._failed("write", exc)
            return False

    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except OSError as exc:
            self._failed("delete", exc)
            return False

    def clear(self):
        try:
            super().clear()
        except OSError as exc:
            self._failed("clear", exc)
