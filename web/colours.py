"""Each competitor's chart style: a colour from a colour-blind-safe palette and a dash.

Styles are handed out in order among all competitors, ranked by id, the n-th one getting the
n-th (colour, dash) pair, so a competitor has one style on every page and chart whatever scope
the page shows (a ranking per scope gave one competitor a solid line on one page and a dashed
one on the next). Two competitors share a style only when there are more of them than pairs
(7 x 5 = 35), and a new competitor takes the next free pair rather than one picked by its id.
The `scope` arguments and `in_scope` are kept for callers and no longer change a style. The
palette is Okabe and Ito's (without its yellow, unreadable on white): its
colours stay apart for the common colour-vision deficiencies; the dash tells apart competitors
a palette cycle apart, on charts and in the swatches beside their names, which draw it too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models.signals import post_delete, post_save

PALETTE: tuple[str, ...] = (
    "#000000",  # black
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
)
# Plotly dash names, and the SVG dash pattern a swatch draws for each.
DASHES: tuple[str, ...] = ("solid", "dash", "dot", "dashdot", "longdash")
SVG_DASH = {
    "solid": "",
    "dash": "4 2",
    "dot": "1.5 1.5",
    "dashdot": "4 1.5 1.5 1.5",
    "longdash": "7 2",
}

ALL = ""  # the ranking among all competitors
_ranks: dict[str, dict[int, int]] = {}
_read_at: dict[str, float] = {}
_missing: dict[str, set[int]] = {}
_lock = threading.Lock()
_scope: ContextVar[str] = ContextVar("colour_scope", default=ALL)
# Another process may add a competitor: the order is read again at most this often.
RANKS_TTL_SECONDS = 60.0


def forget(**_kwargs) -> None:
    """Drop the order read so far (a competitor was added or removed in this process)."""
    with _lock:
        _ranks.clear()
        _missing.clear()


post_save.connect(forget, sender="agents.Competitor", dispatch_uid="web.colours.forget.save")
post_delete.connect(forget, sender="agents.Competitor", dispatch_uid="web.colours.forget.delete")


def _id(competitor) -> int:
    if isinstance(competitor, int):
        return competitor
    return int(getattr(competitor, "pk", None) or getattr(competitor, "id", 0) or 0)


@contextmanager
def in_scope(scope: str) -> Iterator[None]:
    """Swatches drawn inside (a view and its template) rank among the scope's competitors,
    as that scope's charts do."""
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)


def _order(scope: str) -> list[int]:
    from agents.models import Competitor

    qs = Competitor.objects.all()
    if scope != ALL:
        qs = qs.filter(entries__cohort__kind=scope)
    return list(qs.order_by("pk").values_list("pk", flat=True).distinct())


def rank(competitor, scope: str | None = None) -> int:
    """The competitor's place (0-based) by id among the scope's competitors (the scope in
    force, see in_scope, when not given). Read once per process and scope, and again whenever
    an id is new to it, so a competitor added later gets the next free style."""
    pk = _id(competitor)
    scope = ALL  # one style per competitor on every page (see the module docstring)
    ranks = _ranks.get(scope)
    stale = ranks is None or time.monotonic() - _read_at[scope] > RANKS_TTL_SECONDS
    if stale or (pk not in ranks and pk not in _missing.get(scope, ())):
        ranks = {c: i for i, c in enumerate(_order(scope))}
        with _lock:
            _ranks[scope] = ranks
            _read_at[scope] = time.monotonic()
            _missing[scope] = set()
    if pk not in ranks:
        _missing[scope].add(pk)  # asked again only after the next read of the order
    if pk not in ranks and scope != ALL:
        return rank(pk, ALL)  # shown in a scope it never entered
    # An id that is not (or no longer) a competitor: the last style, never another's.
    return ranks.get(pk, len(PALETTE) * len(DASHES) - 1)


def style_at(index: int, replicate: int = 1) -> dict[str, str]:
    dash = DASHES[(index // len(PALETTE) + max(replicate, 1) - 1) % len(DASHES)]
    return {"color": PALETTE[index % len(PALETTE)], "dash": dash}


def colour_for(competitor, scope: str | None = None) -> str:
    """The competitor's colour (a Competitor or its id)."""
    return PALETTE[rank(competitor, scope) % len(PALETTE)]


def style_for(competitor, replicate: int = 1, scope: str | None = None) -> dict[str, str]:
    """{"color", "dash"} for a chart line: the competitor's pair; replicates of one competitor
    keep its colour and step through the dashes."""
    return style_at(rank(competitor, scope), replicate)
