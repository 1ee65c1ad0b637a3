"""Charts as the pages embed them and the API serves them, each read in one pass:

    read      the series stored on write (cohorts/series/), and the rows a chart names
    name      each line's competitor (one query for the ones the caller has not read)
    colour    each line's fixed style (web/colours.py)
    shape     the payload (web/charts.py, pure)
    annotate  the events that moved the chart: cohort weeks and lifecycle, resolutions, staff
              corrections (the scope's cohorts through web/selectors.py)
    encode    the JSON text, once (ChartJSON)

Each step is a call to a module that hands its result back and never calls into this one or
into another step's module, so a chart's data goes one way through.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import reduce
from typing import Any, NamedTuple

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, F, IntegerField, Max, Q, Window
from django.db.models.functions import Mod, RowNumber

from agents.models import Competitor
from cohorts.models import Cohort, Entry, Position, Snapshot
from cohorts.series import chart as series_chart
from cohorts.series import write as series
from core import clock
from markets.models import Market, PricePoint, ResolutionChange
from web import charts, colours, selectors
from web.selectors import EVENT_LIMIT

# --- a market's prices ---------------------------------------------------------------------


class Quote(NamedTuple):
    """A quote as the price chart reads it (charts.price_history): a chart reads hundreds,
    which as model instances cost more to build than the database spends finding them."""

    outcome: str
    ts: datetime
    price: Decimal


def market_price_points(
    market: Market, since=None, max_points: int = charts.MAX_POINTS
) -> list[Quote]:
    """The market's quotes since `since` (oldest first), at most `max_points` per outcome
    spread evenly over the whole range, each line's latest quote always kept. Thinned in the
    database (every k-th row per outcome): a busy market has tens of thousands of quotes, and
    keeping only the newest rows would draw "ALL" as its last few days."""
    qs = PricePoint.objects.filter(market=market)
    if since is not None:
        qs = qs.filter(ts__gte=since)
    counts = dict(
        qs.order_by().values("outcome").annotate(n=Count("*")).values_list("outcome", "n")
    )
    # Room for each line's latest quote and for the price in force at the range's start
    # (market_price_chart): a line of max_points + 1 would be halved by charts.price_history.
    stride = max(1, math.ceil(max(counts.values(), default=0) / (max_points - 2)))
    if stride > 1:
        # Numbered in the order of the (market, outcome, ts) unique index, which is unique per
        # outcome too: PostgreSQL reads the rows in that order instead of sorting them all. The
        # latest quote of each outcome is the row numbered with its count, known from above
        # (a second window counting each partition would buffer every row again).
        qs = qs.annotate(
            row=Window(RowNumber(), partition_by=[F("outcome")], order_by=[F("ts").asc()])
        )
        latest = [Q(outcome=o, row=n) for o, n in counts.items()]
        skip = Mod(F("row") - 1, stride, output_field=IntegerField())
        qs = qs.annotate(skip=skip).filter(reduce(operator.or_, latest, Q(skip=0)))
        # Sorted here, not by the query: Django would sort every row before the filter.
        rows = sorted(qs.order_by().values_list("ts", "id", "outcome", "price"))
    else:
        rows = list(qs.order_by("ts", "id").values_list("ts", "id", "outcome", "price"))
    return [Quote(outcome, ts, price) for ts, _, outcome, price in rows]


def market_price_chart(market: Market, range_raw: str | None = None) -> dict[str, Any]:
    """The market's price chart for a range (see charts.RANGES), anchored at the chart's end:
    the resolution, or the latest quote. Each line starts with the price in force at the start
    of the range and is carried to the end; the resolution and staff changes are annotated."""
    range_key = charts.range_or_default(range_raw)
    last_ts = PricePoint.objects.filter(market=market).aggregate(m=Max("ts"))["m"]
    staff = list(
        market.resolution_changes.filter(source=Market.ResolvedBy.ADMIN).order_by("changed_at")
    )
    candidates = [t for t in (last_ts, market.last_priced_at) if t is not None]
    if market.status in (Market.Status.RESOLVED, Market.Status.VOID) and market.resolved_at:
        candidates.append(market.resolved_at)
    candidates += [rc.changed_at for rc in staff]
    until = max(candidates) if candidates and last_ts is not None else None
    window = charts.RANGES[range_key]
    since = until - window if window is not None and until is not None else None
    points = market_price_points(market, since)
    if since is not None:
        starts = []
        for outcome in market.outcomes or []:
            before = (
                PricePoint.objects.filter(market=market, outcome=outcome, ts__lt=since)
                .order_by("-ts")
                .values_list("price", flat=True)
                .first()
            )
            if before is not None:
                starts.append(Quote(outcome, since, before))  # the price in force at the start
        points = starts + points
    payload = charts.price_history(points, list(market.outcomes or []), until=until)
    payload["range"] = range_key
    events = []
    if market.status == Market.Status.RESOLVED and market.resolved_at:
        events.append(
            _event(market.resolved_at, "resolution", f"resolved {market.resolved_outcome}")
        )
    elif market.status == Market.Status.VOID and market.resolved_at:
        events.append(_event(market.resolved_at, "resolution", "void"))
    for rc in staff:
        word = CHANGE_WORDS.get(rc.to_status, "changed")
        outcome = f" to {rc.to_outcome}" if rc.to_outcome else ""
        events.append(_event(rc.changed_at, "correction", f"staff: {word}{outcome}", rc.reason))
    xs = sorted(x for line in payload["lines"] for x in line["x"])
    payload["annotations"] = _within(events, [xs[0], xs[-1]] if xs else [])
    return payload


# --- chart decorations: colours and the events that moved a chart ---------------------------


def _within(events: list[dict], xs: list[str]) -> list[dict]:
    if not xs:
        return []
    lo, hi = xs[0], xs[-1]
    kept = sorted((e for e in events if lo <= e["x"] <= hi), key=lambda e: (e["x"], e["label"]))
    return kept[-EVENT_LIMIT:]


def annotate_cohort(
    payload: dict,
    cohort: Cohort,
    entry_ids: list[int] | None = None,
    corrections=None,
    frozen: list[tuple[int, datetime]] | None = None,
) -> dict:
    """A cohort's (or one entry's) value series with the events that moved it: the cohort's
    weekly decisions and lifecycle, and staff corrections of markets its entries held
    (`corrections`: selectors.staff_corrections of the whole cohort, or of the one entry of
    `entry_ids`, `frozen`: selectors.cohort_universes' weeks, when the caller has them)."""
    if payload.get("x"):
        events = cohort_events(cohort, frozen) + correction_events([cohort], entry_ids, corrections)
        payload["annotations"] = _within(events, payload["x"])
    return payload


def annotate_overview(
    payload: dict,
    scope: str,
    cohorts: list[Cohort] | None = None,
    staff_corrections: bool | None = None,
) -> dict:
    """The home chart with cohorts opening and staff corrections in the scope (`cohorts`:
    selectors.scope_cohorts, when the caller has them)."""
    if payload.get("x"):
        events = _scope_events(scope, cohorts, staff_corrections)
        payload["annotations"] = _within(events, payload["x"])
    return payload


@dataclass(frozen=True)
class ChartJSON:
    """A chart's finished payload as JSON text, encoded once: a page embeds it (`chart_script`
    tag) and the API returns it as it is, byte for byte the same. The text has <, > and &
    escaped as \\u003C etc. (what json_script does), which is still the same JSON."""

    text: str
    x: bool  # has points (the templates' "no snapshots yet" test)
    step_seconds: int
    # The home chart's lines at the end of its range, highest first: (name, colour, percent).
    # The table beside the chart prints them, so the chart and its table show one measure.
    ends: tuple[tuple[str, str, float], ...] = ()

    @classmethod
    def of(cls, payload: dict) -> ChartJSON:
        # orjson: a year of points is some ten thousand floats, which the standard library
        # writes at a third of a cohort page's render; orjson's text is the same JSON
        # (non-ASCII as UTF-8 rather than \u escapes, NaN as null), anything it does not
        # know is written as Django's encoder writes it.
        text = orjson.dumps(payload, default=_django_json, option=CHART_JSON_OPTIONS).decode()
        return cls(
            text.translate(JSON_SCRIPT_ESCAPES),
            bool(payload.get("x")),
            int(payload.get("step_seconds") or 0),
            line_ends(payload.get("series") or []),
        )


def line_ends(series: list[dict]) -> tuple[tuple[str, str, float], ...]:
    """Each line's last value (None-free), highest first; lines without one are left out."""
    ends = []
    for s in series:
        last = next((v for v in reversed(s.get("y") or []) if v is not None), None)
        if last is not None and last == last:  # NaN is no value
            ends.append((str(s.get("label") or ""), str(s.get("color") or ""), float(last)))
    return tuple(sorted(ends, key=lambda e: -e[2]))


CHART_JSON_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_SERIALIZE_NUMPY
)
_django_json = DjangoJSONEncoder().default

JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


def overview_payload(
    scope: str,
    range_key: str | None = None,
    competitors: dict[int, Competitor] | None = None,
    max_points: int = charts.OVERVIEW_POINTS,
) -> dict[str, Any]:
    """The home chart's lines, named and coloured, before annotation. The default chart is read
    as stored on write; another range is computed from the stored series in three indexed
    queries (cohorts/series/chart.py). `competitors`: the ones the caller has read, by id."""
    range_key = charts.range_or_default(range_key)
    default = range_key == charts.DEFAULT_RANGE and max_points == charts.OVERVIEW_POINTS
    stored = series_chart.stored_home_chart(scope) if default else None
    if stored is None:  # another range, or none stored yet (a database migrated since)
        stored = series_chart.chart_lines(scope, range_key, max_points)
    names = _names([pk for pk, _ in stored["lines"]], competitors or {})
    styles = {pk: colours.style_for(pk, scope=scope) for pk in names}
    return charts.overview_payload(scope, range_key, stored, names, styles)


def overview_chart(
    scope: str | None,
    range_key: str,
    cohorts: list[Cohort] | None = None,
    staff_corrections: bool | None = None,
    competitors: dict[int, Competitor] | None = None,
) -> ChartJSON:
    """The home chart of a scope (None: the scope the site shows by default), annotated and
    encoded. `cohorts`: the scope's, when the caller has them (selectors.scope_cohorts);
    `staff_corrections`: whether any staff correction exists at all, when the caller knows
    (HomeFacts); `competitors`: the ones the caller has read, by id (the lines' names)."""
    scope = selectors.scope_or_default(scope)
    payload = overview_payload(scope, range_key, competitors)
    return ChartJSON.of(annotate_overview(payload, scope, cohorts, staff_corrections))


