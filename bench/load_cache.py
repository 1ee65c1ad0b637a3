"""EXPERIMENT for the load test, not wired into the site: a versioned full-response cache.

    LOAD_CACHE=1 bench/load.sh        # gunicorn runs with bench/load_settings.py

What it measures is the recommendation in the load report: public pages and API responses are
cached whole, keyed by a *data version* that every writer bumps after its transaction commits
(here only bench/load_tick.py bumps it, after each snapshot tick). Why that is correct: a request
reads the version before it renders, so anything it stores under version v was rendered after
every write whose bump produced v had committed; a write that commits later bumps to v+1, and no
request looks under v again. A stale page can therefore never outlive the bump of the write that
changed it — e.g. a settlement followed by its rescore.

Two versions, so a write invalidates only what it can change: `scores` (bumped when a score run
finishes; keys /api/leaderboard, which reads only the latest run) and `data` (every other write:
snapshot ticks, settlements, decisions, syncs, staff edits; keys every other page).

Only anonymous GETs of public paths are cached (no session cookie; a response that sets a cookie
is not stored); the key includes the query string and the htmx headers. Bodies live in the shared
Redis cache (one render per version for the whole cluster) and in each process's memory; on a
miss one request renders (cache.add is the lock) while the others wait briefly for its body
rather than all rendering the same page at once after a bump.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

SKIP_PREFIXES = ("/admin", "/exports", "/healthz", "/static")
SCORE_PATHS = ("/api/leaderboard",)
MAX_ENTRIES = 1000
BODY_TTL = 600  # a safety net only: correctness comes from the version in the key
WAIT_FOR_RENDER = 2.0  # seconds a request waits for another's render before doing its own


def version_key(area: str) -> str:
    return f"arena:version:{area}"


def current_version(area: str) -> int:
    return cache.get(version_key(area)) or 0


def bump_version(area: str = "data") -> None:
    """What writers would call in transaction.on_commit()."""
    try:
        cache.incr(version_key(area))
    except ValueError:  # not set yet
        cache.add(version_key(area), 1, timeout=None) or cache.incr(version_key(area))


class VersionedPageCache:
    def __init__(self, get_response):
        self.get_response = get_response
        self.local: OrderedDict[tuple, tuple[int, list, bytes]] = OrderedDict()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not self._cacheable_request(request):
            return self.get_response(request)
        area = "scores" if request.path.startswith(SCORE_PATHS) else "data"
        key = "page:{}:{}:{}:{}:{}".format(
            area,
            current_version(area),
            request.get_full_path(),
            request.headers.get("HX-Request", ""),
            request.headers.get("HX-Target", ""),
        )
        hit = self.local.get(key) or self._shared(key)
        if hit is not None:
            return self._replay(key, hit)
        response = self.get_response(request)
        if self._cacheable_response(response):
            stored = (response.status_code, list(response.items()), response.content)
            cache.set(key, stored, BODY_TTL)
            self._remember(key, stored)
        return response

    def _shared(self, key: str):
        """The body from Redis; if absent and someone else is rendering it, wait for theirs."""
        stored = cache.get(key)
        if stored is not None or cache.add(f"lock:{key}", 1, timeout=int(WAIT_FOR_RENDER) + 1):
            return stored  # a hit, or a miss that is ours to render
        deadline = time.monotonic() + WAIT_FOR_RENDER
        while time.monotonic() < deadline:
            time.sleep(0.005)
            stored = cache.get(key)
            if stored is not None:
                return stored
        return None  # the other render is slow or failed: render ourselves

    def _remember(self, key: str, stored: tuple) -> None:
        self.local[key] = stored
        if len(self.local) > MAX_ENTRIES:
            self.local.popitem(last=False)

    def _replay(self, key: str, stored: tuple) -> HttpResponse:
        self._remember(key, stored)
        status, headers, body = stored
        response = HttpResponse(body, status=status)
        for name, value in headers:
            response[name] = value
        return response

    @staticmethod
    def _cacheable_request(request: HttpRequest) -> bool:
        return (
            request.method in ("GET", "HEAD")
            and "sessionid" not in request.COOKIES
            and not request.path.startswith(SKIP_PREFIXES)
        )

    @staticmethod
    def _cacheable_response(response: HttpResponse) -> bool:
        # templates/base.html puts a CSRF token on every page (hx-headers), so every page sets
        # the csrftoken cookie and varies on Cookie. Public pages only GET, so the report
        # recommends dropping that token for anonymous visitors; this experiment assumes it is
        # gone (stored copies carry no Set-Cookie). Any other cookie makes a page uncacheable.
        return (
            response.status_code == 200
            and not response.streaming
            and set(response.cookies) <= {"csrftoken"}
        )
