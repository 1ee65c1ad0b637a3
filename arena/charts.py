"""Chart data for the pages: plain functions returning lists and dicts.

The browser draws them with static/arena/charts.js (Plotly). Data reaches the page only through
`json_script` or the JSON API, never inside an inline script.

Value series are downsampled in SQL: snapshots are grouped into equal time buckets (a multiple
of the 10-minute snapshot interval) so one entry never contributes more than MAX_POINTS points,
and all entries share one x axis so the payload carries each timestamp once.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Avg, F, FloatField, OuterRef, Subquery
from django.db.models.functions import Cast

from cohorts.models import Cohort, Entry, Snapshot

SNAPSHOT_STEP = 600  # seconds: snapshots are floored to 10-minute buckets
MAX_POINTS = 400  # per entry, per series response
LEADERBOARD_POINTS = 150  # grid points of the home page's overview chart
RANGES: dict[str, timedelta | None] = {
    "10M": timedelta(minutes=10),
    "1H": timedelta(hours=1),
    "1D": timedelta(days=1),
    "1W": timedelta(weeks=1),
    "1M": timedelta(days=30),
    "ALL": None,
}
DEFAULT_RANGE = "ALL"


def range_or_default(raw: str | None) -> str:
    raw = (raw or "").upper()
    return raw if raw in RANGES else DEFAULT_RANGE


def fmt_ts(ts: datetime) -> str:
    # Plotly reads "YYYY-MM-DD HH:MM" as a date; every time on the site is UTC.
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def bucket_seconds(span: timedelta, max_points: int = MAX_POINTS) -> int:
    """The smallest multiple of the snapshot step that keeps a span within max_points buckets."""
    steps = math.ceil(max(span.total_seconds(), 0) / SNAPSHOT_STEP / max_points)
    return SNAPSHOT_STEP * max(steps, 1)


def _bucket_sql() -> str:
    """SQL for the bucket index of `ts`, given params (start epoch, bucket seconds)."""
    if connection.vendor == "postgresql":
        return "FLOOR((EXTRACT(EPOCH FROM ts) - %s) / %s)"
    if connection.vendor == "sqlite":
        # Both operands are non-negative integers, so integer division is the floor.
        return "((CAST(strftime('%%s', ts) AS INTEGER) - %s) / %s)"
    raise NotImplementedError(f"series bucketing for {connection.vendor}")  # pragma: no cover


def _bucketed_totals(
    entry_ids: list[int], start: datetime, end: datetime, step: int
) -> list[tuple[int, int, float]]:
    """(entry id, bucket index, mean total) for snapshots in [start, end], one query."""
    if not entry_ids:
        return []
    table = connection.ops.quote_name(Snapshot._meta.db_table)
    start_epoch = int(start.timestamp())
    placeholders = ", ".join(["%s"] * len(entry_ids))
    bucket = _bucket_sql()
    sql = (
        f"SELECT entry_id, {bucket} AS b, AVG(total) FROM {table} "
        f"WHERE entry_id IN ({placeholders}) AND ts >= %s AND ts <= %s "
        "GROUP BY entry_id, b ORDER BY b"
    )
    with connection.cursor() as cur:
        adapt = connection.ops.adapt_datetimefield_value  # raw SQL: adapt like the ORM does
        cur.execute(sql, [start_epoch, step, *entry_ids, adapt(start), adapt(end)])
        return [(int(e), int(b), float(v)) for e, b, v in cur.fetchall()]


def _snapshot_span(entry_ids: list[int]) -> tuple[datetime | None, datetime | None]:
    if not entry_ids:
        return None, None
    # Per-entry first/last through the (entry, ts) unique index: two probes per entry instead
    # of a scan of every snapshot.
    firsts, lasts = [], []
    rows = Entry.objects.filter(pk__in=entry_ids).annotate(
        first=_edge_ts(descending=False), last=_edge_ts(descending=True)
    )
    for row in rows.values("first", "last"):
        if row["first"] is not None:
            firsts.append(row["first"])
            lasts.append(row["last"])
    if not firsts:
        return None, None
    return min(firsts), max(lasts)


def _edge_ts(descending: bool) -> Subquery:
    snaps = Snapshot.objects.filter(entry=OuterRef("pk"))
    return Subquery(snaps.order_by("-ts" if descending else "ts").values("ts")[:1])


def entry_label(entry: Entry, replicated: bool) -> str:
    name = entry.competitor.display_name
    return f"{name} #{entry.replicate}" if replicated else name


def cohort_series(cohort: Cohort, range_key: str = DEFAULT_RANGE, entries=None) -> dict[str, Any]:
    """Per-entry value series for one cohort, downsampled; the /series endpoint's payload.

    The range is anchored at the cohort's latest snapshot (not the wall clock), so replay and
    demo cohorts with a simulated clock chart the same way as live ones.
    """
    range_key = range_or_default(range_key)
    if entries is None:
        entries = list(Entry.objects.filter(cohort=cohort).select_related("competitor"))
    ids = [e.pk for e in entries]
    first, last = _snapshot_span(ids)
    payload: dict[str, Any] = {
        "cohort": cohort.pk,
        "kind": cohort.kind,
        "range": range_key,
        "ranges": list(RANGES),
        "value": "mean entry value (USD) per bucket",
        "bucket_seconds": SNAPSHOT_STEP,
        "x": [],
        "entries": [],
    }
    if first is None:
        return payload
    window = RANGES[range_key]
    start = first if window is None else max(first, last - window)
    step = bucket_seconds(last - start)
    rows = _bucketed_totals(ids, start, last, step)
    buckets = sorted({b for _, b, _ in rows})
    index = {b: i for i, b in enumerate(buckets)}
    values: dict[int, list[float | None]] = {i: [None] * len(buckets) for i in ids}
    for entry_id, b, v in rows:
        values[entry_id][index[b]] = round(v, 2)
    replicated = any(e.replicate > 1 for e in entries)
    payload["bucket_seconds"] = step
    payload["x"] = [fmt_ts(start + timedelta(seconds=b * step)) for b in buckets]
    payload["entries"] = [
        {
            "entry": e.pk,
            "competitor": e.competitor.slug,
            "replicate": e.replicate,
            "label": entry_label(e, replicated),
            "y": values[e.pk],
        }
        for e in sorted(entries, key=lambda e: (e.competitor.display_name, e.replicate))
    ]
    return payload


def entry_series(entry: Entry, range_key: str = DEFAULT_RANGE) -> dict[str, Any]:
    return cohort_series(entry.cohort, range_key, entries=[entry])


def scope_return_series(scope: str, max_points: int = LEADERBOARD_POINTS) -> dict[str, Any]:
    """Each competitor's mean return (%) across its entries in a scope, over time.

    Sampled on a grid of snapshot timestamps (whole hours once the span is long, so hourly
    roll-ups are still hit) rather than aggregating every snapshot: the query reads about
    grid points x entries rows whatever the history length.
    """
    entries = list(
        Entry.objects.filter(cohort__kind=scope)
        .select_related("competitor")
        .annotate(last=_edge_ts(descending=True))
        .values("pk", "competitor__slug", "competitor__display_name", "last", "cohort__week_start")
    )
    payload: dict[str, Any] = {"scope": scope, "x": [], "series": []}
    lasts = [e["last"] for e in entries if e["last"] is not None]
    if not lasts:
        return payload
    end = max(lasts)
    start = min(e["cohort__week_start"] for e in entries)
    span = (end - start).total_seconds()
    step = SNAPSHOT_STEP * max(1, math.ceil(span / SNAPSHOT_STEP / max_points))
    if step > 3600:
        step = 3600 * math.ceil(step / 3600)
    end_epoch = int(end.timestamp())
    grid = [
        datetime.fromtimestamp(end_epoch - k * step, tz=UTC)
        for k in range(max_points)
        if end_epoch - k * step >= start.timestamp()
    ]
    ratio = Cast(F("total"), FloatField()) / Cast(F("entry__initial_balance"), FloatField())
    rows = (
        Snapshot.objects.filter(entry__cohort__kind=scope, ts__in=grid)
        .values("entry__competitor__slug", "ts")
        .annotate(r=Avg(ratio))
        .order_by("ts")
    )
    by_slug: dict[str, dict[datetime, float]] = {}
    stamps: set[datetime] = set()
    for row in rows:
        by_slug.setdefault(row["entry__competitor__slug"], {})[row["ts"]] = row["r"]
        stamps.add(row["ts"])
    xs = sorted(stamps)
    names = {e["competitor__slug"]: e["competitor__display_name"] for e in entries}
    payload["x"] = [fmt_ts(t) for t in xs]
    payload["series"] = [
        {
            "competitor": slug,
            "label": names[slug],
            "y": [
                round((by_slug[slug][t] - 1) * 100, 3) if t in by_slug[slug] else None for t in xs
            ],
        }
        for slug in sorted(by_slug, key=lambda s: names[s])
    ]
    return payload


def price_history(points, outcomes: list[str], max_points: int = MAX_POINTS) -> dict[str, Any]:
    """Price lines per outcome from PricePoint rows (oldest first), thinned to max_points each."""
    per: dict[str, tuple[list[str], list[float]]] = {}
    for p in points:
        xs, ys = per.setdefault(p.outcome, ([], []))
        xs.append(fmt_ts(p.ts))
        ys.append(float(p.price))
    order = [o for o in outcomes if o in per] + [o for o in per if o not in outcomes]
    lines = []
    for outcome in order:
        xs, ys = per[outcome]
        stride = max(1, math.ceil(len(xs) / max_points))
        keep = list(range(0, len(xs), stride))
        if keep and keep[-1] != len(xs) - 1:
            keep.append(len(xs) - 1)  # always end on the latest quote
        lines.append({"label": outcome, "x": [xs[i] for i in keep], "y": [ys[i] for i in keep]})
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