def cohort_payload(
    cohort: Cohort, range_key: str | None = None, entries: list[Entry] | None = None
) -> dict[str, Any]:
    """A cohort's value series per entry, coloured, before annotation (`entries`: with their
    competitors, when the caller has read them)."""
    range_key = charts.range_or_default(range_key)
    if entries is None:
        entries = list(Entry.objects.filter(cohort=cohort).select_related("competitor"))
    heads = _heads_of(entries)
    win = charts.cohort_window(heads, range_key)
    grid = series.entry_values(list(heads), win.step, win.k0, win.k1) if win else {}
    styles = {
        e.pk: colours.style_for(e.competitor_id, e.replicate, scope=cohort.kind) for e in entries
    }
    return charts.cohort_payload(cohort, range_key, entries, heads, grid, win, styles)


def cohort_chart(
    cohort: Cohort,
    range_key: str,
    entries=None,
    only: list[int] | None = None,
    corrections=None,
    frozen: list[tuple[int, datetime]] | None = None,
):
    """A cohort's value chart (all entries, or the entries `only`). `entries` (with their
    competitors), `corrections` (selectors.staff_corrections of the cohort, or of the one
    entry `only` names) and `frozen` (selectors.cohort_universes' weeks) save queries when the
    caller has them."""
    rows = entries
    if rows is None:
        # With their series heads: the chart's range reads them (_heads_of), one query fewer.
        rows = Entry.objects.filter(cohort=cohort).select_related("competitor", "series_head")
        if only is not None:
            rows = rows.filter(pk__in=only)
    payload = cohort_payload(cohort, range_key, list(rows))
    return ChartJSON.of(annotate_cohort(payload, cohort, only, corrections, frozen))


def _names(ids: list[int], known: dict[int, Competitor]) -> dict[int, tuple[str, str]]:
    """competitor id -> (slug, display name): from `known`, the rest in one query."""
    out = {pk: (known[pk].slug, known[pk].display_name) for pk in ids if pk in known}
    missing = [pk for pk in ids if pk not in out]
    if missing:
        rows = Competitor.objects.filter(pk__in=missing).values_list("pk", "slug", "display_name")
        out.update((pk, (slug, name)) for pk, slug, name in rows)
    return out


