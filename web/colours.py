"""Each competitor's chart colour: fixed, so a competitor looks the same on every page.

The colour comes from the competitor's id alone (never from its position in one chart's legend,
which changes with the cohort or the sort): ids cycle through a palette of colours chosen to be
told apart on white, and each further cycle of the palette draws its lines with another dash, so
up to len(PALETTE) * len(DASHES) competitors get distinct (colour, dash) pairs.
"""

from __future__ import annotations

PALETTE: tuple[str, ...] = (
    "#2563eb",  # blue
    "#dc2626",  # red
    "#16a34a",  # green
    "#9333ea",  # purple
    "#ea580c",  # orange
    "#0891b2",  # cyan
    "#db2777",  # pink
    "#65a30d",  # lime
    "#854d0e",  # brown
    "#1e3a8a",  # navy
    "#ca8a04",  # ochre
    "#475569",  # slate
    "#c026d3",  # fuchsia
    "#0f766e",  # teal
    "#881337",  # maroon
    "#6b7280",  # grey
)
DASHES: tuple[str, ...] = ("solid", "dash", "dot")


def _id(competitor) -> int:
    if isinstance(competitor, int):
        return competitor
    return int(getattr(competitor, "pk", None) or getattr(competitor, "id", 0) or 0)


def colour_for(competitor) -> str:
    """The competitor's colour (a Competitor or its id)."""
    return PALETTE[(_id(competitor) - 1) % len(PALETTE)]


def style_for(competitor, replicate: int = 1) -> dict[str, str]:
    """{"color", "dash"} for a chart line: the competitor's colour; the dash tells apart
    competitors a palette cycle apart, and replicates of one competitor."""
    i = _id(competitor) - 1
    dash = DASHES[(i // len(PALETTE) + max(replicate, 1) - 1) % len(DASHES)]
    return {"color": colour_for(competitor), "dash": dash}
