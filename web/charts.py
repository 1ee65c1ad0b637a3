"""Chart data for the pages: plain functions returning lists and dicts.

The browser draws them with static/arena/charts.js (Plotly). Data reaches the page only through
`json_script` or the JSON API, never inside an inline script.

Value series are read, never recomputed from snapshots: cohorts/series.py keeps every entry's
value on fixed grids of 10 minutes to a week as snapshots are written, and per scope and
competitor the growth factors the home chart compounds into its chain-linked return (see
scope_return_series). A range is drawn on the finest grid that fits it in MAX_POINTS points (the home page's
overview in OVERVIEW_POINTS): its grid points from the start of the range (or of the data, if
later) up to the latest snapshot, plus that latest snapshot itself when it falls between grid
points. The value at a point is the last snapshot at or before it within the entry's life, so a
sparse history (a replay, the demo's hourly snapshots) draws as steps, never as blanks, and
every range spans its whole window: a 4-week cohort's 1W shows seven days. Reading a chart is
two indexed queries, whatever the length of the history. All entries share one x axis, so a
timestamp travels once; times are the grid's exact instants, in UTC, to the minute.

Each line carries its competitor's fixed `color` and `dash` (web/colours.py). `annotations` is
a list of marks on the time axis, {"x", "kind", "label", "detail"}, filled by
web/chart_reads.decorate_series / decorate_overview (cohort events, staff corrections).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

from cohorts import series
from cohorts import series_overview as overview
from cohorts.models import Cohort, Entry
from web import colours

MAX_POINTS = 400  # per entry, per series response
OVERVIEW_POINTS = 120  # sample times of the home page's overview chart
RANGES: dict[str, timedelta | None] = {
    "10M": timedelta(minutes=10),
    "1H": timedelta(hours=1),
    "1D": timedelta(days=1),
    "1W": timedelta(weeks=1),
    "1M": timedelta(days=30),
    "3M": timedelta(days=90),
    "ALL": None,
}
DEFAULT_RANGE = "ALL"


def range_or_default(raw: str | None) -> str:
    raw = (raw or "").upper()
    return raw if raw in RANGES else DEFAULT_RANGE


def fmt_ts(ts: datetime) -> str:
    # Plotly reads "YYYY-MM-DD HH:MM" as a date; every time on the site is UTC.
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


class Window:
    """The points of one range: grid indices k0..k1 of `step`, plus `tail` (seconds) when the
    latest snapshot falls between grid points."""

    def __init__(self, first: datetime, last: datetime, range_key: str, max_points: int):
        window = RANGES[range_key]
        end = series.epoch(last)
        start = series.epoch(first)
        if window is not None:
            start = max(start, end - int(window.total_seconds()))
        self.start = start  # seconds: the range's first instant, before its first grid point
        self.step = series.step_for(end - start, max_points)
        self.k0 = -(-start // self.step)
        self.k1 = end // self.step
        self.tail = end if end % self.step else None
        self.times = [k * self.step for k in range(self.k0, self.k1 + 1)]
        if self.tail is not None:
            self.times.append(self.tail)

    def x(self) -> list[str]:
        # Vectorised: formatting hundreds of datetimes one by one is a visible share of a page.
        stamps = np.datetime_as_string(np.array(self.times, dtype="datetime64[s]"), unit="m")
        return [t.replace("T", " ") for t in stamps.tolist()]


def _numbers(values: np.ndarray, digits: int) -> list[float | None]:
    out = np.round(values, digits).tolist()
    for i in np.flatnonzero(np.isnan(values)).tolist():  # null outside the entry's life
        out[i] = None
    return out


def entry_label(entry: Entry, replicated: bool) -> str:
    name = entry.competitor.display_name
    return f"{name} #{entry.replicate}" if replicated else name


def cohort_series(cohort: Cohort, range_key: str = DEFAULT_RANGE, entries=None) -> dict[str, Any]:
    """Per-entry value series for one cohort; the /series endpoint's payload.

    The range is anchored at the cohort's latest snapshot (not the wall clock), so replay and
    demo cohorts with a simulated clock chart the same way as live ones.
    """
    range_key = range_or_default(range_key)
    if entries is None:
        entries = list(Entry.objects.filter(cohort=cohort).select_related("competitor"))
    payload: dict[str, Any] = {
        "cohort": cohort.pk,
        "kind": cohort.kind,
        "range": range_key,
        "ranges": list(RANGES),
        "value": "entry value (USD) at each sample time: its last snapshot at or before it",
        "step_seconds": series.FINEST,
        "x": [],
        "entries": [],
        "annotations": [],
    }
    heads = _heads_of(entries)
    if not heads:
        return payload
    first = min(h[0] for h in heads.values())
    last = max(h[1] for h in heads.values())
    win = Window(first, last, range_key, MAX_POINTS)
    grid = series.entry_values(list(heads), win.step, win.k0, win.k1)
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
            at_tail = float(head[2]) if head and series.epoch(head[1]) == win.tail else np.nan
            values = np.append(values, at_tail)
        rows.append(
            {
                "entry": e.pk,
                "competitor": e.competitor.slug,
                "competitor_simulated": e.competitor.simulated,
                "replicate": e.replicate,
                "label": entry_label(e, replicated),
                **colours.style_for(e.competitor_id, e.replicate, scope=cohort.kind),
                "y": _numbers(values, 2),
            }
        )
    payload["step_seconds"] = win.step
    payload["x"] = win.x()
    payload["entries"] = rows
    return payload


def _heads_of(entries) -> dict[int, tuple[datetime, datetime, Decimal]]:
    """series.entry_heads of the entries, from the heads they carry when the caller read
    them with their entries (selectors.entry_rows), else one query."""
    cached = [e._state.fields_cache for e in entries]
    if not entries or any("series_head" not in c for c in cached):
        return series.entry_heads(e.pk for e in entries)
    out = {}
    for e, c in zip(entries, cached, strict=True):
        h = c["series_head"]  # None: no head row yet
        if (
            h is not None
            and h.first_ts is not None
            and h.last_ts is not None
            and h.last_total is not None
        ):
            out[e.pk] = (h.first_ts, h.last_ts, h.last_total)
    return out


OVERVIEW_MEASURE = (
    "chain-linked return (%): each step, the mean growth of the competitor's entries that were "
    "alive over the whole step (an entry opened during the step grows from its starting "
    "balance), compounded from the start of the range; an entry opening or ending moves nothing"
)


def scope_return_series(
    scope: str,
    max_points: int = OVERVIEW_POINTS,
    range_key: str = DEFAULT_RANGE,
    span: tuple | None = None,
) -> dict[str, Any]:
    """Each competitor's chain-linked return (%) across its entries in a scope, over time.

    A plain mean of the entries' returns drops whenever a cohort opens (a new entry at 0 %
    joins entries that have run for weeks). Here the growth from one sample time to the next
    is averaged over the entries alive at both (an entry born in between counts from its
    starting balance), and the growths are compounded: the return of holding the competitor's
    entries in equal parts, rebalanced at each sample time. The growth at each grid point is
    stored on write (cohorts/series_overview.py); the two points that depend on the range are
    computed here from the few entries they involve: the first (only entries born since the
    range's start count, from their starting balance) and a latest snapshot between grid
    points. Three indexed queries, whatever the number of entries or the history (two when
    the caller has the scope's `span`, series.scope_span; () when it has none).
    """
    range_key = range_or_default(range_key)
    payload: dict[str, Any] = {
        "scope": scope,
        "range": range_key,
        "ranges": list(RANGES),
        "value": OVERVIEW_MEASURE,
        "step_seconds": series.FINEST,
        "x": [],
        "series": [],
        "annotations": [],
    }
    if span is None:
        span = series.scope_span(scope)
    if not span:
        return payload
    win = Window(span[0], span[1], range_key, max_points)
    n_grid = win.k1 - win.k0 + 1 if win.k1 >= win.k0 else 0
    factors = series.scope_growth(scope, win.step, win.k0, win.k1) if n_grid else {}
    end = series.epoch(span[1])
    edges = series.scope_edges(scope, (win.start, win.times[0]), end, win.step, win.k0, win.k1)
    lines = []
    for owner, y in _compounded(win, n_grid, factors, edges, end).items():
        if np.isnan(y).all():
            continue
        pk, slug, name = owner
        lines.append(
            {"competitor": slug, "label": name, **colours.style_for(pk, scope=scope), "y": y}
        )
    lines.sort(key=lambda line: (line["label"], line["competitor"]))
    if lines:
        payload["step_seconds"] = win.step
        payload["x"] = win.x()
        payload["series"] = [{**line, "y": _numbers(line["y"], 3)} for line in lines]
    return payload


def _compounded(
    win: Window, n_grid: int, factors: dict[tuple, np.ndarray], edges: list[tuple], end: int
) -> dict[tuple, np.ndarray]:
    """owner -> chain-linked return (%) at each of the window's times, from the stored growth
    factors and the entries at the range's edges (series.scope_edges rows)."""
    n = len(win.times)
    born: dict[tuple, list] = {}
    tail: dict[tuple, list] = {}
    for e in edges:
        if n_grid and win.start <= e[5] <= win.times[0]:
            born.setdefault(e[1:4], []).append(e)
        if win.tail is not None and e[6] == end:
            tail.setdefault(e[1:4], []).append(e)
    out = {}
    for owner in set(factors) | set(born) | set(tail):
        f = np.full(n, np.nan)
        stored = factors.get(owner)
        if stored is not None:
            f[:n_grid] = stored
        alive = ~np.isnan(f)
        if n_grid:
            # The first point: only entries born since the range's start grow, from their
            # starting balance (earlier ones have no point before it in the range).
            mine = born.get(owner, [])
            f[0] = overview.growth_at(
                np.array([e[8] for e in mine], dtype=float),
                np.full(len(mine), np.nan),
                [(e[4] or float("nan"), e[5]) for e in mine],
                win.start - 1,
                win.times[0],
            )
        if win.tail is not None:
            mine = tail.get(owner, [])
            f[-1] = overview.growth_at(
                np.array([e[7] for e in mine], dtype=float),
                np.array([e[9] if n_grid else np.nan for e in mine], dtype=float),
                [(e[4] or float("nan"), e[5]) for e in mine],
                win.times[-2] if n > 1 else win.start - 1,
                win.tail,
            )
            alive[-1] = bool(mine)
        y = (np.cumprod(np.where(np.isnan(f), 1.0, f)) - 1.0) * 100.0
        y[~alive] = np.nan  # no entry alive: no point
        out[owner] = y
    return out


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
