"""Whole-page caching for anonymous readers, invalidated by data versions.

What is cached: complete responses to anonymous GET/HEAD requests for the public pages and the
JSON API that declare what they read with `@page(...)` (never /admin/, /exports/, /healthz,
static files, staff sessions or responses that set a cookie).

The key is built only from what the page reads: its path, the query parameters it declares
(normalised: `?range=1w` and `?range=1W` are one page) and, for pages with an htmx partial,
whether the request asks for it, decided once (`wants_partial`) for the key and the view alike.
Both answers carry `Vary` on the htmx headers, and a partial is sent `no-store`, so no browser
or proxy serves one for the other. The view itself only sees the declared parameters, so the key
cannot miss one it reads, and anything else (`?utm_source=...`, cache busters) neither makes a
new entry nor forces a render.

How it is invalidated: every write that changes what a page shows replaces, once its transaction
commits, one of the version tokens of core/versions.py (data, values, scores). A page depends on
some of them (`depends=`) and is stored with the tokens it was rendered under; a reader takes
the tokens *before* it renders, so a page is stored under tokens at least as old as the data in
it, and it is served only while those are still the current ones. A snapshot tick replaces only
the values token, so pages that show no portfolio values stay cached through it; the
leaderboard API depends on the scores token alone.

A hit is one round trip: the page and the tokens it depends on come back in one `get_many` (MGET
on Redis; on the file cache, one file each).

Stampedes: when a token changes, one request per page renders it; requests that arrive while
that render is in flight get the page's previous version instead of piling on (stale by at most
the render time, bounded by RENDER_LOCK_SECONDS if the renderer dies). For the hot pages a
write in a worker takes that lock for the worker's own render (`reserve`, web/prerender.py), so
a visitor renders one only in the moment between the write and its reservation, or after a write
made in a web process (docs/performance.md, "Hot pages over a rehearsal"). PAGE_TTL is only a
backstop for a write path that forgot to replace a token. A request that writes through the site
(the admin) invalidates everything only once a write of it has committed; a refused one (no
permission, no CSRF token, an anonymous POST) writes nothing, so it cannot empty the cache.

A session cookie bypasses the cache only when it names a live session (signed-in staff); any
other `sessionid` costs one session lookup, gets the cached page and is cleared.

The declared parameters are parsed here, once (web/params.py), and handed to the view as
keyword arguments: a value the page refuses is answered with its one-line 400, cache on or off,
and never cached.

When the cache is unreachable (arena/cache_backend.py) the tokens are None and pages are
rendered uncached.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.http import HttpResponse, QueryDict
from django.urls import Resolver404, get_urlconf, resolve
from django.utils.cache import patch_cache_control, patch_vary_headers
from django_htmx.middleware import HtmxDetails

from core.versions import DATA_KEY, SCORES_KEY, VALUES_KEY, scores_changed, versions
from web.params import BadParameter, Param, bad_request

__all__ = [
    "DATA_KEY",
    "PublicPageCacheMiddleware",
    "is_partial",
    "page",
    "render_lock",
    "wants_partial",
]

PAGE_TTL = 120
RENDER_LOCK_SECONDS = 5
SESSION_KEY_CHARS = 40
DEAD_SESSION_SECONDS = 3600  # a key Django never reissues: remembering it dead is safe
REMEMBERED_PATH_LENGTH = 100  # longer paths are resolved on each request, never kept
EXCLUDED_PREFIXES = ("/admin/", "/exports/", "/healthz", "/static/")
TOKENS = {"data": DATA_KEY, "values": VALUES_KEY, "scores": SCORES_KEY}
# The request headers that choose between a page and its htmx partial: a browser or proxy
# cache must keep the two apart (Back after an hx-push-url must never show the bare partial).
PARTIAL_VARY = ("HX-Request", "HX-Target", "HX-History-Restore-Request")

Values = Mapping[str, Any]  # a page's parsed parameters, by parameter name
Depends = tuple[str, ...] | Callable[[Values], tuple[str, ...]]


@dataclass(frozen=True)
class PageSpec:
    params: tuple[tuple[str, Param], ...]
    depends: Depends  # token names, or a function of the parsed parameters naming them
    htmx_target: str | None

    def read(self, request) -> dict[str, Any]:
        """Every declared parameter, parsed; raises BadParameter for a value the page refuses."""
        return {name: spec.read(name, request.GET.get(name)) for name, spec in self.params}

    def arguments(self, values: Values) -> dict[str, Any]:
        """The view's keyword arguments."""
        return {spec.arg or name: values[name] for name, spec in self.params}

    def version_keys(self, values: Values) -> tuple[str, ...]:
        names = self.depends(values) if callable(self.depends) else self.depends
        return tuple(TOKENS[name] for name in names)


