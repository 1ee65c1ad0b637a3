"""Query parameters of the public pages and the API: parsed strictly, refused in one line.

A value that does not mean what the parameter takes (`limit=abc`, `limit=-1`, `range=5Y`, a NUL
byte in `q`) answers 400 with one line saying what is accepted, never a silent default that
shows the reader something they did not ask for. An absent or empty parameter takes its
documented default. Unknown parameter names are ignored (links carry tracking tags).

Views raise BadParameter; BadParameterMiddleware turns it into the 400: under /api/ through
arena/api_errors.json_error (the one shape of an API error), plain text elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.http import HttpRequest, HttpResponse

from web.api_errors import API_PREFIX, json_error

MAX_TEXT = 200
WHOLE = re.compile(r"[+-]?[0-9]{1,18}")  # ASCII digits only; int() would take "٣"


class BadParameter(ValueError):
    """A query parameter the view cannot honour; the message is one line for the client."""


def _raw(request: HttpRequest, name: str) -> str | None:
    return as_given(request.GET.get(name))


def as_given(value: str | None) -> str | None:
    return None if value is None or value == "" else value


# Each parser takes the parameter's name and its raw value (None: absent or empty). The page
# cache (web/cache.py) runs the same ones on the query string before a view does, so a value
# is refused with the same message whether or not the page is cached.


def parse_integer(name: str, raw: str | None, default: int | None, lo: int, hi: int) -> int | None:
    raw = as_given(raw)
    if raw is None:
        return default
    value = int(raw) if WHOLE.fullmatch(raw) else None
    if value is None or not lo <= value <= hi:
        raise BadParameter(f"{name} must be a whole number from {lo} to {hi}")
    return value


def parse_choice(
    name: str, raw: str | None, choices: Iterable[str], default: str, *, fold_case=False
) -> str:
    raw = as_given(raw)
    if raw is None:
        return default
    options = list(choices)
    value = raw.upper() if fold_case else raw
    if value not in options:
        raise BadParameter(f"{name} must be one of {', '.join(options)}")
    return value


def parse_text(name: str, raw: str | None, max_length: int = MAX_TEXT) -> str:
    raw = as_given(raw) or ""
    if len(raw) > max_length:
        raise BadParameter(f"{name} must be at most {max_length} characters")
    # NUL cannot be stored or searched by PostgreSQL, and no question contains control chars.
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in raw):
        raise BadParameter(f"{name} must not contain control characters")
    return raw


def integer(request: HttpRequest, name: str, default: int | None, lo: int, hi: int) -> int | None:
    return parse_integer(name, _raw(request, name), default, lo, hi)


def choice(
    request: HttpRequest, name: str, choices: Iterable[str], default: str, *, fold_case=False
) -> str:
    return parse_choice(name, _raw(request, name), choices, default, fold_case=fold_case)


def text(request: HttpRequest, name: str, max_length: int = MAX_TEXT) -> str:
    return parse_text(name, _raw(request, name), max_length)


def bad_request(request: HttpRequest, message: str) -> HttpResponse:
    line = " ".join(message.split())
    if request.path.startswith(API_PREFIX):
        return json_error(line, 400)
    response = HttpResponse(line + "\n", status=400, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    return response


class BadParameterMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, BadParameter):
            return bad_request(request, str(exception))
        return None
