"""Whole-page caching for anonymous readers, invalidated by data versions.

What is cached: complete responses to anonymous GET/HEAD requests for the public pages and the
JSON API that declare what they read with `@page(...)` (never /admin/, /exports/, /healthz,
static files, staff sessions or responses that set a cookie).

The key is built only from what the page reads: its path, the query parameters it declares
(normalised: `?range=1w` and `?range=1W` are one page) and, for pages with an htmx partial,
whether the request asks for it. The view itself only sees the declared parameters, so the key
cannot miss one it reads, and anything else (`?utm_source=...`, cache busters) neither makes a
new entry nor forces a render. A declared parameter with a value its normaliser rejects is
passed to the view uncached (the view answers it; it never becomes an entry).

How it is invalidated: every write that changes what a page shows replaces, once its transaction
commits, one of the version tokens of core/versions.py (data, values, scores). A page depends on
some of them (`depends=`) and is stored with the tokens it was rendered under; a reader takes
the tokens *before* it renders, so a page is stored under tokens at least as old as the data in
it, and it is served only while those are still the current ones. A snapshot tick replaces only
the values token, so pages that show no portfolio values stay cached through it; the
leaderboard API depends on the scores token alone.

A hit is one round trip: the tokens and the page come back in one `get_many` (MGET on Redis).

Stampedes: when a token changes, one request per page renders it; requests that arrive while
that render is in flight get the page's previous version instead of piling on (stale by at most
the render time, bounded by RENDER_LOCK_SECONDS if the renderer dies). PAGE_TTL is only a
backstop for a write path that forgot to replace a token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse, QueryDict
from django.urls import Resolver404, resolve

from core.versions import DATA_KEY, KEYS, SCORES_KEY, VALUES_KEY, pinned, scores_changed, versions

PAGE_TTL = 120
RENDER_LOCK_SECONDS = 5
EXCLUDED_PREFIXES = ("/admin/", "/exports/", "/healthz", "/static/")
TOKENS = {"data": DATA_KEY, "values": VALUES_KEY, "scores": SCORES_KEY}

Normaliser = Callable[[str | None], str | None]


Depends = tuple[str, ...] | Callable[[object], tuple[str, ...]]


@dataclass(frozen=True)
class PageSpec:
    params: tuple[tuple[str, Normaliser | None], ...]
    depends: Depends  # token names, or a function of the request returning them
    htmx_target: str | None

    def version_keys(self, request) -> tuple[str, ...]:
        names = self.depends(request) if callable(self.depends) else self.depends
        return tuple(TOKENS[name] for name in names)


def page(
    params: tuple[str, ...] | dict[str, Normaliser | None] = (),
    depends: Depends = ("data", "values"),
    htmx_target: str | None = None,
):
    """Declare a view cacheable: the query parameters it reads (each with an optional
    normaliser returning the canonical value, None for "absent", or raising ValueError for a
    value it rejects), the version tokens its content depends on ("data", "values", "scores",
    or a function of the request naming them), and the HX-Target of its htmx partial, if any."""
    if not isinstance(params, dict):
        params = dict.fromkeys(params)
    if not callable(depends):
        unknown = set(depends) - set(TOKENS)
        assert not unknown, f"unknown version tokens {unknown}"
    spec = PageSpec(params=tuple(sorted(params.items())), depends=depends, htmx_target=htmx_target)

    def mark(view):
        view.page_spec = spec
        return view

    return mark


# --- normalisers for `@page(params)` ---------------------------------------------------------
# Each returns the canonical text of a value (two spellings of one page give one key), None when
# the parameter is absent or empty, and raises ValueError for a value the page does not accept:
# such a request is answered by the view, uncached, and never becomes an entry.


def key_choice(values: Iterable[str], *, upper: bool = False) -> Normaliser:
    """One of `values` (compared upper-cased with upper=True)."""
    allowed = frozenset(values)

    def normalise(raw: str | None) -> str | None:
        if raw in (None, ""):
            return None
        value = raw.upper() if upper else raw
        if value not in allowed:
            raise ValueError(f"not one of {sorted(allowed)}")
        return value

    return normalise


def key_int(lo: int, hi: int) -> Normaliser:
    """A whole number in [lo, hi]; anything else is the view's to answer (never clamped here,
    so a cached page is always the one the view would render)."""

    def normalise(raw: str | None) -> str | None:
        if raw in (None, ""):
            return None
        value = int(raw)
        if not lo <= value <= hi:
            raise ValueError(f"not in [{lo}, {hi}]")
        return str(value)

    return normalise


def key_text(limit: int = 200) -> Normaliser:
    """Free text (a search): kept as typed, since the page shows it back, bounded in length."""

    def normalise(raw: str | None) -> str | None:
        if raw in (None, ""):
            return None
        if len(raw) > limit:
            raise ValueError("too long")
        return raw

    return normalise


def _spec(request) -> PageSpec | None:
    if request.path.startswith(EXCLUDED_PREFIXES):
        return None
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return getattr(match.func, "page_spec", None)


def _only_declared(request, spec: PageSpec) -> None:
    # The view sees exactly the parameters the key is made of.
    if request.GET:
        kept = QueryDict(mutable=True)
        for name, _ in spec.params:
            if name in request.GET:
                kept.setlist(name, request.GET.getlist(name))
        kept._mutable = False
        request.GET = kept


def _page_id(request, spec: PageSpec) -> str | None:
    """The canonical id of the page asked for, or None when a parameter value is rejected."""
    parts = []
    for name, normalise in spec.params:
        raw = request.GET.get(name)
        if normalise is not None:
            try:
                raw = normalise(raw)
            except (ValueError, TypeError):
                return None
        if raw not in (None, ""):
            parts.append(f"{name}={quote(raw, safe='')}")
    partial = ""
    htmx = request.headers.get("HX-Request") == "true"
    if (
        htmx
        and spec.htmx_target is not None
        and request.headers.get("HX-Target") == spec.htmx_target
    ):
        partial = ":partial"
    return f"{request.method}:{request.path}?{'&'.join(parts)}{partial}"


def render_lock(tokens: tuple[str, ...], page_id: str) -> str:
    """Held by the one request rendering this version of the page."""
    return f"arena:render:{':'.join(tokens)}:{page_id}"


def _anonymous(request) -> bool:
    # Staff (anyone with a session) always see fresh pages.
    return settings.SESSION_COOKIE_NAME not in request.COOKIES


def _cacheable_response(response) -> bool:
    if response.status_code != 200 or response.streaming or response.cookies:
        return False
    control = response.get("Cache-Control", "")
    return "no-store" not in control and "private" not in control


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
            response = self.get_response(request)
            if request.method != "OPTIONS":
                # Any write through the site (staff in the admin: resolutions, lineup) may
                # change public pages and the leaderboard.
                scores_changed()
            return response
        spec = _spec(request)
        if spec is None:
            return self.get_response(request)
        page_id = _page_id(request, spec)
        _only_declared(request, spec)
        if page_id is None or not settings.ARENA_PAGE_CACHE or not _anonymous(request):
            # Rendered: the values it keeps per version (core.versions.memo) read each token
            # once, with the first of them.
            with pinned():
                return self.get_response(request)
        key = f"arena:page:{page_id}"
        found = cache.get_many([*KEYS, key])
        with pinned():
            tokens = versions(found)
            current = tuple(tokens[k] for k in spec.version_keys(request))
            stored = found.get(key)
            if stored is not None and stored[0] == current:
                return _respond(stored[1], "hit")
            if stored is not None and not cache.add(
                render_lock(current, page_id), 1, RENDER_LOCK_SECONDS
            ):
                return _respond(stored[1], "stale")
            response = self.get_response(request)
        if _cacheable_response(response):
            content = (response.status_code, list(response.items()), response.content)
            cache.set(key, (current, content), PAGE_TTL)
        response["X-Cache"] = "miss"
        return response
