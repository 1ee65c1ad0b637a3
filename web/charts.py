"""The shape of a chart's data: pure functions from values already read to the lists and dicts
a page embeds and the API serves. Nothing here reads the database or picks a colour: the read
path (web/chart_reads.py) reads the series, names and styles each line, then hands them here.

The browser draws them with static/arena/charts.js (Plotly). Data reaches the page only through
`json_script` or the JSON API, never inside an inline script.

Value series are read, never recomputed from snapshots: cohorts/series/write.py keeps every entry's
value on fixed grids of 10 minutes to a week as snapshots are written, and per scope and
competitor the growth factors the home chart compounds into its chain-linked return (see
overview_payload). A range is drawn on the finest grid that fits it in MAX_POINTS points (the home page's
overview in OVERVIEW_POINTS): its grid points from the start of the range (or of the data, if
later) up to the latest snapshot, plus that latest snapshot itself when it falls between grid
points. The value at a point is the last snapshot at or before it within the entry's life, so a
sparse history (a replay, the demo's hourly snapshots) draws as steps, never as blanks, and
every range spans its whole window: a 4-week cohort's 1W shows seven days. Reading a chart is
two indexed queries, whatever the length of the history. All entries share one x axis, so a
timestamp travels once; times are the grid's exact instants, in UTC, to the minute.

Each line carries its competitor's fixed `color` and `dash` (web/colours.py, passed in as
`styles`). `annotations` is a list of marks on the time axis, {"x", "kind", "label", "detail"},
filled by the read path after the shape (cohort events, staff corrections).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import numpy as np

from cohorts.models import Cohort, Entry
from cohorts.series import chart as series_chart
from cohorts.series.grid import FINEST, epoch

MAX_POINTS = 400  # per entry, per series response
OVERVIEW_POINTS = series_chart.HOME_POINTS  # sample times of the home page's overview chart
RANGES = series_chart.RANGES
DEFAULT_RANGE = series_chart.DEFAULT_RANGE
Window = series_chart.Window
_numbers = series_chart.numbers


def range_or_default(raw: str | None) -> str:
    raw = (raw or "").upper()
    return raw if raw in RANGES else DEFAULT_RANGE


def fmt_ts(ts: datetime) -> str:
    # Plotly reads "YYYY-MM-DD HH:MM" as a date; every time on the site is UTC.
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def entry_label(entry: Entry, replicated: bool) -> str:
    name = entry.competitor.display_name
    return f"{name} #{entry.replicate}" if replicated else name


def cohort_payload(
    cohort: Cohort,
    range_key: str,
    entries: list[Entry],
    heads: dict[int, tuple[datetime, datetime, Decimal]],
    grid: dict[int, np.ndarray],
    win: series_chart.Window | None,
    styles: dict[int, dict[str, str]],
) -> dict[str, Any]:
    """Per-entry value series for one cohort; the /series endpoint's payload. `heads`: each
    entry's (first, latest snapshot time, latest total); `grid`: its values on `win`'s grid
    (None when no entry has a snapshot); `styles`: each entry's {"color", "dash"}."""
    payload: dict[str, Any] = {
        "cohort": cohort.pk,
        "kind": cohort.kind,
        "range": range_key,
        "ranges": list(RANGES),
        "value": "entry value (USD) at each sample time: its last snapshot at or before it",
        "step_seconds": FINEST,
        "x": [],
        "entries": [],
        "annotations": [],
    }
    if win is None:
        return payload
    n_grid = win.k1 - win.k0 + 1 if win.k1 >= win.k0 else 0
    replicated = any(e.replicate > 1 for e in entries)
    rows = []
    for e in sorted(entries, key=lambda e: (e.competitor.display_name, e.replicate)):
        values = grid.get(e.pk)
        if values is None:
            values = np.full(n_grid, np.nan)
        if win.tail is not None:
            head = heads.get(e.pk)
            # The latest point: this entry's latest snapshot, if its life reaches it.
            at_tail = float(head[2]) if head and epoch(head[1]) == win.tail else np.nan
            values = np.append(values, at_tail)
        rows.append(
            {
                "entry": e.pk,
                "competitor": e.competitor.slug,
                "competitor_simulated": e.competitor.simulated,
                "replicate": e.replicate,
                "label": entry_label(e, replicated),
                **styles[e.pk],
                "y": _numbers(values, 2),
            }
        )
    payload["step_seconds"] = win.step
    payload["x"] = win.x()
    payload["entries"] = rows
    return payload


