"""Chart data for the pages: plain functions returning lists and dicts.

The browser draws them with static/arena/charts.js (Plotly). Data reaches the page only through
`json_script` or the JSON API, never inside an inline script.

Value series are downsampled by sampling: the chart shows each entry's snapshot at up to
MAX_POINTS evenly spaced sample times (multiples of the 10-minute snapshot step, whole hours
once the step is an hour or more so hourly roll-ups are still hit), always ending on the
latest snapshot. Each sample is one index probe on Snapshot(entry, ts), so the cost depends
on the number of points drawn, never on the length of the history; a 20-week cohort costs
the same as a 2-week one. All entries share one x axis, so a timestamp travels once.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import OuterRef, Subquery

from cohorts.models import Cohort, Entry, Snapshot
from core.versions import data_version

SNAPSHOT_STEP = 600  # seconds: snapshots are floored to 10-minute buckets
HOUR = 3600
MAX_POINTS = 400  # per entry, per series response
LEADERBOARD_POINTS = 120  # sample times of the home page's overview chart
OVERVIEW_CACHE_SECONDS = 24 * 3600  # keyed by the latest snapshot, so never stale
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


def sample_step(span: timedelta, max_points: int = MAX_POINTS) -> int:
    """Seconds between samples: the smallest multiple of the snapshot step (of an hour once
    that is reached) that covers the span in at most max_points samples."""
    steps = math.ceil(max(span.total_seconds(), 0) / SNAPSHOT_STEP / max(max_points - 1, 1))
    step = SNAPSHOT_STEP * max(steps, 1)
    return HOUR * math.ceil(step / HOUR) if step >= HOUR else step


def sample_times(first: datetime, last: datetime, max_points: int = MAX_POINTS) -> list[datetime]:
    """Evenly spaced sample times in [first, last], oldest first, ending exactly on `last`."""
    step = sample_step(last - first, max_points)
    anchor = last
    if step >= HOUR:
        # Whole hours: rolled-up (hourly) snapshots sit on the hour.
        anchor = last.replace(minute=0, second=0, microsecond=0)
    times = []
    t = anchor
    while t >= first and len(times) < max_points - (anchor != last):
        times.append(t)
        t -= timedelta(seconds=step)
    times.reverse()
    if anchor != last:
        times.append(last)
    return times


def _probe_totals(pairs: list[tuple[int, datetime]]) -> list[tuple[int, datetime, Decimal]]:
    """(entry id, sample time, total) with each entry's last snapshot at or before each sample
    time (pairs are already inside the entry's life). A sparse history (a replay steps days at
    a time, retention rolls old snapshots up to hours) still has a value at every sample time.
    One backward index probe on Snapshot(entry, ts) per pair, in one query per batch."""
    out: list[tuple[int, datetime, Decimal]] = []
    for i in range(0, len(pairs), PROBE_BATCH):
        out.extend(_probe_batch(pairs[i : i + PROBE_BATCH]))
    return out


PROBE_BATCH = 4000  # pairs per statement (SQLite allows 32766 parameters)


def _probe_batch(pairs: list[tuple[int, datetime]]) -> list[tuple[int, datetime, Decimal]]:
    if not pairs:
        return []
    table = connection.ops.quote_name(Snapshot._meta.db_table)
    if connection.vendor == "postgresql":
        # Arrays go as array literals (epoch seconds for times): adapting thousands of Python
        # datetimes one by one costs more than the probes themselves.
        sql = (
            "SELECT p.entry_id, p.epoch, s.total FROM unnest(%s::bigint[], %s::bigint[]) "
            f"AS p(entry_id, epoch) CROSS JOIN LATERAL (SELECT total FROM {table} "
            "WHERE entry_id = p.entry_id AND ts <= to_timestamp(p.epoch) "
            "ORDER BY ts DESC LIMIT 1) s"
        )
        params = [
            "{" + ",".join(str(e) for e, _ in pairs) + "}",
            "{" + ",".join(str(int(t.timestamp())) for _, t in pairs) + "}",
        ]
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [
                (e, datetime.fromtimestamp(epoch, UTC), total) for e, epoch, total in cur.fetchall()
            ]
    # SQLite (and others): the pairs as a VALUES list, a correlated LIMIT 1 probe per pair.
    stamps = {connection.ops.adapt_datetimefield_value(t): t for _, t in pairs}
    values = ", ".join(["(%s, %s)"] * len(pairs))
    sql = (
        f"WITH p(entry_id, ts) AS (VALUES {values}) SELECT p.entry_id, p.ts, "
        f"(SELECT s.total FROM {table} s WHERE s.entry_id = p.entry_id AND s.ts <= p.ts "
        "ORDER BY s.ts DESC LIMIT 1) FROM p"
    )
    params = [x for e, t in pairs for x in (e, connection.ops.adapt_datetimefield_value(t))]
    field = Snapshot._meta.get_field("total")
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    return [(e, stamps[ts], field.to_python(total)) for e, ts, total in rows if total is not None]


def _edge_ts(descending: bool) -> Subquery:
    snaps = Snapshot.objects.filter(entry=OuterRef("pk"))
    return Subquery(snaps.order_by("-ts" if descending else "ts").values("ts")[:1])


def _spans(entry_ids: list[int]) -> dict[int, tuple[datetime, datetime]]:
    """First and last snapshot time per entry: two index probes per entry, one query."""
    rows = (
        Entry.objects.filter(pk__in=entry_ids)
        .annotate(first=_edge_ts(descending=False), last=_edge_ts(descending=True))
        .values_list("pk", "first", "last")
    )
    return {pk: (first, last) for pk, first, last in rows if first is not None}


def entry_label(entry: Entry, replicated: bool) -> str:
    name = entry.competitor.display_name
    return f"{name} #{entry.replicate}" if replicated else name


def cohort_series(cohort: Cohort, range_key: str = DEFAULT_RANGE, entries=None) -> dict[str, Any]:
    """Per-entry value series for one cohort, sampled; the /series endpoint's payload.

    The range is anchored at the cohort's latest snapshot (not the wall clock), so replay and
    demo cohorts with a simulated clock chart the same way as live ones.
    """
    range_key = range_or_default(range_key)
    if entries is None:
        entries = list(Entry.objects.filter(cohort=cohort).select_related("competitor"))
    spans = _spans([e.pk for e in entries])
    payload: dict[str, Any] = {
        "cohort": cohort.pk,
        "kind": cohort.kind,
        "range": range_key,
        "ranges": list(RANGES),
        "value": "entry value (USD) at each sample time",
        "step_seconds": SNAPSHOT_STEP,
        "x": [],
        "entries": [],
    }
    if not spans:
        return payload
    first = min(f for f, _ in spans.values())
    last = max(la for _, la in spans.values())
    window = RANGES[range_key]
    start = first if window is None else max(first, last - window)
    times = sample_times(start, last)
    pairs = [
        (pk, t) for pk, (f, la) in spans.items() for t in times if f <= t <= la
    ]  # only times inside an entry's own history are probed
    values: dict[int, dict[datetime, float]] = {}
    for entry_id, ts, total in _probe_totals(pairs):
        values.setdefault(entry_id, {})[ts] = round(float(total), 2)
    replicated = any(e.replicate > 1 for e in entries)
    payload["step_seconds"] = sample_step(last - start)
    payload["x"] = [fmt_ts(t) for t in times]
    payload["entries"] = [
        {
            "entry": e.pk,
            "competitor": e.competitor.slug,
            "competitor_simulated": e.competitor.simulated,
            "replicate": e.replicate,
            "label": entry_label(e, replicated),
            "y": [values.get(e.pk, {}).get(t) for t in times],
        }
        for e in sorted(entries, key=lambda e: (e.competitor.display_name, e.replicate))
    ]
    return payload


def entry_series(entry: Entry, range_key: str = DEFAULT_RANGE) -> dict[str, Any]:
    return cohort_series(entry.cohort, range_key, entries=[entry])


def scope_return_series(
    scope: str, max_points: int = LEADERBOARD_POINTS, range_key: str = DEFAULT_RANGE
) -> dict[str, Any]:
    """Each competitor's mean return (%) across its entries in a scope, over time.

    At each sample time, the mean over the competitor's entries that have a snapshot then of
    (value / initial balance - 1). Cached under a key made of the entries and their latest
    snapshot times, so a new snapshot (every 10 minutes) or a new entry computes it afresh.
    """
    entries = list(
        Entry.objects.filter(cohort__kind=scope)
        .annotate(first=_edge_ts(descending=False), last=_edge_ts(descending=True))
        .values_list(
            "pk", "competitor__slug", "competitor__display_name", "initial_balance", "first", "last"
        )
    )
    live = [e for e in entries if e[4] is not None]
    range_key = range_or_default(range_key)
    if not live:
        return {"scope": scope, "range": range_key, "x": [], "series": []}
    fingerprint = hashlib.sha256(
        repr(sorted((e[0], e[5].isoformat(), str(e[3])) for e in live)).encode()
    ).hexdigest()[:32]
    # The data version changes on every write (a settlement's final snapshot overwrites its
    # bucket's row without moving the latest time, so the fingerprint alone can go stale).
    key = f"arena:overview:{scope}:{range_key}:{max_points}:{fingerprint}:{data_version()}"
    payload = cache.get(key)
    if payload is None:
        payload = _scope_return_series(scope, live, max_points, RANGES[range_key])
        payload["range"] = range_key
        cache.set(key, payload, OVERVIEW_CACHE_SECONDS)
    return payload


def _scope_return_series(
    scope: str, entries: list[tuple], max_points: int, window: timedelta | None = None
) -> dict[str, Any]:
    first = min(e[4] for e in entries)
    last = max(e[5] for e in entries)
    if window is not None:
        first = max(first, last - window)
    times = sample_times(first, last, max_points)
    info = {e[0]: e for e in entries}
    pairs = [(e[0], t) for e in entries for t in times if e[4] <= t <= e[5]]
    sums: dict[tuple[str, datetime], list[float]] = {}
    for entry_id, ts, total in _probe_totals(pairs):
        _, slug, _, initial, _, _ = info[entry_id]
        ratio = float(total) / float(initial) if initial else None
        if ratio is not None:
            sums.setdefault((slug, ts), []).append(ratio)
    names = {e[1]: e[2] for e in entries}
    slugs = sorted({slug for slug, _ in sums}, key=lambda s: names[s])
    stamps = sorted({t for _, t in sums})
    return {
        "scope": scope,
        "x": [fmt_ts(t) for t in stamps],
        "series": [
            {
                "competitor": slug,
                "label": names[slug],
                "y": [
                    round((sum(v) / len(v) - 1) * 100, 3) if (v := sums.get((slug, t))) else None
                    for t in stamps
                ],
            }
            for slug in slugs
        ],
    }


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
