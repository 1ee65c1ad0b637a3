"""Recomputing entries' series from their snapshot rows: whole (a backfill, a deleted row) or
from a time on (a write dated before later snapshots, a settlement correction), at a cost that
follows the history rewritten, not all of it. cohorts/series/write.py calls these under its locks.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal

import numpy as np
from django.db import connection
from django.db.models import OuterRef, Q, Subquery

from cohorts.series.grid import (
    CHUNK,
    DTYPE,
    LEVELS,
    empty,
    epoch,
    instant,
    pack,
    save_heads,
    unpack,
    upsert,
)

# (scope, competitor) and (step, chunk): an overview point a rebuild touched.
Touched = set[tuple[tuple[str, int], tuple[int, int]]]


def _snapshot_arrays(
    M, entry_ids: list[int], since: datetime | None = None
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """entry id -> (epoch seconds, totals) of its snapshots (at or after `since`), oldest first."""
    if not entry_ids:
        return {}
    table = connection.ops.quote_name(M.Snapshot._meta.db_table)
    marks = ",".join(["%s"] * len(entry_ids))
    # Times and totals as numbers in SQL: converting millions of datetimes and Decimals one by
    # one in Python costs more than the query.
    if connection.vendor == "postgresql":
        cols = "entry_id, floor(extract(epoch from ts))::bigint, total::float8"
    else:
        cols = "entry_id, CAST(strftime('%%s', ts) AS INTEGER), CAST(total AS REAL)"
    where, params = f"entry_id IN ({marks})", list[int | str | None](entry_ids)
    if since is not None:
        where += " AND ts >= %s"
        params.append(connection.ops.adapt_datetimefield_value(since))
    with connection.cursor() as cur:
        cur.execute(f"SELECT {cols} FROM {table} WHERE {where} ORDER BY entry_id, ts", params)
        rows = cur.fetchall()
    if not rows:
        return {}
    n = len(rows)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    secs = np.fromiter((r[1] for r in rows), dtype=np.int64, count=n)
    totals = np.fromiter((r[2] for r in rows), dtype=DTYPE, count=n)
    edges = np.flatnonzero(np.diff(ids)) + 1
    return {
        int(ids[lo]): (secs[lo:hi], totals[lo:hi])
        for lo, hi in zip(np.r_[0, edges], np.r_[edges, n], strict=True)
    }


def _chunks_of(secs: np.ndarray, totals: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """(step, chunk) -> values, for one entry's snapshots (times ascending)."""
    out = {}
    first, last = int(secs[0]), int(secs[-1])
    for step in LEVELS:
        k_lo, k_hi = -(-first // step), last // step
        if k_hi < k_lo:
            continue
        ks = np.arange(k_lo, k_hi + 1)
        vals = totals[np.searchsorted(secs, ks * step, side="right") - 1]  # last at or before
        for c in range(k_lo // CHUNK, k_hi // CHUNK + 1):
            lo, hi = max(k_lo, c * CHUNK), min(k_hi, c * CHUNK + CHUNK - 1)
            arr = empty()
            arr[lo - c * CHUNK : hi - c * CHUNK + 1] = vals[lo - k_lo : hi - k_lo + 1]
            out[(step, c)] = arr
    return out


def rebuild_entry_chunks(M, entry_ids: list[int], info: dict) -> Touched:
    """Recompute these entries' chunks and heads from their snapshot rows. Returns the
    ((scope, competitor), (step, chunk)) keys whose overview must be recomputed, old and new."""
    touched: Touched = {
        (info[e][:2], (step, c))
        for e, step, c in M.SeriesChunk.objects.filter(entry_id__in=entry_ids).values_list(
            "entry_id", "step", "chunk"
        )
    }
    M.SeriesChunk.objects.filter(entry_id__in=entry_ids).delete()
    arrays = _snapshot_arrays(M, entry_ids)
    chunks, heads = [], []
    for entry_id in entry_ids:
        if entry_id not in arrays:
            heads.append(M.SeriesHead(entry_id=entry_id))
            continue
        secs, totals = arrays[entry_id]
        for (step, c), arr in _chunks_of(secs, totals).items():
            chunks.append(M.SeriesChunk(entry_id=entry_id, step=step, chunk=c, values=pack(arr)))
            touched.add((info[entry_id][:2], (step, c)))
        heads.append(
            M.SeriesHead(
                entry_id=entry_id,
                first_ts=instant(int(secs[0])),
                last_ts=instant(int(secs[-1])),
                last_total=Decimal(f"{totals[-1]:.2f}"),
            )
        )
    M.SeriesChunk.objects.bulk_create(chunks, batch_size=500)
    save_heads(M, heads)
    return touched


def rewind_entry_chunks(M, entry_ids: list[int], info: dict, since: datetime) -> Touched:
    """Recompute these entries' grid points from `since` on (and their heads) from their
    snapshot rows, leaving earlier points alone: what a write in the past needs, at a cost that
    follows the history after `since`, not all of it. Returns the touched overview keys."""
    before = M.Snapshot.objects.filter(entry=OuterRef("pk"), ts__lt=since).order_by("-ts")
    prev = dict(
        M.Entry.objects.filter(pk__in=entry_ids)
        .annotate(prev=Subquery(before.values("ts")[:1]))
        .values_list("pk", "prev")
    )
    # An entry with nothing before `since` is rebuilt whole (cheap: its rows are all after).
    whole = [e for e in entry_ids if prev.get(e) is None]
    touched: Touched = rebuild_entry_chunks(M, whole, info) if whole else set()
    rest = [e for e in entry_ids if prev.get(e) is not None]
    if not rest:
        return touched
    oldest = min(prev[e] for e in rest)
    arrays = _snapshot_arrays(M, rest, oldest)  # from each entry's last row before `since`
    # Points after an entry's last row before `since` may be gone too (its rows after it were
    # deleted): every chunk from there on is recomputed.
    after = epoch(oldest) + 1
    where = Q()
    for step in LEVELS:
        where |= Q(step=step, chunk__gte=(-(-after // step)) // CHUNK)
    existing = {
        (e, step, c): unpack(raw).copy()
        for e, step, c, raw in M.SeriesChunk.objects.filter(where, entry_id__in=rest).values_list(
            "entry_id", "step", "chunk", "values"
        )
    }
    heads = {h.entry_id: h for h in M.SeriesHead.objects.filter(entry_id__in=rest)}
    mine: dict[tuple[int, int], list] = defaultdict(list)
    for key, arr in existing.items():
        mine[key[:2]].append((key[2], arr))
    at = epoch(since)
    for e in rest:
        secs, totals = arrays[e]  # never empty: the row before `since` is in it
        first = epoch(heads[e].first_ts) if heads[e].first_ts else int(secs[0])
        last = int(secs[-1])
        for step in LEVELS:
            k_from = min(-(-at // step), last // step + 1)  # recomputed from here on
            for c, arr in mine[(e, step)]:
                if c * CHUNK + CHUNK > k_from:
                    arr[max(0, k_from - c * CHUNK) :] = np.nan
                    touched.add((info[e][:2], (step, c)))
            k_lo, k_hi = max(k_from, -(-first // step)), last // step
            if k_hi < k_lo:
                continue
            ks = np.arange(k_lo, k_hi + 1)
            vals = totals[np.searchsorted(secs, ks * step, side="right") - 1]
            for c in range(k_lo // CHUNK, k_hi // CHUNK + 1):
                arr = existing.setdefault((e, step, c), empty())
                lo, hi = max(k_lo, c * CHUNK), min(k_hi, c * CHUNK + CHUNK - 1)
                arr[lo - c * CHUNK : hi - c * CHUNK + 1] = vals[lo - k_lo : hi - k_lo + 1]
                touched.add((info[e][:2], (step, c)))
        heads[e].first_ts = instant(first)
        heads[e].last_ts = instant(last)
        heads[e].last_total = Decimal(f"{totals[-1]:.2f}")
    keep = {k: a for k, a in existing.items() if not np.isnan(a).all()}
    for e, step, c in set(existing) - set(keep):
        M.SeriesChunk.objects.filter(entry_id=e, step=step, chunk=c).delete()
    upsert(
        M.SeriesChunk,
        [
            {"entry_id": e, "step": st, "chunk": c, "values": pack(a)}
            for (e, st, c), a in keep.items()
        ],
        ["entry", "step", "chunk"],
        ["values"],
    )
    save_heads(M, list(heads.values()))
    return touched
