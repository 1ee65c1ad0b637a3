"""Formatting filters for the pages. Missing numbers render as an em dash, never as 'None'."""

from decimal import Decimal, InvalidOperation

from django import template

register = template.Library()
DASH = "—"


def _num(value):
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


@register.filter
def money(value) -> str:
    """$1,234.56 (negative as -$1,234.56)."""
    d = _num(value)
    if d is None:
        return DASH
    sign = "-" if d < 0 else ""
    return f"{sign}${abs(d):,.2f}"


@register.filter
def usd(value, places: int = 4) -> str:
    """Small USD amounts (LLM costs) with more places."""
    d = _num(value)
    return DASH if d is None else f"${d:,.{int(places)}f}"


@register.filter
def num(value, places: int = 3) -> str:
    d = _num(value)
    return DASH if d is None else _fixed(d, int(places))


@register.filter
def pct(value, places: int = 1) -> str:
    """A percentage already in percent units (12.3 -> 12.3%)."""
    d = _num(value)
    return DASH if d is None else f"{d:,.{int(places)}f}%"


@register.filter
def ratio_pct(value, places: int = 1) -> str:
    """A 0..1 ratio as a percentage (0.123 -> 12.3%)."""
    d = _num(value)
    return DASH if d is None else f"{d * 100:,.{int(places)}f}%"


@register.filter
def signed(value, places: int = 2) -> str:
    d = _num(value)
    return DASH if d is None else f"{d:+,.{int(places)}f}"


@register.simple_tag
def ci(lo, hi, places: int = 3) -> str:
    """'[lo, hi]' or '' when either end is missing."""
    a, b = _num(lo), _num(hi)
    if a is None or b is None:
        return ""
    return f"[{_fixed(a, places)}, {_fixed(b, places)}]"


def _fixed(d: Decimal, places: int) -> str:
    # A tiny negative that rounds to zero prints as "0.000", not "-0.000".
    text = f"{d:,.{places}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


@register.inclusion_tag("arena/partials/kind_badge.html")
def kind_badge(kind: str):
    return {"kind": kind}


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def pretty_json(value) -> str:
    """Indented JSON for stored payloads. The result is plain text: autoescaping still applies."""
    import json

    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return str(value)
