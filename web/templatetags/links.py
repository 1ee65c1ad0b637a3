"""`{% href 'name' arg ... %}`: what `{% url %}` gives, without a reverse() per link.

A reverse() costs about as much as rendering a table row's other cells (tens of microseconds);
every page has ten in its header and footer, and a table of decisions, trades or forecasts one
or two a row. A route's URL is the same text around its arguments whatever they are, so the text
is reversed once per route (and URLconf and script prefix) and each link is that text joined
around its arguments. An argument is joined only where reverse() would accept it: digits in any
slot, a slug where the route takes one; anything else goes through reverse() as before (so an
argument a route refuses still raises NoReverseMatch).
"""

from __future__ import annotations

import functools
import re

from django import template
from django.conf import settings
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse

register = template.Library()

_DIGITS = re.compile(r"[0-9]+")
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")  # the <slug:...> converter's
_SENTINEL = "987654321"


@functools.lru_cache(maxsize=256)
def _route(
    name: str, n: int, urlconf: str, prefix: str
) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The route's URL text around its n arguments, and per argument whether a slug that is
    not all digits is accepted there (a <slug:> or <str:> slot, not an <int:> one).
    `urlconf` and `prefix` only key the cache: reverse() reads both itself."""
    parts = tuple(reverse(name, args=[_SENTINEL] * n).split(_SENTINEL))
    slugs = []
    for i in range(n):
        args = [_SENTINEL] * n
        args[i] = "x"
        try:
            reverse(name, args=args)
        except NoReverseMatch:
            slugs.append(False)
        else:
            slugs.append(True)
    return parts, tuple(slugs)


@register.simple_tag
def href(name: str, *args: object) -> str:
    texts = [str(a) for a in args]
    urlconf = get_urlconf() or settings.ROOT_URLCONF
    parts, slugs = _route(name, len(texts), str(urlconf), get_script_prefix())
    if len(parts) != len(texts) + 1 or not all(
        _DIGITS.fullmatch(t) or (slug and _SLUG.fullmatch(t)) for t, slug in zip(texts, slugs)
    ):
        return reverse(name, args=list(args))
    return parts[0] + "".join(t + part for t, part in zip(texts, parts[1:]))
