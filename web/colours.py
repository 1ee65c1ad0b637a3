"""Each competitor's chart style: a colour from a colour-blind-safe palette and a dash.

Styles are handed out in order: competitors are ranked by id (the order they joined, with no
gaps left by deleted or test rows) and the n-th one gets the n-th (colour, dash) pair, so two
competitors share a style only when there are more of them than pairs (7 x 5 = 35), and a
competitor keeps its style on every page and chart. The palette is Okabe and Ito's (without
its yellow, unreadable on white): its colours stay apart for the common colour-vision
deficiencies; the dash tells apart competitors a palette cycle apart, on charts and in the
swatches beside their names, which draw the same dash.
"""

from __future__ import annotations

import threading
import time

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

_ranks: dict[int, int] = {}
_read_at = 0.0
_lock = threading.Lock()
# Another process may add a competitor: the order is read again at most this often.
RANKS_TTL_SECONDS = 60.0


def forget(**_kwargs) -> None:
    """Drop the order read so far (a competitor was added or removed in this process)."""
    with _lock:
        _ranks.clear()


post_save.connect(forget, sender="agents.Competitor", dispatch_uid="web.colours.forget.save")
post_delete.connect(forget, sender="agents.Competitor", dispatch_uid="web.colours.forget.delete")


def _id(competitor) -> int:
    if isinstance(competitor, int):
        return competitor
    return int(getattr(competitor, "pk", None) or getattr(competitor, "id", 0) or 0)


def rank(competitor) -> int:
    """The competitor's place (0-based) among all competitors by id. Read once per process and
    again whenever an id is new to it, so a competitor added later gets the next free style."""
    global _read_at
    pk = _id(competitor)
    if pk not in _ranks or time.monotonic() - _read_at > RANKS_TTL_SECONDS:
        from agents.models import Competitor

        ids = list(Competitor.objects.order_by("pk").values_list("pk", flat=True))
        with _lock:
            _ranks.clear()
            _ranks.update({c: i for i, c in enumerate(ids)})
            _read_at = time.monotonic()
    # An id that is not (or no longer) a competitor: the last style, never another's.
    return _ranks.get(pk, len(PALETTE) * len(DASHES) - 1)


def style_at(index: int, replicate: int = 1) -> dict[str, str]:
    dash = DASHES[(index // len(PALETTE) + max(replicate, 1) - 1) % len(DASHES)]
    return {"color": PALETTE[index % len(PALETTE)], "dash": dash}


def colour_for(competitor) -> str:
    """The competitor's colour (a Competitor or its id)."""
    return PALETTE[rank(competitor) % len(PALETTE)]


def style_for(competitor, replicate: int = 1) -> dict[str, str]:
    """{"color", "dash"} for a chart line: the competitor's pair; replicates of one competitor
    keep its colour and step through the dashes."""
    return style_at(rank(competitor), replicate)
