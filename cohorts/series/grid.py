"""The grid the chart series are stored on (cohorts/series/write.py explains what is kept and when).

Every series is a value at each multiple of a step since the Unix epoch, for every step of
LEVELS, CHUNK points to a row, packed little-endian float64 with NaN where there is no value.
A new snapshot only ever adds points at the end of a grid (or rewrites the latest), which is
what lets a write touch a few rows and a read fetch a few rows, whatever the history's length.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np

# Seconds between grid points. A chart picks the smallest step that draws its range within its
# point budget; the ladder is dense enough that a range never gets much under two thirds of it.
LEVELS = (600, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 345600, 604800)
FINEST = LEVELS[0]
CHUNK = 128  # points per row: 1 KiB, stored inline by PostgreSQL (no TOAST)
DTYPE = np.dtype("<f8")
# Cohort.Kind values (this module also serves migrations).
SCOPES = ("live", "replay", "demo", "rehearsal")


def live_models():
    # The real models; a migration passes its historical ones instead.
    from agents.models import Competitor
    from cohorts.models import (
        Entry,
        ScopeSeriesChunk,
        ScopeSeriesHead,
        SeriesChunk,
        SeriesHead,
        Snapshot,
    )

    return SimpleNamespace(
        Competitor=Competitor,
        Entry=Entry,
        Snapshot=Snapshot,
        SeriesHead=SeriesHead,
        SeriesChunk=SeriesChunk,
        ScopeSeriesHead=ScopeSeriesHead,
        ScopeSeriesChunk=ScopeSeriesChunk,
    )


def epoch(ts: datetime) -> int:
    return int(ts.timestamp())


def instant(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def pack(values: np.ndarray) -> bytes:
    return values.astype(DTYPE, copy=False).tobytes()


def unpack(raw) -> np.ndarray:
    return np.frombuffer(raw, dtype=DTYPE)


def empty() -> np.ndarray:
    return np.full(CHUNK, np.nan, dtype=DTYPE)


def upsert(model, rows: list[dict], unique: list[str], update: list[str]) -> None:
    """INSERT the rows (dicts keyed by attname) .. ON CONFLICT (unique) DO UPDATE the `update`
    columns, or DO NOTHING when there are none.

    Plain rows through markets.bulk.insert_rows: bulk_create builds a model instance per row
    and compiles every value through the field machinery, which cost more than the write itself
    on every snapshot tick (thousands of chunk rows a day)."""
    from django.db import connections

    from markets.bulk import insert_rows

    if not rows:
        return
    qn = connections[model.objects.db].ops.quote_name
    target = ", ".join(qn(model._meta.get_field(f).column) for f in unique)
    if update:
        columns = [qn(model._meta.get_field(f).column) for f in update]
        action = "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in columns)
    else:
        action = "DO NOTHING"
    insert_rows(model, rows, conflict=f"ON CONFLICT ({target}) {action}")


def save_heads(M, heads: list) -> None:
    # INSERT .. ON CONFLICT DO UPDATE: one plain statement, where bulk_update builds a CASE
    # expression per row and field (most of a tick's CPU with hundreds of entries).
    upsert(
        M.SeriesHead,
        [
            {
                "entry_id": h.entry_id,
                "first_ts": h.first_ts,
                "last_ts": h.last_ts,
                "last_total": h.last_total,
            }
            for h in heads
        ],
        ["entry"],
        ["first_ts", "last_ts", "last_total"],
    )


def step_for(span: timedelta | float, max_points: int) -> int:
    """The smallest step that draws `span` in at most max_points points (a range's last point
    may fall between grid points and is added on its own)."""
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    for step in LEVELS:
        if math.floor(max(seconds, 0) / step) + 2 <= max_points:
            return step
    return LEVELS[-1]


def assemble(rows, step: int, k0: int, k1: int) -> dict:
    """owner -> values at grid indices k0..k1 of `step`, from (owner, step, chunk, raw) rows."""
    out: dict = {}
    n = k1 - k0 + 1
    for owner, row_step, c, raw in rows:
        if row_step != step or n <= 0:
            continue
        arr = out.get(owner)
        if arr is None:
            arr = out[owner] = np.full(n, np.nan, dtype=DTYPE)
        values = unpack(raw)
        lo, hi = max(k0, c * CHUNK), min(k1, c * CHUNK + CHUNK - 1)
        if lo <= hi:
            arr[lo - k0 : hi - k0 + 1] = values[lo - c * CHUNK : hi - c * CHUNK + 1]
    return out
