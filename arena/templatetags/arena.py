"""Formatting filters for the pages. Missing numbers render as an em dash, never as 'None'.

One rule for every dollar amount on the site (portfolio money and model cost alike), in `money`:
dollars and cents with thousands separators; an amount under a dollar that is not a whole number
of cents (model calls cost fractions of a cent) keeps up to four decimals, and one too small even
for that reads "<$0.0001". So $10,000.00, -$12.50, $0.0123 and $0.00, never $0.000000.
"""

import json
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

from django import template

from arena import colours, glossary

register = template.Library()
DASH = "—"
# A real minus sign (the width of +, never mistaken for a hyphen) glued to what follows by a word
# joiner: browsers may otherwise wrap a narrow column between "−" and "$3,143.17".
MINUS = "\u2212\u2060"
CENT = Decimal("0.01")
SMALLEST = Decimal("0.0001")


def _num(value):
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() else None


def format_money(d: Decimal) -> str:
    sign = MINUS if d < 0 else ""
    a = abs(d)
    if a == a.quantize(CENT) or a >= 1:
        return f"{sign}${a.quantize(CENT, rounding=ROUND_HALF_EVEN):,.2f}"
    if a < SMALLEST:
        return f"{sign}<$0.0001"
    text = f"{a.quantize(SMALLEST, rounding=ROUND_HALF_EVEN):.4f}".rstrip("0")
    return f"{sign}${text if len(text.split('.')[1]) >= 2 else f'{a:.2f}'}"


@register.filter
def money(value) -> str:
    """Any dollar amount, portfolio or model cost: see the module docstring."""
    d = _num(value)
    return DASH if d is None else format_money(d)


@register.filter
def num(value, places: int = 3) -> str:
    d = _num(value)
    return DASH if d is None else _fixed(d, int(places))


@register.filter
def pct(value, places: int = 1) -> str:
    """A percentage already in percent units (12.3 -> 12.3%)."""
    d = _num(value)
    return DASH if d is None else f"{_fixed(d, int(places))}%"


@register.filter
def ratio_pct(value, places: int = 1) -> str:
    """A 0..1 ratio as a percentage (0.123 -> 12.3%)."""
    d = _num(value)
    return DASH if d is None else f"{_fixed(d * 100, int(places))}%"


@register.filter
def signed(value, places: int = 2) -> str:
    d = _num(value)
    if d is None:
        return DASH
    text = _fixed(d, int(places))
    return text if text.startswith(MINUS) else f"+{text}"


@register.simple_tag
def ci(lo, hi, places: int = 3) -> str:
    """'[lo, hi]' or '' when either end is missing. An end keeps its sign even when it rounds
    to zero (-0.0003 at 3 places reads -0.000), so an interval crossing zero still shows it."""
    a, b = _num(lo), _num(hi)
    if a is None or b is None:
        return ""
    return f"[{_fixed(a, places)}, {_fixed(b, places)}]"


def _fixed(d: Decimal, places: int) -> str:
    """Fixed places with thousands separators and a real minus sign; the sign of a negative
    number is kept even when it rounds to zero, because the sign is often the finding."""
    text = f"{abs(d):,.{places}f}"
    return f"{MINUS}{text}" if d < 0 else text


@register.filter
def version(value) -> str:
    """'v1' for a stored version of '1' or 'v1' (never 'vv1')."""
    text = str(value or "").strip()
    if not text:
        return "v?"
    return text if text[:1] in "vV" else f"v{text}"


@register.inclusion_tag("arena/partials/simulated_badge.html")
def simulated_badge(competitor):
    """The "simulated" mark every page puts next to a simulated competitor's name."""
    return {"competitor": competitor}


@register.inclusion_tag("arena/partials/kind_badge.html")
def kind_badge(kind: str):
    return {"kind": kind}


@register.simple_tag
def colour(competitor) -> str:
    """The competitor's fixed chart colour (the same on every page and chart)."""
    return colours.colour_for(competitor)


@register.inclusion_tag("arena/partials/swatch.html")
def swatch(competitor):
    return {"colour": colours.colour_for(competitor)}


@register.inclusion_tag("arena/partials/term.html")
def term(key: str, label: str = ""):
    """A link from a column header or label to the methodology glossary entry `key`."""
    entry = glossary.INDEX.get(key)
    if entry is None:
        raise template.TemplateSyntaxError(f"no glossary entry {key!r}")
    return {"key": key, "label": label, "title": entry.title}


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def pretty_json(value) -> str:
    """Indented JSON for stored payloads. The result is plain text: autoescaping still applies."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return str(value)
