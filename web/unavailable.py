"""A request whose database failed under it is answered 503, not 500.

A restart or `pg_terminate_backend` can cut a request's connection in the middle of its work
(a connection health check only catches one that died between requests), and SQLite can time
out on a lock. The request was fine and may simply be sent again: 503 with Retry-After says so
to a browser, a monitor and an outside agent alike (docs/enter-your-agent.md: retry a 5xx),
while 500 stays what it means, a bug of ours. Django calls `server_error` (arena.urls'
handler500) from inside its `except`, so the exception is at hand there; the middleware answers
a view's exception the same way when DEBUG is on.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.views import defaults

from web.api_errors import API_PREFIX, json_error

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5
MESSAGE = "the database is unavailable for a moment; send the request again"


def _unavailable(exc: BaseException | None) -> bool:
    """The database, not the request or our code: a connection that is gone, or a lock that
    timed out. Other operational errors (SQLite's "no such table" is one) stay 500s."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    if "locked" in str(exc):
        return True
    return any(c.connection is not None and not c.is_usable() for c in connections.all())


def _answer(request: HttpRequest, exc: BaseException) -> HttpResponse:
    log.warning("database unavailable during %s %s: %s", request.method, request.path,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__)  # fmt: skip
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if request.path.startswith(API_PREFIX):
        return json_error(MESSAGE, 503, headers=headers)
    # Rendered without a request, like the 500 page: nothing in it may need the database.
    body = loader.get_template("503.html").render()
    response = HttpResponse(body, status=503, headers=headers)
    response["Cache-Control"] = "no-store"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """arena.urls' handler500 (DEBUG off): whatever layer raised."""
    exc = sys.exc_info()[1]
    if exc is None or not _unavailable(exc):
        return defaults.server_error(request)
    return _answer(request, exc)


class DatabaseUnavailableMiddleware:
    """The same answer for a view's exception with DEBUG on too (Django's debug page replaces
    handler500 then): a development server or a rehearsal answers a cut connection as a
    deployment does."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        return _answer(request, exception) if _unavailable(exception) else None