def cohort_window(heads: dict, range_key: str) -> series_chart.Window | None:
    """The grid a cohort's chart of this range is drawn on: anchored at the cohort's latest
    snapshot (not the wall clock), so replay and demo cohorts chart the way live ones do."""
    if not heads:
        return None
    first = min(h[0] for h in heads.values())
    last = max(h[1] for h in heads.values())
    return Window(first, last, range_key, MAX_POINTS)


OVERVIEW_MEASURE = (
    "chain-linked growth (%): each step, the mean growth of the competitor's entries that were "
    "alive over the whole step (an entry opened during the step grows from its starting "
    "balance), compounded from the start of the range; an entry opening or ending moves nothing"
)


def overview_payload(
    scope: str,
    range_key: str,
    stored: dict[str, Any],
    names: dict[int, tuple[str, str]],
    styles: dict[int, dict[str, str]],
) -> dict[str, Any]:
    """Each competitor's chain-linked return (%) across its entries in a scope, over time.
    `stored`: the lines as cohorts/series/chart.py gives them ({"x", "step_seconds", "lines":
    [(competitor id, y)]}); `names`: id -> (slug, display name); `styles`: id -> its style. A
    line whose competitor has no name (deleted since) is left out."""
    payload: dict[str, Any] = {
        "scope": scope,
        "range": range_key,
        "ranges": list(RANGES),
        "value": OVERVIEW_MEASURE,
        "step_seconds": FINEST,
        "x": [],
        "series": [],
        "annotations": [],
    }
    if not stored["lines"]:
        return payload
    lines = [
        {"competitor": slug, "label": name, **styles[pk], "y": y}
        for pk, y in stored["lines"]
        if pk in names
        for slug, name in [names[pk]]
    ]
    lines.sort(key=lambda line: (line["label"], line["competitor"]))
    payload["step_seconds"] = stored["step_seconds"]
    payload["x"] = stored["x"]
    payload["series"] = lines
    return payload


def price_history(
    points, outcomes: list[str], max_points: int = MAX_POINTS, until: datetime | None = None
) -> dict[str, Any]:
    """Price lines per outcome from PricePoint rows (oldest first), thinned to max_points each.

    A price holds until the next one (the page draws steps), so with `until` (the resolution,
    or the latest quote) each line is carried on to that time: a market quoted once still
    draws a line over the real span of its life instead of a single point on an axis of
    milliseconds.
    """
    per: dict[str, tuple[list[str], list[float]]] = {}
    for p in points:
        xs, ys = per.setdefault(p.outcome, ([], []))
        xs.append(fmt_ts(p.ts))
        ys.append(float(p.price))
    order = [o for o in outcomes if o in per] + [o for o in per if o not in outcomes]
    end = fmt_ts(until) if until is not None else None
    lines = []
    for outcome in order:
        xs, ys = per[outcome]
        stride = max(1, math.ceil(len(xs) / max_points))
        keep = list(range(0, len(xs), stride))
        if keep and keep[-1] != len(xs) - 1:
            keep.append(len(xs) - 1)  # always end on the latest quote
        x, y = [xs[i] for i in keep], [ys[i] for i in keep]
        if end is not None and x and end > x[-1]:
            x.append(end)
            y.append(y[-1])
        lines.append({"label": outcome, "x": x, "y": y})
    return {"lines": lines}


def reliability(bins: list[dict] | None) -> dict[str, Any] | None:
    """Reliability diagram points (mean forecast vs observed frequency, with counts)."""
    if not bins:
        return None
    points = []
    for b in bins:
        n = b.get("n") or b.get("count") or 0
        mean_p = b.get("mean_p", b.get("mean"))
        freq = b.get("freq", b.get("observed"))
        if not n or mean_p is None or freq is None:
            continue
        points.append({"x": float(mean_p), "y": float(freq), "n": int(n)})
    return {"points": points} if points else None


def as_money(value: Decimal | float | None) -> str | None:
    """Money for the JSON API: a string with two decimals (or null)."""
    if value is None:
        return None
    return f"{Decimal(value).quantize(Decimal('0.01'))}"