def _heads_of(entries) -> dict[int, tuple[datetime, datetime, Decimal]]:
    """The entries' series heads (cohorts.series.write.entry_heads), from the heads they carry when the caller read
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


def _scope_events(
    scope: str, cohorts: list[Cohort] | None = None, staff_corrections: bool | None = None
) -> list[dict]:
    if cohorts is None:
        cohorts = selectors.scope_cohorts(scope)
    events = [
        _event(c.week_start, "cohort", f"{c.week_start:%b %d} cohort opens", str(c))
        for c in cohorts
    ]
    return events + correction_events(cohorts, staff_corrections=staff_corrections)


def _event(at, kind: str, label: str, detail: str = "") -> dict:
    return {"x": charts.fmt_ts(at), "kind": kind, "label": label, "detail": detail}


def cohort_events(cohort: Cohort, frozen: list[tuple[int, datetime]] | None = None) -> list[dict]:
    """Moments that move every entry of a cohort: each week's decisions (`frozen`: when each
    week's universe was frozen, when the caller has read them), the end of deciding,
    completion."""
    if frozen is None:
        frozen = list(cohort.universes.order_by("week").values_list("week", "frozen_at"))
    events = []
    for week, frozen_at in frozen:
        events.append(_event(frozen_at, "cohort", f"week {week} decisions"))
    decisions_end = cohort.week_start + timedelta(weeks=cohort.decision_weeks)
    if cohort.status != Cohort.Status.ACTIVE:
        events.append(_event(decisions_end, "cohort", "decisions end, tracking"))
    if cohort.completed_at:
        events.append(_event(cohort.completed_at, "cohort", "completed"))
    return events


CHANGE_WORDS = {
    Market.Status.RESOLVED: "re-resolved",
    Market.Status.VOID: "voided",
    Market.Status.OPEN: "reopened",
    Market.Status.CLOSED: "reopened",
}


def correction_events(
    cohorts: list[Cohort],
    entry_ids: list[int] | None = None,
    known=None,
    staff_corrections: bool | None = None,
) -> list[dict]:
    """Staff resolution changes of markets that the cohorts' entries (or the given entries)
    held, placed where they took effect on each cohort's clock.

    A live cohort's clock is the wall clock: the change's own time. A replay or demo cohort
    runs on a simulated clock, and the settlement rewrote its latest snapshot of the moment
    (cohorts.snapshots.write_settlement_snapshots): the line goes on the cohort's last snapshot
    at or before the change, or on its latest snapshot when its clock is still ahead of the
    wall clock (a replay of questions that resolve in the future).
    """
    if not cohorts:
        return []
    if known is not None and len(cohorts) == 1 and len(known) < EVENT_LIMIT:
        # `known` are all the staff changes of markets the one cohort's entries held (fewer
        # than the limit, so none was cut off): the same rows the queries below would read.
        changes = sorted(known, key=lambda rc: (rc.changed_at, rc.pk))
        if not changes:
            return []  # nothing to place: a replay's snapshots need not be read either
        held = {(rc.market_id, cohorts[0].pk) for rc in changes}
    elif staff_corrections is False or (
        staff_corrections is None
        and not ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN).exists()
    ):
        return []  # staff corrections are rare: one cheap test spares the join below
    else:
        positions = Position.objects.filter(entry__cohort__in=cohorts)
        if entry_ids is not None:
            positions = positions.filter(entry_id__in=entry_ids)
        changes = list(
            ResolutionChange.objects.filter(
                source=Market.ResolvedBy.ADMIN, market_id__in=positions.values("market_id")
            )
            .select_related("market")
            .order_by("changed_at", "pk")[:EVENT_LIMIT]
        )
        if not changes:
            return []
        # Only the changed markets' holders: the cohorts' other positions are not needed.
        changed = {rc.market_id for rc in changes}
        held = set(
            positions.filter(market_id__in=changed)
            .values_list("market_id", "entry__cohort_id")
            .distinct()
        )
    simulated = [c for c in cohorts if c.kind != Cohort.Kind.LIVE]
    marks: dict[int, dict] = {}
    if simulated:
        # Per cohort, its latest snapshot and its latest at or before each change (one query).
        per_change = {f"c{rc.pk}": Max("ts", filter=Q(ts__lte=rc.changed_at)) for rc in changes}
        for row in (
            Snapshot.objects.filter(entry__cohort__in=simulated)
            .values("entry__cohort_id")
            .annotate(last=Max("ts"), **per_change)
        ):
            marks[row["entry__cohort_id"]] = row
    now = clock.now()
    events = {}
    for rc in changes:
        word = CHANGE_WORDS.get(rc.to_status, "changed")
        outcome = f" to {rc.to_outcome}" if rc.to_outcome else ""
        label = f"staff: {word}{outcome}"
        detail = f"{rc.market.question[:80]} ({rc.reason[:120]})"
        for c in cohorts:
            if (rc.market_id, c.pk) not in held:
                continue
            at = rc.changed_at
            mark = marks.get(c.pk)
            if c.kind != Cohort.Kind.LIVE and mark:
                before = mark[f"c{rc.pk}"]
                at = mark["last"] if mark["last"] > now or before is None else before
            ev = _event(at, "correction", label, detail)
            events[(rc.pk, ev["x"])] = ev
    return list(events.values())
