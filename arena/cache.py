"""Whole-page caching for anonymous readers, invalidated by data versions.

What is cached: complete responses to anonymous GET/HEAD requests for public pages and the JSON
API (never /admin/, /exports/, /healthz, static files, staff sessions or responses that set a
cookie).

How it is invalidated: every write that changes what a page shows calls `data_changed()` (or
`scores_changed()` for a new score run), which - once the transaction commits - replaces a version
token that the cache keys contain. A reader takes the token *before* it renders, so a page is
stored under a token at least as old as the data in it, and nobody reads under that token once a
newer write has committed. Random tokens (not counters) mean two concurrent bumps can't collapse
into one. Two tokens: `/api/leaderboard?scope=` shows only the latest score run, so it keys on
the scores token alone and a snapshot tick every 10 minutes doesn't throw it away; everything else
keys on the data token, which every write (score runs included) replaces.

Stampedes: when a token changes, one request per page renders it; requests that arrive while
that render is in flight get the page's previous version instead of piling on (stale by at most
the render time, bounded by RENDER_LOCK_SECONDS if the renderer dies). PAGE_TTL is only a
backstop for a write path that forgot to call data_changed(). Requests that write through the
site invalidate everything only when they come from signed-in staff (the admin); anonymous
POSTs cannot write anything, so they cannot empty the cache either.

When the cache is unreachable (arena/cache_backend.py) the version token is None and pages are
rendered uncached.
"""

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse

from core.versions import DATA_KEY, SCORES_KEY, scores_changed
from core.versions import version as _version

PAGE_TTL = 120
RENDER_LOCK_SECONDS = 5
EXCLUDED_PREFIXES = ("/admin/", "/exports/", "/healthz", "/static/")
SCORES_ONLY_PREFIXES = ("/api/leaderboard",)


def _cacheable_request(request) -> bool:
    if not settings.ARENA_PAGE_CACHE or request.method not in ("GET", "HEAD"):
        return False
    if request.path.startswith(EXCLUDED_PREFIXES):
        return False
    # Staff (anyone with a session) always see fresh pages.
    return settings.SESSION_COOKIE_NAME not in request.COOKIES


def _staff_write(request) -> bool:
    if request.method in ("GET", "HEAD", "OPTIONS", "TRACE"):
        return False
    user = getattr(request, "user", None)  # set by AuthenticationMiddleware, inside us
    return bool(user is not None and user.is_authenticated and user.is_staff)


def _cacheable_response(response) -> bool:
    if response.status_code != 200 or response.streaming or response.cookies:
        return False
    control = response.get("Cache-Control", "")
    return "no-store" not in control and "private" not in control


def _page_id(request) -> str:
    return ":".join(
        [
            request.method,
            request.get_full_path(),
            request.headers.get("HX-Request", ""),
            request.headers.get("HX-Target", ""),
        ]
    )


def _respond(stored, state: str) -> HttpResponse:
    status, headers, content = stored
    response = HttpResponse(content, status=status)
    for name, value in headers:
        response[name] = value
    response["X-Cache"] = state
    return response


class PublicPageCacheMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not _cacheable_request(request):
            response = self.get_response(request)
            if _staff_write(request):
                # A staff write through the admin (resolutions, lineup) may change public
                # pages and the leaderboard. Anyone else's POST changes nothing, so it must not
                # cost every reader the cache (an anonymous POST loop used to empty it).
                scores_changed()
            return response
        page = _page_id(request)
        # Without scope or cohort the leaderboard API picks the scope that has cohorts, which a
        # new cohort can change before any score run: that answer keys on the data token.
        scores_only = request.path.startswith(SCORES_ONLY_PREFIXES) and bool(
            request.GET.get("scope") or request.GET.get("cohort")
        )
        token = _version(SCORES_KEY if scores_only else DATA_KEY)
        if token is None:  # the cache is unreachable: render, uncached
            return self.get_response(request)
        key = f"arena:page:{token}:{page}"
        stored = cache.get(key)
        if stored is not None:
            return _respond(stored, "hit")
        if not cache.add(f"arena:render:{key}", 1, RENDER_LOCK_SECONDS):
            previous = cache.get(f"arena:page-last:{page}")
            if previous is not None:
                return _respond(previous, "stale")
        response = self.get_response(request)
        if _cacheable_response(response):
            stored = (response.status_code, list(response.items()), response.content)
            cache.set_many({key: stored, f"arena:page-last:{page}": stored}, PAGE_TTL)
        response["X-Cache"] = "miss"
        return response
