"""Data version tokens: the ground truth of "has anything a reader sees changed?".

Three tokens, each replaced (once the writing transaction commits) by the writes it covers:
- data: every write that changes what a public page shows (settlements, decisions, syncs,
  resolutions, staff changes, score runs) calls `data_changed()`;
- values: snapshot ticks (`values_changed()`): only the pages that show portfolio values over
  time (home, cohort, entry, competitor pages, their API) depend on it, so a tick every 10
  minutes leaves the market, decision and methodology pages cached;
- scores: a new score run (`scores_changed()`, which also replaces data): the leaderboard API
  shows nothing else.
The page cache (arena/cache.py) keys its entries on the tokens a page depends on, and `memo()`
keeps derived values (chart annotations, a leaderboard's rows) until their tokens change. Random
tokens (not counters) mean two concurrent bumps can't collapse into one. This module lives in the
ground package because every app's write path calls it while the cache itself belongs to the site.
"""

import uuid

from django.core.cache import cache
from django.db import transaction

DATA_KEY = "arena:data-version"
VALUES_KEY = "arena:values-version"
SCORES_KEY = "arena:scores-version"
KEYS = (DATA_KEY, VALUES_KEY, SCORES_KEY)


def version(key: str) -> str:
    """The current token under `key`, creating one on first use."""
    token = cache.get(key)
    if token is None:
        cache.add(key, uuid.uuid4().hex, None)
        token = cache.get(key)
    return token


def versions(found: dict) -> dict[str, str]:
    """Every token, given what a `cache.get_many(KEYS + ...)` already returned (one round trip
    when all exist); missing ones are created."""
    return {key: found.get(key) or version(key) for key in KEYS}


def data_version() -> str:
    return version(DATA_KEY)


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
    transaction.on_commit(_bump_data)


def values_changed() -> None:
    """New snapshots: invalidate the pages that show values over time, once this commits."""
    transaction.on_commit(_bump_values)


def scores_changed() -> None:
    """A new score run (or lineup change): invalidate the leaderboard API and every page."""
    transaction.on_commit(_bump_scores)


def memo(name: str, compute, tokens: tuple[str, ...] = (DATA_KEY,), ttl: int = 3600):
    """`compute()`, kept in the cache until one of `tokens` is replaced: for what only changes
    with the writes those tokens cover (e.g. chart annotations change with data writes, never
    with a snapshot tick). One round trip when it is there: the tokens and the value come back
    in one get_many. The tokens are read before computing, so a value is never stored under
    tokens newer than the data it was computed from."""
    key = f"arena:memo:{name}"
    found = cache.get_many([*tokens, key])
    current = tuple(found.get(k) or version(k) for k in tokens)
    stored = found.get(key)
    if stored is not None and stored[0] == current:
        return stored[1]
    value = compute()
    cache.set(key, (current, value), ttl)
    return value
