"""Chart series kept up to date as snapshots are written, so no page computes one on a read.

What is stored. For every entry and every step of LEVELS (10 minutes to a week), the entry's
value at each multiple of the step since the Unix epoch (its "grid"), CHUNK points to a row
(SeriesChunk, packed float64, NaN where the entry has no value). The value at a grid time is the
total of the entry's last snapshot at or before that time, within the entry's life (its first to
its latest snapshot): sparse snapshots (a replay's, the demo's hourly ones) hold until the next
one, so a chart is never blank where data exists. Per scope (live / replay / demo) and
competitor, the same grids hold the mean return in percent over the competitor's entries alive
at that time (ScopeSeriesChunk): the home page's overview. SeriesHead and ScopeSeriesHead keep
each entry's and each scope's first and latest snapshot.

Why a fixed grid on the epoch: a new snapshot only ever adds points at the end of a grid (or
rewrites the latest), so a tick rewrites the last chunk of the few steps it reaches, and every
entry ticked at one instant touches the same (step, chunk) rows. A chart of any range reads
the chunks of the one step that draws it in at most its point budget: a few indexed rows,
whatever the length of the history.

When it is maintained: `record()` runs in the snapshot upsert's own transaction
(cohorts/snapshots.py), so every path that writes snapshots (ticks, settlement's final
snapshots, replays, the demo) keeps the series. A snapshot older than an entry's latest (out of
order) rebuilds that entry from its snapshot rows, and so does every settlement for the entries
it touched, from the earliest row it rewrote (`rebuild_entries`, called by
cohorts.snapshots.write_settlement_snapshots in the settlement's transaction). Deleting
entries rebuilds their competitor's overview once the deletion commits. `arena rebuild-series`
and migration 0004 build everything from the snapshot table.

Locking: writers lock the entries' SeriesHead rows (in pk order, before the snapshot upsert)
and then the scope's ScopeSeriesHead row, so two writers of one entry serialise and an
overview chunk is always recomputed from committed entry chunks.

Retention: rolling 10-minute snapshots up to hourly ones leaves the stored series alone (they
were computed from the finer data); a rebuild computes from what is left.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from types import SimpleNamespace

import numpy as np
from django.db import connection, transaction
from django.db.models import Max, Min, Q

from core.versions import data_changed, values_changed

# Seconds between grid points. A chart picks the smallest step that draws its range within its
# point budget; the ladder is dense enough that a range never gets much under two thirds of it.
LEVELS = (600, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 345600, 604800)
FINEST = LEVELS[0]
CHUNK = 128  # points per row: 1 KiB, stored inline by PostgreSQL (no TOAST)
DTYPE = np.dtype("<f8")
SCOPES = ("live", "replay", "demo")  # Cohort.Kind values (this module also serves migrations)
REBUILD_BATCH = 50  # entries per snapshot query when rebuilding


def _models():
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


def step_for(span: timedelta | float, max_points: int) -> int:
    """The smallest step that draws `span` in at most max_points points (a range's last point
    may fall between grid points and is added on its own)."""
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    for step in LEVELS:
        if math.floor(max(seconds, 0) / step) + 2 <= max_points:
            return step
    return LEVELS[-1]


def _pack(values: np.ndarray) -> bytes:
    return values.astype(DTYPE, copy=False).tobytes()


def _unpack(raw) -> np.ndarray:
    return np.frombuffer(raw, dtype=DTYPE)


def _empty() -> np.ndarray:
    return np.full(CHUNK, np.nan, dtype=DTYPE)


# --- writing --------------------------------------------------------------------------------


def lock(entry_ids: Iterable[int]) -> dict:
    """Lock (creating them first) the SeriesHead rows of these entries, in pk order; each head
    comes with its entry and cohort (not locked).

    Called by every snapshot writer before its upsert, so the order of locks is always: entry
    rows of the game (settlement), series heads, snapshot rows, scope heads.
    """
    M = _models()
    ids = sorted(set(entry_ids))
    M.SeriesHead.objects.bulk_create(
        [M.SeriesHead(entry_id=i) for i in ids], ignore_conflicts=True, batch_size=1000
    )
    heads = (
        M.SeriesHead.objects.select_for_update(of=("self",))
        .select_related("entry__cohort")
        .filter(entry_id__in=ids)
        .order_by("entry_id")
    )
    return {h.entry_id: h for h in heads}


def _info_of(heads: dict) -> dict[int, tuple[str, int, float]]:
    """entry id -> (scope, competitor id, initial balance)."""
    return {
        i: (h.entry.cohort.kind, h.entry.competitor_id, float(h.entry.initial_balance))
        for i, h in heads.items()
    }


@dataclass
class _Patch:
    """Grid points to write into one chunk: offsets within the chunk and their values."""

    offsets: list
    values: list


def _fill(patches: dict, entry_id: int, after: int, upto: int, hold: float, value: float) -> None:
    """Grid points k*step in (after, upto] of every level: `value` at upto itself, `hold` (the
    previous snapshot's total) before it."""
    for step in LEVELS:
        k_lo, k_hi = after // step + 1, upto // step
        if k_hi < k_lo:
            continue
        ks = np.arange(k_lo, k_hi + 1)
        vals = np.full(len(ks), hold, dtype=DTYPE)
        if k_hi * step == upto:
            vals[-1] = value
        for c in np.unique(ks // CHUNK):
            mask = ks // CHUNK == c
            patch = patches.setdefault((entry_id, step, int(c)), _Patch([], []))
            patch.offsets.extend((ks[mask] - c * CHUNK).tolist())
            patch.values.extend(vals[mask].tolist())


def record(heads: dict, rows: Iterable[tuple[int, datetime, Decimal]]) -> None:
    """Fold snapshots just written ((entry id, ts, total)) into the series, in the writer's
    transaction; `heads` comes from `lock()`."""
    M = _models()
    per_entry: dict[int, list] = defaultdict(list)
    for entry_id, ts, total in rows:
        per_entry[entry_id].append((epoch(ts), ts, total))
    if not per_entry:
        return
    patches: dict[tuple[int, int, int], _Patch] = {}
    rewind: dict[int, datetime] = {}  # entry -> the oldest rewritten past bucket
    for entry_id, points in per_entry.items():
        head = heads[entry_id]
        points.sort(key=lambda p: p[0])
        for s, ts, total in points:
            if head.last_ts is None:
                head.first_ts = ts
            else:
                last = epoch(head.last_ts)
                if s < last:  # a bucket older than the latest: recompute from there
                    rewind[entry_id] = min(ts, rewind.get(entry_id, ts))
                    break
                if s > last:
                    _fill(patches, entry_id, last, s, float(head.last_total), float(total))
                    head.last_ts, head.last_total = ts, total
                    continue
            _fill(patches, entry_id, s - 1, s, float(total), float(total))
            head.last_ts, head.last_total = ts, total
    info = _info_of(heads)
    touched: dict[tuple[str, int], set] = defaultdict(set)
    _apply_patches(M, patches)
    for entry_id, step, c in patches:
        touched[info[entry_id][:2]].add((step, c))
    _save_heads(M, [heads[i] for i in per_entry])
    for entry_id, since in rewind.items():
        # Reads the rows just written too; its heads replace the ones saved above.
        for key, point in _rewind_entry_chunks(M, [entry_id], info, since):
            touched[key].add(point)
        heads[entry_id].refresh_from_db(fields=["first_ts", "last_ts", "last_total"])
    _refresh_scopes(M, touched, info, [heads[i] for i in per_entry])


def _save_heads(M, heads: list) -> None:
    # INSERT .. ON CONFLICT DO UPDATE: one plain statement, where bulk_update builds a CASE
    # expression per row and field (most of a tick's CPU with hundreds of entries).
    M.SeriesHead.objects.bulk_create(
        heads,
        update_conflicts=True,
        unique_fields=["entry"],
        update_fields=["first_ts", "last_ts", "last_total"],
        batch_size=1000,
    )


def _entry_info(M, entry_ids) -> dict[int, tuple[str, int, float]]:
    """entry id -> (scope, competitor id, initial balance)."""
    rows = M.Entry.objects.filter(pk__in=list(entry_ids)).values_list(
        "pk", "cohort__kind", "competitor_id", "initial_balance"
    )
    return {pk: (kind, comp, float(initial)) for pk, kind, comp, initial in rows}


def _apply_patches(M, patches: dict) -> None:
    if not patches:
        return
    entry_ids = {k[0] for k in patches}
    steps = {k[1] for k in patches}
    chunks = {k[2] for k in patches}
    existing = {
        (e, s, c): _unpack(v)
        for e, s, c, v in M.SeriesChunk.objects.filter(
            entry_id__in=entry_ids, step__in=steps, chunk__in=chunks
        ).values_list("entry_id", "step", "chunk", "values")
        if (e, s, c) in patches
    }
    out = []
    for key, patch in patches.items():
        arr = existing[key].copy() if key in existing else _empty()
        arr[patch.offsets] = patch.values
        out.append(M.SeriesChunk(entry_id=key[0], step=key[1], chunk=key[2], values=_pack(arr)))
    M.SeriesChunk.objects.bulk_create(
        out,
        update_conflicts=True,
        unique_fields=["entry", "step", "chunk"],
        update_fields=["values"],
        batch_size=500,
    )


# --- rebuilding from the snapshot table ---------------------------------------------------


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
    where, params = f"entry_id IN ({marks})", list(entry_ids)
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
            arr = _empty()
            arr[lo - c * CHUNK : hi - c * CHUNK + 1] = vals[lo - k_lo : hi - k_lo + 1]
            out[(step, c)] = arr
    return out


def _rebuild_entry_chunks(M, entry_ids: list[int], info: dict) -> set:
    """Recompute these entries' chunks and heads from their snapshot rows. Returns the
    ((scope, competitor), (step, chunk)) keys whose overview must be recomputed, old and new."""
    touched = {
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
            chunks.append(M.SeriesChunk(entry_id=entry_id, step=step, chunk=c, values=_pack(arr)))
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
    _save_heads(M, heads)
    return touched


def _rewind_entry_chunks(M, entry_ids: list[int], info: dict, since: datetime) -> set:
    """Recompute these entries' grid points from `since` on (and their heads) from their
    snapshot rows, leaving earlier points alone: what a write in the past needs, at a cost that
    follows the history after `since`, not all of it. Returns the touched overview keys."""
    from django.db.models import OuterRef, Subquery

    before = M.Snapshot.objects.filter(entry=OuterRef("pk"), ts__lt=since).order_by("-ts")
    prev = dict(
        M.Entry.objects.filter(pk__in=entry_ids)
        .annotate(prev=Subquery(before.values("ts")[:1]))
        .values_list("pk", "prev")
    )
    # An entry with nothing before `since` is rebuilt whole (cheap: its rows are all after).
    whole = [e for e in entry_ids if prev.get(e) is None]
    touched = _rebuild_entry_chunks(M, whole, info) if whole else set()
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
        (e, step, c): _unpack(raw).copy()
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
                arr = existing.setdefault((e, step, c), _empty())
                lo, hi = max(k_lo, c * CHUNK), min(k_hi, c * CHUNK + CHUNK - 1)
                arr[lo - c * CHUNK : hi - c * CHUNK + 1] = vals[lo - k_lo : hi - k_lo + 1]
                touched.add((info[e][:2], (step, c)))
        heads[e].first_ts = instant(first)
        heads[e].last_ts = instant(last)
        heads[e].last_total = Decimal(f"{totals[-1]:.2f}")
    keep = {k: a for k, a in existing.items() if not np.isnan(a).all()}
    for e, step, c in set(existing) - set(keep):
        M.SeriesChunk.objects.filter(entry_id=e, step=step, chunk=c).delete()
    M.SeriesChunk.objects.bulk_create(
        [
            M.SeriesChunk(entry_id=e, step=st, chunk=c, values=_pack(a))
            for (e, st, c), a in keep.items()
        ],
        update_conflicts=True,
        unique_fields=["entry", "step", "chunk"],
        update_fields=["values"],
        batch_size=500,
    )
    _save_heads(M, list(heads.values()))
    return touched


# --- the overview: per scope and competitor ------------------------------------------------


def _lock_scopes(M, scopes: Iterable[str]) -> dict:
    scopes = sorted(set(scopes))
    M.ScopeSeriesHead.objects.bulk_create(
        [M.ScopeSeriesHead(scope=s) for s in scopes], ignore_conflicts=True
    )
    rows = M.ScopeSeriesHead.objects.select_for_update().filter(scope__in=scopes).order_by("scope")
    return {h.scope: h for h in rows}


def _refresh_scopes(M, touched: dict, info: dict, written: list) -> None:
    """Recompute the overview chunks in `touched` ((scope, competitor) -> {(step, chunk)})
    from the committed entry chunks, and widen the scopes' heads to the heads written."""
    spans: dict[str, list] = {}
    for head in written:
        if head.last_ts is None:
            continue
        span = spans.setdefault(info[head.entry_id][0], [head.first_ts, head.last_ts])
        span[0], span[1] = min(span[0], head.first_ts), max(span[1], head.last_ts)
    scopes = {scope for scope, _ in touched} | set(spans)
    if not scopes:
        return
    heads = _lock_scopes(M, scopes)
    _recompute_overview(M, touched)
    for scope, (first, last) in spans.items():
        head = heads[scope]
        # One UPDATE per scope whether or not it moved: a tick costs the same queries each time.
        M.ScopeSeriesHead.objects.filter(scope=scope).update(
            first_ts=first if head.first_ts is None else min(head.first_ts, first),
            last_ts=last if head.last_ts is None else max(head.last_ts, last),
        )


def _recompute_overview(M, touched: dict) -> None:
    by_scope: dict[str, dict[int, set]] = defaultdict(dict)
    for (scope, competitor), keys in touched.items():
        by_scope[scope][competitor] = keys
    for scope, competitors in by_scope.items():
        steps = {s for keys in competitors.values() for s, _ in keys}
        chunks = {c for keys in competitors.values() for _, c in keys}
        rows = M.SeriesChunk.objects.filter(
            entry__cohort__kind=scope,
            entry__competitor_id__in=list(competitors),
            step__in=steps,
            chunk__in=chunks,
        ).values_list("entry__competitor_id", "entry__initial_balance", "step", "chunk", "values")
        sums: dict[tuple, np.ndarray] = {}
        counts: dict[tuple, np.ndarray] = {}
        for competitor, initial, step, c, raw in rows.iterator(chunk_size=2000):
            if (step, c) not in competitors[competitor] or not initial:
                continue
            ratio = (_unpack(raw) / float(initial) - 1.0) * 100.0
            key = (competitor, step, c)
            if key not in sums:
                sums[key] = np.zeros(CHUNK, dtype=DTYPE)
                counts[key] = np.zeros(CHUNK, dtype=np.int64)
            present = ~np.isnan(ratio)
            sums[key][present] += ratio[present]
            counts[key] += present
        out, empty = [], []
        for competitor, keys in competitors.items():
            for step, c in keys:
                key = (competitor, step, c)
                if key not in counts or not counts[key].any():
                    empty.append((competitor, step, c))
                    continue
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = np.where(counts[key] > 0, sums[key] / counts[key], np.nan)
                out.append(
                    M.ScopeSeriesChunk(
                        scope=scope,
                        competitor_id=competitor,
                        step=step,
                        chunk=c,
                        values=_pack(mean),
                    )
                )
        M.ScopeSeriesChunk.objects.bulk_create(
            out,
            update_conflicts=True,
            unique_fields=["scope", "step", "chunk", "competitor"],
            update_fields=["values"],
            batch_size=500,
        )
        for competitor, step, c in empty:
            M.ScopeSeriesChunk.objects.filter(
                scope=scope, competitor_id=competitor, step=step, chunk=c
            ).delete()


def _reset_scope_heads(M, scopes: Iterable[str]) -> None:
    heads = _lock_scopes(M, scopes)
    spans = {
        scope: (first, last)
        for scope, first, last in M.SeriesHead.objects.filter(
            entry__cohort__kind__in=list(heads), last_ts__isnull=False
        )
        .values("entry__cohort__kind")
        .annotate(first=Min("first_ts"), last=Max("last_ts"))
        .values_list("entry__cohort__kind", "first", "last")
    }
    for scope, head in heads.items():
        head.first_ts, head.last_ts = spans.get(scope, (None, None))
    M.ScopeSeriesHead.objects.bulk_update(list(heads.values()), ["first_ts", "last_ts"])


# --- entry points for writers ----------------------------------------------------------------


def rebuild_entries(entry_ids: Iterable[int], since: datetime | None = None) -> int:
    """Recompute these entries' series (and the overview points they feed) from their snapshot
    rows: all of it, or from `since` on. For writes that change an entry's past (snapshot rows
    deleted or rewritten around the services, a correction dated before later snapshots).
    Returns the number of entries rebuilt."""
    M = _models()
    ids = sorted(set(entry_ids))
    if not ids:
        return 0
    with transaction.atomic():
        lock(ids)
        info = _entry_info(M, ids)
        touched: dict[tuple[str, int], set] = defaultdict(set)
        for i in range(0, len(ids), REBUILD_BATCH):
            batch = ids[i : i + REBUILD_BATCH]
            if since is None:
                keys = _rebuild_entry_chunks(M, batch, info)
            else:
                keys = _rewind_entry_chunks(M, batch, info, since)
            for key, point in keys:
                touched[key].add(point)
        _lock_scopes(M, {scope for scope, _, _ in info.values()})
        _recompute_overview(M, touched)
        _reset_scope_heads(M, {scope for scope, _, _ in info.values()})
        values_changed()  # charts kept from the old series (core.versions) are stale
    return len(ids)


def rebuild_all(models=None, progress=None) -> int:
    """Every entry's series and every overview, from the snapshot table (the backfill).
    `models` lets a migration pass its historical models."""
    M = models or _models()
    ids = list(M.Entry.objects.order_by("pk").values_list("pk", flat=True))
    with transaction.atomic():
        scopes = set(M.Entry.objects.values_list("cohort__kind", flat=True).distinct())
        _lock_scopes(M, scopes | set(M.ScopeSeriesHead.objects.values_list("scope", flat=True)))
        M.ScopeSeriesChunk.objects.all().delete()
        for i in range(0, len(ids), REBUILD_BATCH):
            batch = ids[i : i + REBUILD_BATCH]
            _rebuild_entry_chunks(M, batch, _entry_info(M, batch))
            if progress is not None:
                progress(min(i + REBUILD_BATCH, len(ids)), len(ids))
        pairs = M.Entry.objects.values_list("cohort__kind", "competitor_id").distinct()
        for scope, competitor in pairs:
            _recompute_overview(M, {(scope, competitor): _overview_keys(M, scope, competitor)})
        _reset_scope_heads(M, M.ScopeSeriesHead.objects.values_list("scope", flat=True))
        if models is None:
            # Whatever pages kept from the old series is stale now (core.versions).
            data_changed()
            values_changed()
    return len(ids)


def _overview_keys(M, scope: str, competitor_id: int) -> set[tuple[int, int]]:
    return set(
        M.SeriesChunk.objects.filter(entry__cohort__kind=scope, entry__competitor_id=competitor_id)
        .values_list("step", "chunk")
        .distinct()
    )


def rebuild_overview(competitor_id: int) -> None:
    """Recompute one competitor's overview in every scope (after entries were deleted)."""
    M = _models()
    with transaction.atomic():
        heads = _lock_scopes(M, SCOPES)
        M.ScopeSeriesChunk.objects.filter(competitor_id=competitor_id).delete()
        for scope in heads:
            keys = _overview_keys(M, scope, competitor_id)
            if keys:
                _recompute_overview(M, {(scope, competitor_id): keys})
        _reset_scope_heads(M, heads)


def entry_deleted(competitor_id: int) -> None:
    """An entry was deleted: once that commits, its competitor's overview no longer counts it."""
    transaction.on_commit(partial(rebuild_overview, competitor_id))


# --- reading (for the site's charts) ---------------------------------------------------------


def entry_heads(entry_ids: Iterable[int]) -> dict[int, tuple[datetime, datetime, Decimal]]:
    """entry id -> (first ts, latest ts, latest total) of the entries that have snapshots."""
    from cohorts.models import SeriesHead

    rows = SeriesHead.objects.filter(
        entry_id__in=list(entry_ids), last_ts__isnull=False
    ).values_list("entry_id", "first_ts", "last_ts", "last_total")
    return {e: (first, last, total) for e, first, last, total in rows}


def scope_head(scope: str) -> tuple[datetime, datetime] | None:
    from cohorts.models import ScopeSeriesHead

    row = (
        ScopeSeriesHead.objects.filter(scope=scope, last_ts__isnull=False)
        .values_list("first_ts", "last_ts")
        .first()
    )
    return row


def _assemble(rows, step: int, k0: int, k1: int) -> dict:
    """owner -> values at grid indices k0..k1 of `step`, from (owner, step, chunk, raw) rows."""
    out: dict = {}
    n = k1 - k0 + 1
    for owner, row_step, c, raw in rows:
        if row_step != step or n <= 0:
            continue
        arr = out.get(owner)
        if arr is None:
            arr = out[owner] = np.full(n, np.nan, dtype=DTYPE)
        values = _unpack(raw)
        lo, hi = max(k0, c * CHUNK), min(k1, c * CHUNK + CHUNK - 1)
        if lo <= hi:
            arr[lo - k0 : hi - k0 + 1] = values[lo - c * CHUNK : hi - c * CHUNK + 1]
    return out


def entry_values(entry_ids: list[int], step: int, k0: int, k1: int) -> dict[int, np.ndarray]:
    """entry id -> its values at grid points k0..k1 (k * step seconds) - one indexed query."""
    from cohorts.models import SeriesChunk

    if k1 < k0 or not entry_ids:
        return {}
    rows = SeriesChunk.objects.filter(
        entry_id__in=entry_ids, step=step, chunk__gte=k0 // CHUNK, chunk__lte=k1 // CHUNK
    ).values_list("entry_id", "step", "chunk", "values")
    return _assemble(rows, step, k0, k1)


def scope_values(
    scope: str, step: int, k0: int, k1: int, at: int | None = None
) -> tuple[dict[tuple, np.ndarray], dict[tuple, float]]:
    """(competitor id, slug, name) -> mean return (%) at grid points k0..k1 of a scope, and,
    when `at` (seconds) is given, each competitor's value at the finest grid point at or before
    it (a range's last point between grid points). One indexed query."""
    from django.db.models import Q

    from cohorts.models import ScopeSeriesChunk

    where = Q(step=step, chunk__gte=k0 // CHUNK, chunk__lte=k1 // CHUNK)
    if at is not None:
        where |= Q(step=FINEST, chunk=(at // FINEST) // CHUNK)
    rows = [
        ((pk, slug, name), row_step, c, raw)
        for pk, slug, name, row_step, c, raw in ScopeSeriesChunk.objects.filter(
            where, scope=scope
        ).values_list(
            "competitor_id",
            "competitor__slug",
            "competitor__display_name",
            "step",
            "chunk",
            "values",
        )
    ]
    grid = _assemble(rows, step, k0, k1) if k1 >= k0 else {}
    tail = {}
    if at is not None:
        k = at // FINEST
        for owner, value in _assemble(rows, FINEST, k, k).items():
            if not np.isnan(value[0]):
                tail[owner] = float(value[0])
    return grid, tail
