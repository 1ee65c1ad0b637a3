"""Data version tokens: the ground truth of "has anything a reader sees changed?".

Three tokens, each replaced (once the writing transaction commits) by the writes it covers:
- data: every write that changes what a public page shows (settlements, decisions, syncs,
  resolutions, staff changes, score runs) calls `data_changed()`;
- values: snapshot ticks (`values_changed()`): only the pages that show portfolio values over
  time (home, cohort, entry, competitor pages, their API) depend on it, so a tick every 10
  minutes leaves the market, decision and methodology pages cached;
- scores: a new score run (`scores_changed()`, which also replaces data): the leaderboard API
  shows nothing else.
The page cache (web/cache.py), the one read-side cache, keys its entries on the tokens a page
depends on. A token is replaced only after the commit, so a reader that takes the tokens before
it renders can never store a page under tokens newer than the rows it read. Random tokens (not
counters) mean two concurrent bumps can't collapse into one. This module lives in the ground
package because every app's write path calls it while the cache itself belongs to the site.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from django.core.cache import cache
from django.db import transaction
from django.dispatch import Signal

DATA_KEY = "arena:data-version"
VALUES_KEY = "arena:values-version"
SCORES_KEY = "arena:scores-version"
KEYS = (DATA_KEY, VALUES_KEY, SCORES_KEY)

# Sent just before tokens are replaced, with `tokens` (each key's new token): the site takes its
# hot pages' render locks under the new tokens first (web/prerender.py), so no visitor can read a
# new token before the worker's round has the page reserved.
replacing = Signal()
# Sent right after tokens were replaced (a write committed), with `keys`: the site renders its
# hot pages again under the new tokens (web/prerender.py), so visitors need not.
replaced = Signal()


def versions(found: Mapping[str, object], keys: tuple[str, ...] = KEYS) -> tuple[str | None, ...]:
    """The tokens `keys` (in that order), given what a `cache.get_many([*keys, ...])` already
    returned (one round trip when all exist); a missing one is created. None when the cache is
    unreachable."""
    return tuple(_token(found.get(key), key) for key in keys)


def _token(found: object, key: str) -> str | None:
    if isinstance(found, str):
        return found
    cache.add(key, uuid.uuid4().hex, None)
    token = cache.get(key)
    return token if isinstance(token, str) else None


def _replace(tokens: dict[str, str]) -> None:
    replacing.send(sender=None, tokens=tokens)
    cache.set_many(tokens, None)
    replaced.send(sender=None, keys=tuple(tokens))


def _bump_data() -> None:
    _replace({DATA_KEY: uuid.uuid4().hex})


def _bump_values() -> None:
    _replace({VALUES_KEY: uuid.uuid4().hex})


def _bump_scores() -> None:
    _replace({DATA_KEY: uuid.uuid4().hex, SCORES_KEY: uuid.uuid4().hex})


def _on_commit(bump: Callable[[], None]) -> None:
    # Outside a transaction on_commit runs at once; inside, only if the transaction commits.
    transaction.on_commit(bump)


def data_changed() -> None:
    """Invalidate cached pages once the current transaction commits (now, outside one)."""
    _on_commit(_bump_data)


def values_changed() -> None:
    """New snapshots: invalidate the pages that show values over time, once this commits."""
    _on_commit(_bump_values)


def scores_changed() -> None:
    """A new score run (or lineup change): invalidate the leaderboard API and every page."""
    _on_commit(_bump_scores)