def page(
    params: Mapping[str, Param] | None = None,
    depends: Depends = ("data", "values"),
    htmx_target: str | None = None,
):
    """Declare a view cacheable: the query parameters it reads (web/params.py `Param`: how each
    is parsed, its default, the view's keyword for it), the version tokens its content depends
    on ("data", "values", "scores", or a function of the parsed parameters naming them), and
    the HX-Target of its htmx partial, if any.

    The parameters are parsed once per request (by the middleware, which keys the page on
    them) and handed to the view as keyword arguments; a view called without the middleware
    parses them here."""
    if not callable(depends):
        unknown = set(depends) - set(TOKENS)
        assert not unknown, f"unknown version tokens {unknown}"
    spec = PageSpec(
        params=tuple(sorted((params or {}).items())), depends=depends, htmx_target=htmx_target
    )

    def mark(view):
        @functools.wraps(view)
        def parsed(request, *args, **kwargs):
            held = getattr(request, "page_values", None)
            values = held[1] if held is not None and held[0] is spec else spec.read(request)
            request.page_partial = wants_partial(request, spec.htmx_target)
            response = view(request, *args, **kwargs, **spec.arguments(values))
            if spec.htmx_target is not None:
                patch_vary_headers(response, PARTIAL_VARY)
            return response

        parsed.page_spec = spec  # type: ignore[attr-defined]
        return parsed

    return mark


def wants_partial(request, target: str | None) -> bool:
    """Whether this request asks for the page's htmx partial (the element `target`): the one
    answer both the cache key and the view use. Headers are read as django-htmx reads them
    (URL-decoded under `HX-Request-URI-AutoEncoded: true`), so `HX-Request: %74rue` is a
    partial request for both, never a partial stored under the full page's key. A history
    restore (htmx re-fetching a page it has no snapshot of) needs the whole page."""
    if target is None or "HTTP_HX_REQUEST" not in request.META:
        return False  # no HX-Request header at all: not an htmx request, whatever it encodes
    htmx = HtmxDetails(request)
    return bool(htmx) and not htmx.history_restore_request and htmx.target == target


def is_partial(request) -> bool:
    """For a view under `@page`: render the htmx partial rather than the whole page."""
    return bool(getattr(request, "page_partial", False))


def _spec(request) -> PageSpec | None:
    if request.path.startswith(EXCLUDED_PREFIXES):
        return None
    path = request.path_info
    if len(path) > REMEMBERED_PATH_LENGTH:
        return _resolve_spec(get_urlconf(), path)
    return _spec_of(get_urlconf(), path)


def _resolve_spec(urlconf: str | None, path: str) -> PageSpec | None:
    """The page declaration of the view at `path` under the URL map `urlconf`."""
    try:
        match = resolve(path, urlconf)
    except Resolver404:
        return None
    return getattr(match.func, "page_spec", None)


# Remembered per URL map and path: resolving walks the URL patterns, a fifth of a page-cache
# hit's own work, and the answer depends on nothing else (the URL map is fixed while a process
# runs; a test that swaps it is another key). The bound and the length limit keep a crawler's
# distinct or very long paths from growing it past a few hundred kilobytes.
_spec_of = functools.lru_cache(maxsize=4096)(_resolve_spec)


def _only_declared(request, spec: PageSpec) -> None:
    # The view sees exactly the parameters the key is made of.
    if request.GET:
        kept = QueryDict(mutable=True)
        for name, _ in spec.params:
            if name in request.GET:
                kept.setlist(name, request.GET.getlist(name))
        kept._mutable = False
        request.GET = kept


def _page_id(request, spec: PageSpec, values: Values, partial: bool) -> str:
    """The canonical id of the page asked for: its path, each declared parameter that is not
    at its default (as parsed: `?range=1w` and `?range=1W` are one page) and whether the htmx
    partial was asked for."""
    parts = []
    for name, param in spec.params:
        text = param.key(values[name])
        if text is not None:
            parts.append(f"{name}={quote(text, safe='')}")
    kind = ":partial" if partial else ""
    return f"{request.method}:{request.path}?{'&'.join(parts)}{kind}"


def render_lock(tokens: tuple[str, ...], page_id: str) -> str:
    """Held by the one request rendering this version of the page."""
    return f"arena:render:{':'.join(tokens)}:{page_id}"


# Set in the environ of web/prerender.py's requests: the worker's render of a page it reserved.
PRERENDER = "arena.prerender"


def reserve(request, upcoming: Mapping[str, str] | None = None) -> bool:
    """Take this page's render lock on behalf of the worker's round (web/prerender.py), for the
    tokens a write is about to publish (`upcoming`, each key's new token; the others as they
    are): a visitor arriving before the round gets the previous version ("stale"), as while any
    render is in flight, instead of rendering the page itself. If no round comes, the lock lapses
    after RENDER_LOCK_SECONDS and visitors render as before. False when the page is not cached
    or the cache is unreachable."""
    spec = _spec(request)
    if spec is None or not settings.ARENA_PAGE_CACHE:
        return False
    try:
        values = spec.read(request)
    except BadParameter:
        return False
    depends = spec.version_keys(values)
    current = versions({**cache.get_many(list(depends)), **(upcoming or {})}, depends)
    if None in current:
        return False
    page_id = _page_id(request, spec, values, partial=False)
    return bool(cache.add(render_lock(current, page_id), 1, RENDER_LOCK_SECONDS))


