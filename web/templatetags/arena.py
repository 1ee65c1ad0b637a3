"""Formatting filters for the pages. Missing numbers render as an em dash, never as 'None'.

One rule for every dollar amount on the site (portfolio money and model cost alike), in `money`:
dollars and cents with thousands separators; an amount under a dollar that is not a whole number
of cents (model calls cost fractions of a cent) keeps up to four decimals, and one too small even
for that reads "<$0.0001". So $10,000.00, -$12.50, $0.0123 and $0.00, never $0.000000.
"""

import functools
import json
from decimal import Decimal, InvalidOperation

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.money import MINUS, format_money
from core.text import reveal_bidi as _reveal_bidi
from web import colours, glossary
from web.decision_words import action_label

register = template.Library()
DASH = "—"


def _num(value):
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() else None


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
    if text.startswith(MINUS) or _is_zero(text):
        return text
    return f"+{text}"


def _is_zero(text: str) -> bool:
    return not any(ch in "123456789" for ch in text)


@register.filter
def log_e(value, places: int = 2) -> str:
    """The natural logarithm of a positive figure, for one that spans hundreds of powers of
    ten (a tournament take: coverage x e^score); a dash for zero or less."""
    d = _num(value)
    if d is None or d <= 0:
        return DASH
    return _fixed(d.ln(), int(places))


@register.simple_tag
def ci(lo, hi, places: int = 3) -> str:
    """'[lo, hi]' or '' when either end is missing; an end that rounds to zero reads 0 with
    no sign, like every figure."""
    a, b = _num(lo), _num(hi)
    if a is None or b is None:
        return ""
    return f"[{_fixed(a, places)}, {_fixed(b, places)}]"


WIDEST = Decimal("1e15")  # from here on a number reads as a power of ten, never 16+ digits
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _fixed(d: Decimal, places: int) -> str:
    """Fixed places with thousands separators and a real minus sign, never on a number that
    rounds to zero ("0.000", not "−0.000": a column reads one zero). A number of 10^15 or more
    reads as 1.43 × 10⁸¹ (a row of 80 digits says nothing a reader can use); a figure that can
    reach such sizes is shown on a log scale instead (`log_e`)."""
    if abs(d) >= WIDEST:
        mantissa, exponent = f"{abs(d):.2e}".split("e")
        text = f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    else:
        text = f"{abs(d):,.{places}f}"
    return f"{MINUS}{text}" if d < 0 and not _is_zero(text) else text


P_FLOOR = Decimal("0.0001")


@register.filter
def p_value(value) -> str:
    """A p-value to four places; below 0.0001 it reads "< 0.0001", never 0.0000."""
    d = _num(value)
    if d is None:
        return DASH
    return f"< {P_FLOOR}" if d < P_FLOOR else _fixed(d, 4)


@register.filter
def version(value) -> str:
    """'v1' for a stored version of '1' or 'v1' (never 'vv1')."""
    text = str(value or "").strip()
    if not text:
        return "v?"
    return text if text[:1] in "vV" else f"v{text}"


# The tags below were inclusion tags (one template each); as simple tags they give the same HTML
# without a template render per call, which the leaderboard calls dozens of times a page.
_KIND_BADGES = {
    "replay": '<span class="badge badge-replay" title="Replayed historical questions, not live '
    'trading">Replay</span>',
    "demo": '<span class="badge badge-demo" title="Synthetic demo data generated offline">Demo</span>',
    "live": '<span class="badge badge-live">Live</span>',
    "rehearsal": '<span class="badge badge-rehearsal" title="The live path rehearsed on an '
    'accelerated clock against stand-ins, not live trading">Rehearsal</span>',
}


@register.simple_tag
def frozen(name: str, form: str = "") -> str:
    """A frozen methodology constant as prose shows it (`{% frozen "provisional_brier_delta" %}`,
    `{% frozen "provisional_power" "percent" %}`), so no page repeats a number the rules own."""
    from core.methodology import CONSTANTS

    value = getattr(CONSTANTS, name)
    if form.isdigit():  # one element of a listed constant, `{% frozen "edge_label_alphas" "0" %}`
        value = value[int(form)]
    return f"{value:.0%}" if form == "percent" else f"{value:g}"


@register.simple_tag
def kind_badge(kind: str) -> str:
    return mark_safe(_KIND_BADGES.get(kind, ""))  # noqa: S308 - constant markup


_SOURCES = {
    "polymarket": "Polymarket",
    "forecastbench": _KIND_BADGES["replay"],
    "rehearsal": _KIND_BADGES["rehearsal"],
}


