"""Whole-page caching for anonymous readers, invalidated by a data version.

What is cached: complete responses to anonymous GET/HEAD requests for public pages and the JSON
API (never /admin/, /exports/, /healthz, static files, staff sessions or responses that set a
cookie). How it is invalidated: every write that changes what a page shows calls
`data_changed()`, which - once the transaction commits - replaces the version token that every
cache key contains. A reader takes the token *before* it renders, so a page is stored under a
token that is at least as old as the data in it, and no reader uses that token once a newer
write has committed: a settlement, a new score run or a staff resolution change is visible on
the next request. A random token (not a counter) means two concurrent bumps can't collapse into
one. PAGE_TTL is only a backstop for a write path that forgot to call data_changed().
"""

import uuid

from django.core.cache import cache
from django.db import transaction
from django.http import HttpResponse

VERSION_KEY = "arena:data-version"
PAGE_TTL = 120
EXCLUDED_PREFIXES = ("/admin/", "/exports/", "/healthz", "/static/")


def data_version() -> str:
    token = cache.get(VERSION_KEY)
    if token is None:
        token = uuid.uuid4().hex
        cache.add(VERSION_KEY, token, None)
        token = cache.get(VERSION_KEY, token)
    return token


def _bump() -> None:
    cache.set(VERSION_KEY, uuid.uuid4().hex, None)


def data_changed() -> None:
    """Invalidate every cached page once the current transaction commits (now, outside one)."""
    transaction.on_commit(_bump)


def _cacheable_request(request) -> bool:
    from django.conf import settings

    if not settings.ARENA_PAGE_CACHE or request.method not in ("GET", "HEAD"):
        return False
    if request.path.startswith(EXCLUDED_PREFIXES):
        return False
    # Staff (anyone with a session) always see fresh pages.
    return settings.SESSION_COOKIE_NAME not in request.COOKIES


def _cacheable_response(response) -> bool:
    if response.status_code != 200 or response.streaming or response.cookies:
        return False
    control = response.get("Cache-Control", "")
    return "no-store" not in control and "private" not in control


class PublicPageCacheMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not _cacheable_request(request):
            response = self.get_response(request)
            if request.method not in ("GET", "HEAD", "OPTIONS"):
                # Any write through the site (staff in the admin) may change public pages.
                data_changed()
            return response
        key = ":".join(
            [
                "arena:page",
                data_version(),
                request.method,
                request.get_full_path(),
                request.headers.get("HX-Request", ""),
                request.headers.get("HX-Target", ""),
            ]
        )
        stored = cache.get(key)
        if stored is not None:
            status, headers, content = stored
            response = HttpResponse(content, status=status)
            for name, value in headers:
                response[name] = value
            response["X-Cache"] = "hit"
            return response
        response = self.get_response(request)
        if _cacheable_response(response):
            cache.set(
                key, (response.status_code, list(response.items()), response.content), PAGE_TTL
            )
        response["X-Cache"] = "miss"
        return response
