"""Query parameters of the public pages and the API: parsed strictly, refused in one line.

A value that does not mean what the parameter takes (`limit=abc`, `limit=-1`, `range=5Y`, a NUL
byte in `q`) answers 400 with one line saying what is accepted, never a silent default that
shows the reader something they did not ask for. An absent or empty parameter takes its
documented default. Unknown parameter names are ignored (links carry tracking tags).

A page declares the parameters it reads once (`Param`, through web/cache.py `@page`); they are
parsed once per request, before the page cache is asked, and handed to the view as keyword
arguments. A refused value raises BadParameter, answered as the 400: under /api/ through
web/api_errors.json_error (the one shape of an API error), plain text elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse

from web.api_errors import API_PREFIX, json_error

MAX_TEXT = 200
WHOLE = re.compile(r"[+-]?[0-9]{1,18}")  # ASCII digits only; int() would take "٣"


class BadParameter(ValueError):
    """A query parameter the view cannot honour; the message is one line for the client."""


def as_given(value: str | None) -> str | None:
    return None if value is None or value == "" else value


# Each parser takes the parameter's name and its raw value (None: absent or empty).


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


@dataclass(frozen=True)
class Param:
    """A query parameter a page declares (web/cache.py `@page`): `read(name, raw)` turns its raw
    text (None: absent or empty) into the value the view receives, `default` when absent, or
    raises BadParameter. The view takes it as the keyword `arg` (default: the parameter's name,
    for names that are Python keywords or builtins, e.g. `dir`, `range`)."""

    read: Callable[[str, str | None], Any]
    default: Any = None
    arg: str | None = None

    def key(self, value: Any) -> str | None:
        """The value's text in a page-cache key; None for the default (one page either way)."""
        if value is None or value == "" or value == self.default:
            return None
        return str(value)


def integer(lo: int, hi: int, default: int | None = None, *, arg: str | None = None) -> Param:
    """A whole number in [lo, hi] (never clamped: a cached page is the one the view renders)."""
    return Param(lambda name, raw: parse_integer(name, raw, default, lo, hi), default, arg)


def choice(
    choices: Iterable[str], default: str = "", *, fold_case=False, arg: str | None = None
) -> Param:
    """One of `choices` (compared upper-cased with fold_case=True); `default` when absent."""
    options = tuple(choices)
    return Param(
        lambda name, raw: parse_choice(name, raw, options, default, fold_case=fold_case),
        default,
        arg,
    )


def text(max_length: int = MAX_TEXT, *, arg: str | None = None) -> Param:
    """Free text (a search), kept as typed, since the page shows it back; "" when absent."""
    return Param(lambda name, raw: parse_text(name, raw, max_length), "", arg)


# Upper-case ASCII letters to lower case, nothing else: both engines match ASCII letters without
# regard to case (SQLite's LIKE only those, PostgreSQL's UPPER() every script).
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def parse_search(name: str, raw: str | None, max_length: int = MAX_TEXT) -> str:
    """A search as it matches: runs of whitespace are one space (none at the ends) and ASCII
    letters lower case, so every spelling of one search is one cached page, not one each."""
    return " ".join(parse_text(name, raw, max_length).split()).translate(ASCII_LOWER)


def search(max_length: int = MAX_TEXT, *, arg: str | None = None) -> Param:
    """A case-insensitive search over stored text, normalised as it matches (parse_search):
    the page shows the normalised form back."""
    return Param(lambda name, raw: parse_search(name, raw, max_length), "", arg)


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
