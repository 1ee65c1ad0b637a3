"""Data version tokens: the ground truth of "has anything a reader sees changed?".

Three tokens, each replaced (once the writing transaction commits) by the writes it covers:
- data: every write that changes what a public page shows (settlements, decisions, syncs,
  resolutions, staff changes, score runs) calls `data_changed()`;
- values: snapshot ticks (`values_changed()`): only the pages that show portfolio values over
  time (home, cohort, entry, competitor pages, their API) depend on it, so a tick every 10
  minutes leaves the market, decision and methodology pages cached;
- scores: a new score run (`scores_changed()`, which also replaces data): the leaderboard API
  shows nothing else.
The page cache (web/cache.py) keys its entries on the tokens a page depends on, and `memo()`
keeps derived values (chart annotations, a leaderboard's rows) until their tokens change. Random
tokens (not counters) mean two concurrent bumps can't collapse into one. This module lives in the
ground package because every app's write path calls it while the cache itself belongs to the site.
"""

import uuid
from contextlib import contextmanager
from contextvars import ContextVar

from django.core.cache import cache
from django.db import connection, transaction

DATA_KEY = "arena:data-version"
VALUES_KEY = "arena:values-version"
SCORES_KEY = "arena:scores-version"
KEYS = (DATA_KEY, VALUES_KEY, SCORES_KEY)


_pinned: ContextVar[dict | None] = ContextVar("arena_pinned_tokens", default=None)


@contextmanager
def pinned(found: dict | None = None):
    """Within one read request: each token is read from the cache once (`found`, from the
    caller's own get_many, or along with the first value that needs it) and that value is used
    throughout. So a request that reads several kept values costs one round trip for each,
    not two, and everything it shows was derived under one set of tokens, read before any of
    it was computed."""
    reset = _pinned.set({k: v for k, v in (found or {}).items() if k in KEYS and v})
    try:
        yield
    finally:
        _pinned.reset(reset)


def _pin(found: dict) -> dict[str, str]:
    # Every token, from what a get_many(KEYS + ...) returned; missing ones are created.
    tokens = {key: found.get(key) or version(key) for key in KEYS}
    held = _pinned.get()
    if held is not None:
        held.update({k: v for k, v in tokens.items() if v})
    return tokens


def _pending() -> bool:
    """Whether this connection's open transaction has written something whose token it will
    replace only when it commits. Until then nothing kept under the current tokens describes
    what this transaction sees, so it neither reads nor stores kept values (a test's writes
    and reads share one transaction that never commits; a web request's read has none)."""
    blocks = connection.atomic_blocks
    return bool(blocks) and getattr(connection, "arena_pending", None) is blocks[0]


def _changed(bump) -> None:
    blocks = connection.atomic_blocks
    if blocks:
        # Marked on this thread's connection for its outermost block, the transaction whose
        # commit runs `bump`; the commit clears it. A rolled-back transaction leaves the mark
        # on its block, which only a later transaction reusing that very block object (an
        # @atomic-decorated function) matches: that one computes instead of reading kept
        # values, which costs time, never correctness.
        connection.arena_pending = blocks[0]
        transaction.on_commit(_settled)
    transaction.on_commit(bump)


def _settled() -> None:
    connection.arena_pending = None


def version(key: str) -> str:
    """The current token under `key` (creating one on first use); within `pinned()`, the one
    the request read first. Inside a transaction with uncommitted changes (`_pending`), a new
    random one that nothing was kept under."""
    if _pending():
        return uuid.uuid4().hex
    held = _pinned.get()
    if held and key in held:
        return held[key]
    token = cache.get(key)
    if token is None:
        cache.add(key, uuid.uuid4().hex, None)
        token = cache.get(key)
    if held is not None and token:
        held[key] = token
    return token


def versions(found: dict) -> dict[str, str]:
    """Every token, given what a `cache.get_many(KEYS + ...)` already returned (one round trip
    when all exist); missing ones are created."""
    return _pin(found)


def data_version() -> str:
    return version(DATA_KEY)


def values_version() -> str:
    return version(VALUES_KEY)


def scores_version() -> str:
    return version(SCORES_KEY)


def _bump_data() -> None:
    cache.set(DATA_KEY, uuid.uuid4().hex, None)


def _bump_values() -> None:
    cache.set(VALUES_KEY, uuid.uuid4().hex, None)


def _bump_scores() -> None:
    cache.set_many({DATA_KEY: uuid.uuid4().hex, SCORES_KEY: uuid.uuid4().hex}, None)


def data_changed() -> None:
    """Invalidate cached pages once the current transaction commits (now, outside one)."""
    _changed(_bump_data)


def values_changed() -> None:
    """New snapshots: invalidate the pages that show values over time, once this commits."""
    _changed(_bump_values)


def scores_changed() -> None:
    """A new score run (or lineup change): invalidate the leaderboard API and every page."""
    _changed(_bump_scores)


def memo(name: str, compute, tokens: tuple[str, ...] = (DATA_KEY,), ttl: int = 3600):
    """`compute()`, kept in the cache until one of `tokens` is replaced: for what only changes
    with the writes those tokens cover (e.g. chart annotations change with data writes, never
    with a snapshot tick). One round trip when it is there: with the tokens already read by
    this request (`pinned`) only the value is fetched, else the tokens come along in one
    get_many. The tokens are read before computing, so a value is never stored under tokens
    newer than the data it was computed from."""
    if _pending():
        return compute()
    key = f"arena:memo:{name}"
    held = _pinned.get()
    if held and all(k in held for k in tokens):
        stored = cache.get(key)
        current = tuple(held[k] for k in tokens)
    else:
        found = cache.get_many([*KEYS, key])
        every = _pin(found)
        current = tuple(every[k] for k in tokens)
        stored = found.get(key)
    if stored is not None and stored[0] == current:
        return stored[1]
    value = compute()
    cache.set(key, (current, value), ttl)
    return value