@register.simple_tag
def market_row(m) -> str:
    """One row of the markets table. Fifty a page: one format_html call instead of some
    thirty template nodes (and a URL reversal) a row, which were most of the page's render."""
    from django.template.defaultfilters import date
    from django.utils.text import Truncator

    question = m.question if len(m.question) <= 140 else Truncator(m.question).chars(140)
    status = (
        format_html("{}: {}", m.get_status_display(), m.resolved_outcome)
        if m.status == "resolved"
        else m.get_status_display()
    )
    quotes = m.last_prices if isinstance(m.last_prices, dict) else {}
    prices = format_html_join(" · ", "{} {}", ((k, num(v, 3)) for k, v in quotes.items()))
    # format_html escapes every value; only the source badge is constant markup.
    return format_html(
        '<tr>\n    <td data-label="Question"><a href="{}">{}</a></td>\n'
        '    <td data-label="Source">{}</td>\n'
        '    <td data-label="Status">{}</td>\n'
        '    <td data-label="Prices">{}</td>\n'
        '    <td class="num" data-label="Volume">{}</td>\n'
        '    <td data-label="Closes">{}</td>\n  </tr>',
        _market_url(m.pk),
        question,
        mark_safe(_SOURCES.get(m.source, _KIND_BADGES["demo"])),  # noqa: S308 - constant markup
        status,
        prices,
        money(m.volume),
        date(m.close_time, "Y-m-d") or DASH,
    )


def _market_url(pk: int) -> str:
    return _market_prefix() + f"{int(pk)}/"


@functools.cache
def _market_prefix() -> str:
    return reverse("market-detail", args=[1])[: -len("1/")]


_SIMULATED_BADGE = (
    '<span class="badge badge-simulated" title="Simulated model: the arena\'s built-in seeded '
    'forecaster answered, not a real model; nothing was billed">simulated</span>'
)


_OUTSIDE_BADGE = (
    '<span class="badge badge-outside" title="Outside agent: an outside team\'s own agent, '
    'entered through the agent API; the arena never calls it">outside agent</span>'
)


@register.simple_tag
def decision_did(decision) -> str:
    """What a decision did ("BUY", "chosen HOLD", "forced HOLD"), or its status when it has
    no action yet."""
    if decision.action:
        return action_label(decision.action, decision.hold_reason)
    return decision.get_status_display()


@register.simple_tag
def simulated_badge(competitor) -> str:
    """The mark every page puts next to a competitor's name when it is not the operator's own
    real model or baseline: "simulated", or "outside agent"."""
    if getattr(competitor, "kind", "") == "outside":
        return mark_safe(_OUTSIDE_BADGE)  # noqa: S308 - constant markup
    return simulated_mark(getattr(competitor, "simulated", False))


def simulated_mark(simulated: bool) -> SafeString:
    """simulated_badge for a row that has the competitor's flag, not the competitor."""
    return mark_safe(_SIMULATED_BADGE if simulated else "")  # noqa: S308 - constant markup


@register.filter
def body_text(value) -> str:
    """A request body kept as bytes, shown as text (bytes that are not UTF-8 as U+FFFD)."""
    return bytes(value or b"").decode("utf-8", errors="replace")


@register.simple_tag
def colour(competitor) -> str:
    """The competitor's fixed chart colour (the same on every page and chart)."""
    return colours.colour_for(competitor)


@register.simple_tag
def swatch(competitor) -> str:
    # The chart line's colour and dash in small, so a name in a table matches its line.
    style = colours.style_for(competitor)
    return format_html(
        '<svg class="swatch" width="16" height="8" viewBox="0 0 16 8" aria-hidden="true">'
        '<line x1="0" y1="4" x2="16" y2="4" stroke="{}" stroke-width="3" stroke-dasharray="{}"/>'
        "</svg>",
        style["color"],
        colours.SVG_DASH.get(style["dash"], ""),
    )


@register.simple_tag
def term(key: str, label: str = "") -> str:
    """A link from a column header or label to the methodology glossary entry `key`."""
    # Whether the label is already safe HTML is part of the key: "a &amp; b" marked safe and
    # the same text unmarked render differently.
    return _term_link(key, label, isinstance(label, SafeString))


# The glossary and the methodology URL never change while the site runs, and a page links a
# dozen terms: each link is built once, not on every render.
@functools.lru_cache(maxsize=512)
def _term_link(key: str, label: str, _safe: bool) -> str:
    entry = glossary.INDEX.get(key)
    if entry is None:
        raise template.TemplateSyntaxError(f"no glossary entry {key!r}")
    inner = (
        format_html("{}", label)
        if label
        else format_html(
            '<span aria-hidden="true">?</span><span class="sr-only">What is {}?</span>', entry.title
        )
    )
    return format_html(
        '<a class="term" href="{}#g-{}" title="{}: what it means">{}</a>',
        _methodology_url(),
        key,
        entry.title,
        inner,
    )


@functools.cache
def _methodology_url() -> str:
    return reverse("methodology")


@register.filter
def pretty_json(value) -> str:
    """Indented JSON for stored payloads. The result is plain text: autoescaping still applies."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return str(value)


@register.filter
def reveal_bidi(value) -> str:
    """Untrusted text shown as stored but with its bidi controls as visible code points, so a
    right-to-left override cannot make "seY" read "Yes". Plain text: autoescaping still applies."""
    return _reveal_bidi(str(value))


@register.filter
def chart_script(chart, element_id: str):
    """A chart's data as a <script type="application/json">: a ChartJSON goes in as it is
    (already escaped as json_script does, the same bytes the API serves); anything else
    through json_script."""
    from django.utils.html import json_script

    text = getattr(chart, "text", None)
    if text is None:
        return json_script(chart, element_id)
    return format_html(
        '<script id="{}" type="application/json">{}</script>', element_id, mark_safe(text)
    )
