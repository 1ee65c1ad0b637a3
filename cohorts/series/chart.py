"""The home chart: each competitor's chain-linked return across its entries of a scope, drawn
from the stored series (cohorts/series/write.py, cohorts/series/overview.py), and the scope's default
chart (range ALL) stored on write.

A plain mean of the entries' returns drops whenever a cohort opens (a new entry at 0 % joins
entries that have run for weeks). Here the growth from one sample time to the next is averaged
over the entries alive at both (an entry born in between counts from its starting balance), and
the growths are compounded: the return of holding the competitor's entries in equal parts,
rebalanced at each sample time. The growth at each grid point is stored on write
(cohorts/series/overview.py); the two points that depend on the range are computed from the few entries
they involve: the first (only entries born since the range's start count, from their starting
balance) and a latest snapshot between grid points.

Why the default chart is stored: it is what a visitor's first look at `/` draws, and every
snapshot tick changes it. Computing it costs a cold render two queries and the compounding, a
third of the page; every series write already holds the scope's lock and has just recomputed
what the chart reads, so it stores the finished lines there (ScopeSeriesHead.home_chart) and
the page reads one row. Writers call store_home_charts under that lock (cohorts/series/write.py), so
the stored chart is always the one the committed series give; the last writer to commit
computed it after every earlier one had committed. The lines are keyed by competitor id: names,
slugs and colours are the site's, read at render, so a renamed competitor shows at once. Other
ranges are computed on read; a stored chart of an older format, or none yet (a database
migrated since its last write), is computed on read too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
from django.db import connection
from django.db.models import Max, Min

from cohorts.series import overview as overview
from cohorts.series.grid import CHUNK, DTYPE, FINEST, assemble, epoch, instant, step_for, unpack

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
HOME_POINTS = 120  # sample times of the home chart
# What ScopeSeriesHead.home_chart holds; a stored chart of another format is computed anew.
HOME_CHART_FORMAT = 1


class Window:
    """The points of one range: grid indices k0..k1 of `step`, plus `tail` (seconds) when the
    latest snapshot falls between grid points."""

    def __init__(self, first: datetime, last: datetime, range_key: str, max_points: int):
        window = RANGES[range_key]
        end = epoch(last)
        start = epoch(first)
        if window is not None:
            start = max(start, end - int(window.total_seconds()))
        self.start = start  # seconds: the range's first instant, before its first grid point
        self.step = step_for(end - start, max_points)
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


def numbers(values: np.ndarray, digits: int) -> list[float | None]:
    """Rounded, as JSON carries them: null outside the line's life."""
    out = np.round(values, digits).tolist()
    for i in np.flatnonzero(np.isnan(values)).tolist():
        out[i] = None
    return out


# --- reading the stored series ---------------------------------------------------------------


def scope_span(scope: str) -> tuple[datetime, datetime] | None:
    """The first and the latest snapshot of the scope's entries, from their heads (always in
    step with the entries, where the scope's head follows a deletion only once it commits)."""
    from cohorts.models import SeriesHead

    span = SeriesHead.objects.filter(
        entry__cohort__kind=scope, first_ts__isnull=False, last_ts__isnull=False
    ).aggregate(first=Min("first_ts"), last=Max("last_ts"))
    if span["first"] is None or span["last"] is None:
        return None
    return span["first"], span["last"]


def scope_growth(scope: str, step: int, k0: int, k1: int) -> dict[int, np.ndarray]:
    """competitor id -> the stored growth factors of a scope at grid points k0..k1 of `step`
    (cohorts/series/overview.py), NaN where none of the competitor's entries is alive. One
    indexed query."""
    from cohorts.models import ScopeSeriesChunk

    if k1 < k0:
        return {}
    rows = ScopeSeriesChunk.objects.filter(
        scope=scope, step=step, chunk__gte=k0 // CHUNK, chunk__lte=k1 // CHUNK
    ).values_list("competitor_id", "step", "chunk", "values")
    return assemble(rows, step, k0, k1)


class Edge(NamedTuple):
    """An entry at a range's edge (scope_edges): times in seconds, amounts as floats."""

    entry: int
    competitor: int
    initial: float | None  # starting balance
    first: int  # first snapshot
    last: int  # latest snapshot
    total: float  # the latest snapshot's total
    at_k0: float  # value at the range's first grid point (NaN unless born within the range)
    at_k1: float  # value at its last grid point (NaN unless its latest is the range's end)