def _session_state(request) -> str:
    """"none", "live" or "dead". Staff (anyone with a live session) always see fresh pages; a
    cookie naming no live session (junk, expired, logged out) is read like no cookie: one
    session lookup the first time, a cache read after (a dead key is remembered), never a
    render of every page."""
    key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if key is None:
        return "none"
    if len(key) > SESSION_KEY_CHARS:  # Django's keys are 32 characters
        return "dead"
    dead = f"arena:dead-session:{key}"
    if cache.get(dead) is not None:
        return "dead"
    store = import_module(settings.SESSION_ENGINE).SessionStore
    try:
        live = bool(store(key).load())
    except DatabaseError:  # cannot tell: the visitor may be staff, so no cached page
        return "live"
    if not live:
        cache.set(dead, 1, DEAD_SESSION_SECONDS)
    return "live" if live else "dead"


def _forget_session(response):
    response.delete_cookie(
        settings.SESSION_COOKIE_NAME,
        path=settings.SESSION_COOKIE_PATH,
        domain=settings.SESSION_COOKIE_DOMAIN,
        samesite=settings.SESSION_COOKIE_SAMESITE,
    )
    return response


_READS = ("select", "savepoint", "release", "rollback", "begin", "set ", "show ", "pragma")
# Sessions, login attempts and accounts (a sign-in writes last_login): no page shows them.
_BOOKKEEPING = ("django_session", "axes_", "auth_")


class _WriteWatch:
    """Records, through the database connection, whether this request committed a write that
    could change a page: the admin writes pages' rows, a refused request (403, a missing CSRF
    token, a form with errors) writes none, and only the first may move the cache."""

    def __init__(self) -> None:
        self.committed = False

    def __call__(self, execute, sql, params, many, context):
        text = sql.lstrip().lower() if isinstance(sql, str) else ""
        if text and not text.startswith(_READS) and not any(t in text for t in _BOOKKEEPING):
            alias = context["connection"].alias
            transaction.on_commit(self._commit, using=alias)
        return execute(sql, params, many, context)

    def _commit(self) -> None:
        self.committed = True


def _cacheable_response(response) -> bool:
    if response.status_code != 200 or response.streaming or response.cookies:
        return False
    control = response.get("Cache-Control", "")
    return "no-store" not in control and "private" not in control


def _for_browser(response, partial: bool):
    # A fragment is never worth keeping in a browser: Chromium's Back reuses a cached response
    # whatever its max-age, and a bare partial there is a page without header or CSS.
    if partial:
        patch_cache_control(response, no_store=True)
    return response


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
        if request.method not in ("GET", "HEAD"):
            # A write through the admin (resolutions, lineup) may change public pages and the
            # leaderboard, so a committed one moves every token. A refused request changes
            # nothing and must not cost every reader the cache (a POST loop would empty it).
            watch = _WriteWatch()
            with connection.execute_wrapper(watch):
                response = self.get_response(request)
            if watch.committed:
                scores_changed()
            return response
        spec = _spec(request)
        if spec is None:
            return self.get_response(request)
        # The host check CommonMiddleware makes further in: a cached page is no exception, so
        # a disallowed Host is the same 400 (DisallowedHost) whether the page is cached or not.
        request.get_host()
        try:
            values = spec.read(request)
        except BadParameter as exc:
            return bad_request(request, str(exc))
        request.page_values = (spec, values)  # handed to the view by @page, not parsed again
        partial = wants_partial(request, spec.htmx_target)
        page_id = _page_id(request, spec, values, partial)
        _only_declared(request, spec)
        if not settings.ARENA_PAGE_CACHE:
            return _for_browser(self.get_response(request), partial)
        session = _session_state(request)
        if session == "live":
            return _for_browser(self.get_response(request), partial)
        response = self._cached(request, spec, values, page_id, partial)
        return _forget_session(response) if session == "dead" else response

    def _cached(self, request, spec: PageSpec, values: Values, page_id: str, partial: bool):
        key = f"arena:page:{page_id}"
        # Only the tokens this page depends on: on the file cache each is a file to read.
        depends = spec.version_keys(values)
        found = cache.get_many([*depends, key])
        # Read before rendering: the page is stored under tokens at least as old as its rows.
        current = versions(found, depends)
        if None in current:  # the cache is unreachable: render, uncached
            return _for_browser(self.get_response(request), partial)
        stored = found.get(key)
        if stored is not None and stored[0] == current:
            return _for_browser(_respond(stored[1], "hit"), partial)
        lock = render_lock(current, page_id)
        # "Not added" is also what a cache that cannot write says (a full disk): the previous
        # version is served only while another request really holds the lock.
        # The worker's round renders the pages it reserved (reserve) whoever holds the lock.
        if (
            stored is not None
            and not request.META.get(PRERENDER)
            and not cache.add(lock, 1, RENDER_LOCK_SECONDS)
            and cache.has_key(lock)
        ):
            return _for_browser(_respond(stored[1], "stale"), partial)
        response = self.get_response(request)
        if _cacheable_response(response):
            content = (response.status_code, list(response.items()), response.content)
            cache.set(key, (current, content), PAGE_TTL)
        response["X-Cache"] = "miss"
        return _for_browser(response, partial)
