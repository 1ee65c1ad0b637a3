"""Data version tokens: the ground truth of "has anything a reader sees changed?".

Every write that changes what a public page shows calls `data_changed()` (or `scores_changed()`
for a new score run), which - once the transaction commits - replaces a version token. The page
cache (arena/cache.py) keys its entries on these tokens, and chart data caches do the same. Random
tokens (not counters) mean two concurrent bumps can't collapse into one. This module lives in the
ground package because every app's write path calls it while the cache itself belongs to the site.
"""

import uuid

from django.core.cache import cache
from django.db import transaction

DATA_KEY = "arena:data-version"
SCORES_KEY = "arena:scores-version"


def version(key: str) -> str:
    """The current token under `key`, creating one on first use."""
    token = cache.get(key)
    if token is None:
        cache.add(key, uuid.uuid4().hex, None)
        token = cache.get(key)
    return token


def data_version() -> str:
    return version(DATA_KEY)


def scores_version() -> str:
    return version(SCORES_KEY)


def _bump_data() -> None:
    cache.set(DATA_KEY, uuid.uuid4().hex, None)


def _bump_scores() -> None:
    cache.set_many({DATA_KEY: uuid.uuid4().hex, SCORES_KEY: uuid.uuid4().hex}, None)


def data_changed() -> None:
    """Invalidate cached pages once the current transaction commits (now, outside one)."""
    transaction.on_commit(_bump_data)


def scores_changed() -> None:
    """A new score run (or lineup change): invalidate the leaderboard API and every page."""
    transaction.on_commit(_bump_scores)