def scope_edges(
    scope: str, born: tuple[int, int], last: int, step: int, k0: int, k1: int
) -> list[Edge]:
    """The scope's entries whose first snapshot is within `born` (seconds, both ends included)
    or whose latest is at `last` (seconds), in entry id order: what a chart's first point and a
    latest snapshot between grid points need. One query that reads the two points' eight bytes
    each, not the whole chunks, with times and amounts as numbers (converting hundreds of
    datetimes and Decimals in Python would cost more than the query)."""
    from cohorts.models import Cohort, Entry, SeriesChunk, SeriesHead

    qn = connection.ops.quote_name
    size = DTYPE.itemsize
    if connection.vendor == "postgresql":
        secs = "floor(extract(epoch from h.{}))::bigint"
        real = "{}::float8"
        point = "substring({}.{} from %s for " + str(size) + ")"
    else:
        secs = "CAST(strftime('%%s', h.{}) AS INTEGER)"
        real = "CAST({} AS REAL)"
        point = "substr({}.{}, %s, " + str(size) + ")"
    chunks = qn(SeriesChunk._meta.db_table)
    # A subquery per point, not a join: the planner then looks each entry's chunk up by the
    # whole (entry, step, chunk) key instead of scanning every chunk of the step.
    point = (
        f"(SELECT {point.format('x', qn('values'))} FROM {chunks} x "
        "WHERE x.entry_id = h.entry_id AND x.step = %s AND x.chunk = %s)"
    )
    # Each point only where it is used: k0's for an entry born within `born`, k1's for one
    # whose latest is at `last` (most rows; a CASE runs its subquery only when it holds).
    born_case = f"CASE WHEN h.first_ts >= %s AND h.first_ts < %s THEN {point} END"
    last_case = f"CASE WHEN h.last_ts >= %s AND h.last_ts < %s THEN {point} END"
    sql = f"""
        SELECT h.entry_id, e.competitor_id, {real.format("e.initial_balance")},
               {secs.format("first_ts")}, {secs.format("last_ts")},
               {real.format("h.last_total")}, {born_case}, {last_case}
        FROM {qn(SeriesHead._meta.db_table)} h
        JOIN {qn(Entry._meta.db_table)} e ON e.id = h.entry_id
        JOIN {qn(Cohort._meta.db_table)} co ON co.id = e.cohort_id
        WHERE co.kind = %s AND h.first_ts IS NOT NULL AND h.last_ts IS NOT NULL
          AND ((h.first_ts >= %s AND h.first_ts < %s) OR (h.last_ts >= %s AND h.last_ts < %s))
        ORDER BY h.entry_id
    """  # noqa: S608 - table names from the models, values as parameters
    at = connection.ops.adapt_datetimefield_value
    lo, hi = born
    born_at = [at(instant(lo)), at(instant(hi + 1))]
    last_at = [at(instant(last)), at(instant(last + 1))]
    params: list[int | str | None] = [
        *born_at, (k0 % CHUNK) * size + 1, step, k0 // CHUNK,
        *last_at, (k1 % CHUNK) * size + 1, step, k1 // CHUNK,
        scope, *born_at, *last_at,
    ]  # fmt: skip
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    nan = float("nan")
    return [
        Edge(
            row[0], row[1], row[2], row[3], row[4], row[5], _point(row[6], nan), _point(row[7], nan)
        )
        for row in rows
        if lo <= row[3] <= hi or row[4] == last
    ]


def _point(raw, missing: float) -> float:
    return missing if raw is None else float(unpack(bytes(raw))[0])


# --- compounding -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeReturn:
    """A scope's chart: the sample times and, per competitor id, its return (%) at each."""

    step: int
    x: list[str]
    lines: dict[int, np.ndarray]


