"""Real-process fixtures shared with the fault tests (a private redis-server, polling)."""

import pytest
from django.core.cache import cache

from tests.faults.conftest import redis_server  # noqa: F401


@pytest.fixture
def page_cache(settings):
    """The page cache on (tests/conftest.py turns it off for the suite), starting empty."""
    settings.ARENA_PAGE_CACHE = True
    cache.clear()
