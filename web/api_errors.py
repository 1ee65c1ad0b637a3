"""Errors under /api/ are JSON: `{"error": "<one line>"}` with the matching HTTP status.

Three pieces, so no path can answer an API client with an HTML page:
- `json_error(message, status)` is what an API view returns for a request it refuses (400, 404).
- `@api_view` guards an endpoint's methods (read-only: GET, and HEAD for monitors and caches
  that only want the headers) with a JSON 405 that names the
  allowed ones; the endpoints take no cookies' authority, so CSRF does not apply to them.
- `ApiErrorMiddleware` covers what happens outside the views: an `Http404` raised inside one
  (`get_object_or_404`), an /api/ path that matches no URL, and any other non-JSON 4xx/5xx that
  Django itself builds for an /api/ path (its debug pages included).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

API_PREFIX = "/api/"
ALLOWED_METHODS = ("GET", "HEAD")
_DEFAULT_MESSAGES = {
    400: "bad request",
    403: "forbidden",
    404: "no such API endpoint: {path}",
    405: "method {method} not allowed; use {allowed}",
    500: "internal error",
}
# get_object_or_404's message, reworded to name what was asked for.
_NO_MATCH = re.compile(r"^No (\w+) matches the given query\.$")


def json_error(message: str, status: int, headers: dict[str, str] | None = None) -> JsonResponse:
    """The one shape of an API error. Not cached by clients: a fixed request may succeed later."""
    response = JsonResponse({"error": message}, status=status, headers=headers)
    response["Cache-Control"] = "no-store"
    return response


def api_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A read-only API endpoint: GET and HEAD, anything else is a JSON 405."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method not in ALLOWED_METHODS:
            return _method_not_allowed(request)
        return view(request, *args, **kwargs)

    return csrf_exempt(wrapped)


def _method_not_allowed(request: HttpRequest) -> JsonResponse:
    allowed = ", ".join(ALLOWED_METHODS)
    message = _DEFAULT_MESSAGES[405].format(method=request.method, allowed=allowed)
    return json_error(message, 405, headers={"Allow": allowed})


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


class ApiErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _is_api(request) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        status = response.status_code
        if status == 405:
            return _method_not_allowed(request)
        template = _DEFAULT_MESSAGES.get(status, "HTTP {status}")
        return json_error(template.format(path=request.path, status=status), status)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if not (_is_api(request) and isinstance(exception, Http404)):
            return None
        message = str(exception)
        no_match = _NO_MATCH.match(message)
        if no_match or not message:
            what = no_match.group(1).lower() if no_match else "resource"
            message = f"no {what} at {request.path}"
        return json_error(message, 404)