def scope_return(
    scope: str, range_key: str, max_points: int, span: tuple | None = None
) -> ScopeReturn | None:
    """The chart of one range, or None when no competitor has a point in it. Three indexed
    queries, whatever the number of entries or the history (two when the caller has the
    scope's `span`, scope_span; () when it has none)."""
    if span is None:
        span = scope_span(scope)
    if not span:
        return None
    win = Window(span[0], span[1], range_key, max_points)
    n_grid = win.k1 - win.k0 + 1 if win.k1 >= win.k0 else 0
    factors = scope_growth(scope, win.step, win.k0, win.k1) if n_grid else {}
    end = epoch(span[1])
    edges = scope_edges(scope, (win.start, win.times[0]), end, win.step, win.k0, win.k1)
    lines = {
        competitor: y
        for competitor, y in compounded(win, n_grid, factors, edges, end).items()
        if not np.isnan(y).all()
    }
    return ScopeReturn(win.step, win.x(), lines) if lines else None


def compounded(
    win: Window, n_grid: int, factors: dict[int, np.ndarray], edges: list[Edge], end: int
) -> dict[int, np.ndarray]:
    """competitor id -> chain-linked return (%) at each of the window's times, from the stored
    growth factors and the entries at the range's edges."""
    n = len(win.times)
    born: dict[int, list[Edge]] = {}
    tail: dict[int, list[Edge]] = {}
    for e in edges:
        if n_grid and win.start <= e.first <= win.times[0]:
            born.setdefault(e.competitor, []).append(e)
        if win.tail is not None and e.last == end:
            tail.setdefault(e.competitor, []).append(e)
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
                np.array([e.at_k0 for e in mine], dtype=float),
                np.full(len(mine), np.nan),
                [(e.initial or float("nan"), e.first) for e in mine],
                win.start - 1,
                win.times[0],
            )
        if win.tail is not None:
            mine = tail.get(owner, [])
            f[-1] = overview.growth_at(
                np.array([e.total for e in mine], dtype=float),
                np.array([e.at_k1 if n_grid else np.nan for e in mine], dtype=float),
                [(e.initial or float("nan"), e.first) for e in mine],
                win.times[-2] if n > 1 else win.start - 1,
                win.tail,
            )
            alive[-1] = bool(mine)
        y = (np.cumprod(np.where(np.isnan(f), 1.0, f)) - 1.0) * 100.0
        y[~alive] = np.nan  # no entry alive: no point
        out[owner] = y
    return out


# --- the stored default chart ----------------------------------------------------------------


def chart_lines(
    scope: str, range_key: str, max_points: int, span: tuple | None = None
) -> dict[str, Any]:
    """A range's chart as the pages take it (and the default one is stored): the step, the
    sample times, and [competitor id, returns rounded to 3 decimals] per line, by id."""
    chart = scope_return(scope, range_key, max_points, span)
    if chart is None:
        return {"step_seconds": FINEST, "x": [], "lines": []}
    lines = [[competitor, numbers(y, 3)] for competitor, y in sorted(chart.lines.items())]
    return {"step_seconds": chart.step, "x": chart.x, "lines": lines}


def home_chart(scope: str, span: tuple | None = None) -> dict[str, Any]:
    """The scope's default chart (range ALL, HOME_POINTS) as stored. `span`: the scope's first
    and latest snapshot, as a writer that has just widened the scope's head has them; else
    read from the entries' heads. (The scope's head is the entries' span except between a
    deletion's commit and the rebuild it then runs, which stores the chart again.)"""
    chart = chart_lines(scope, DEFAULT_RANGE, HOME_POINTS, span)
    return {"format": HOME_CHART_FORMAT, "points": HOME_POINTS, **chart}


def store_home_charts(scopes) -> None:
    """Recompute and store these scopes' default charts. Call it holding the scopes' series
    locks (overview.lock_scopes), after the series writes, in the same transaction."""
    from cohorts.models import ScopeSeriesHead

    for scope in sorted(set(scopes)):
        ScopeSeriesHead.objects.filter(scope=scope).update(home_chart=home_chart(scope))


def stored_home_chart(scope: str) -> dict[str, Any] | None:
    """The scope's stored default chart, or None when there is none of the current format."""
    from cohorts.models import ScopeSeriesHead

    stored = (
        ScopeSeriesHead.objects.filter(scope=scope).values_list("home_chart", flat=True).first()
    )
    if (
        isinstance(stored, dict)
        and stored.get("format") == HOME_CHART_FORMAT
        and stored.get("points") == HOME_POINTS
    ):
        return stored
    return None
