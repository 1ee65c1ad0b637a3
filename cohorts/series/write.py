"""Chart series kept up to date as snapshots are written, so no page computes one on a read.

What is stored. For every entry and every step of LEVELS (10 minutes to a week), the entry's
value at each multiple of the step since the Unix epoch (its "grid"), CHUNK points to a row
(SeriesChunk, packed float64, NaN where the entry has no value). The value at a grid time is the
total of the entry's last snapshot at or before that time, within the entry's life (its first to
its latest snapshot): sparse snapshots (a replay's, the demo's hourly ones) hold until the next
one, so a chart is never blank where data exists. Per scope (live / replay / demo) and
competitor, the same grids hold the mean growth of the competitor's entries from each point to
the next (ScopeSeriesChunk, cohorts/series/overview.py): the factors the home page's chart
compounds, so a page reads them instead of every entry's series. SeriesHead and ScopeSeriesHead keep
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
overview chunk is always recomputed from committed entry chunks. A writer that also appends to
the scope's event log in the same transaction (settlement) takes both before its first append
(`lock_with_scopes`): the log's head is always the last of these locks, never held while
waiting for a series head (docs/architecture.md, "Lock order").

Retention: rolling 10-minute snapshots up to hourly ones leaves the stored series alone (they
were computed from the finer data); a rebuild computes from what is left.

This module is what writers call; the package's docstring (cohorts/series/__init__.py) lists
the modules beside it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import partial

import numpy as np
from django.db import transaction

from cohorts.series.chart import home_chart, store_home_charts
from cohorts.series.grid import (
    CHUNK,
    FINEST,  # noqa: F401 - the pages read the grid through this module
    LEVELS,
    SCOPES,
    assemble,
    empty,
    epoch,
    live_models,
    pack,
    save_heads,
    unpack,
    upsert,
)
from cohorts.series.overview import (
    lock_scopes,
    overview_keys,
    rebuild_overviews,
    recompute_overview,
    refresh_scopes,
    reset_scope_heads,
)
from cohorts.series.rebuild import rebuild_entry_chunks, rewind_entry_chunks
from core.versions import data_changed, values_changed

REBUILD_BATCH = 50  # entries per snapshot query when rebuilding


# --- writing --------------------------------------------------------------------------------


def lock(entry_ids: Iterable[int]) -> dict:
    """Lock (creating them first) the SeriesHead rows of these entries, in pk order; each head
    comes with its entry and cohort (not locked).

    Called by every snapshot writer before its upsert, so the order of locks is always: entry
    rows of the game (settlement), series heads, snapshot rows, scope heads, and last the
    scope's event log (settlement's seal and events).
    """
    M = live_models()
    ids = sorted(set(entry_ids))
    upsert(M.SeriesHead, [{"entry_id": i} for i in ids], ["entry"], [])
    heads = (
        M.SeriesHead.objects.select_for_update(of=("self",))
        .select_related("entry__cohort")
        .filter(entry_id__in=ids)
        .order_by("entry_id")
    )
    return {h.entry_id: h for h in heads}


def lock_with_scopes(entry_ids: Iterable[int]) -> dict:
    """lock(), then the ScopeSeriesHead rows of the entries' scopes: every series lock a write
    of these entries will take, taken now. A transaction that also appends to a scope's event
    log (settlement: a week's seal, then its own events) calls this before its first append,
    so the series locks always come before the log's head (see the module docstring)."""
    heads = lock(entry_ids)
    if heads:
        lock_scopes(live_models(), {h.entry.cohort.kind for h in heads.values()})
    return heads


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
    previous snapshot's total) before it.

    Plain integer arithmetic: a tick adds a handful of points per level, for which numpy's
    per-call overhead (arange, unique, masks) cost many times the work."""
    for step in LEVELS:
        k_lo, k_hi = after // step + 1, upto // step
        if k_hi < k_lo:
            continue
        ends_on_grid = k_hi * step == upto
        for c in range(k_lo // CHUNK, k_hi // CHUNK + 1):
            base = c * CHUNK
            lo, hi = max(k_lo, base), min(k_hi, base + CHUNK - 1)
            patch = patches.get((entry_id, step, c))
            if patch is None:
                patch = patches[(entry_id, step, c)] = _Patch([], [])
            patch.offsets.extend(range(lo - base, hi - base + 1))
            values = [hold] * (hi - lo + 1)
            if ends_on_grid and hi == k_hi:
                values[-1] = value
            patch.values.extend(values)


def record(heads: dict, rows: Iterable[tuple[int, datetime, Decimal]]) -> None:
    """Fold snapshots just written ((entry id, ts, total)) into the series, in the writer's
    transaction; `heads` comes from `lock()`."""
    M = live_models()
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
    save_heads(M, [heads[i] for i in per_entry])
    for entry_id, since in rewind.items():
        # Reads the rows just written too; its heads replace the ones saved above.
        for key, point in rewind_entry_chunks(M, [entry_id], info, since):
            touched[key].add(point)
        heads[entry_id].refresh_from_db(fields=["first_ts", "last_ts", "last_total"])
    refresh_scopes(M, touched, info, [heads[i] for i in per_entry], chart=home_chart)


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
        (e, s, c): unpack(v)
        for e, s, c, v in M.SeriesChunk.objects.filter(
            entry_id__in=entry_ids, step__in=steps, chunk__in=chunks
        ).values_list("entry_id", "step", "chunk", "values")
        if (e, s, c) in patches
    }
    out = []
    for key, patch in patches.items():
        arr = existing[key].copy() if key in existing else empty()
        arr[patch.offsets] = patch.values
        out.append({"entry_id": key[0], "step": key[1], "chunk": key[2], "values": pack(arr)})
    upsert(M.SeriesChunk, out, ["entry", "step", "chunk"], ["values"])


# --- entry points for writers ----------------------------------------------------------------


def rebuild_entries(entry_ids: Iterable[int], since: datetime | None = None) -> int:
    """Recompute these entries' series (and the overview points they feed) from their snapshot
    rows: all of it, or from `since` on. For writes that change an entry's past (snapshot rows
    deleted or rewritten around the services, a correction dated before later snapshots).
    Returns the number of entries rebuilt."""
    M = live_models()
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
                keys = rebuild_entry_chunks(M, batch, info)
            else:
                keys = rewind_entry_chunks(M, batch, info, since)
            for key, point in keys:
                touched[key].add(point)
        lock_scopes(M, {scope for scope, _, _ in info.values()})
        recompute_overview(M, touched)
        scopes = {scope for scope, _, _ in info.values()}
        reset_scope_heads(M, scopes)
        store_home_charts(scopes)
        values_changed()  # charts kept from the old series (core.versions) are stale
    return len(ids)


def rebuild_all(models=None, progress=None) -> int:
    """Every entry's series and every overview, from the snapshot table (the backfill).
    `models` lets a migration pass its historical models."""
    M = models or live_models()
    ids = list(M.Entry.objects.order_by("pk").values_list("pk", flat=True))
    with transaction.atomic():
        scopes = set(M.Entry.objects.values_list("cohort__kind", flat=True).distinct())
        lock_scopes(M, scopes | set(M.ScopeSeriesHead.objects.values_list("scope", flat=True)))
        for i in range(0, len(ids), REBUILD_BATCH):
            batch = ids[i : i + REBUILD_BATCH]
            rebuild_entry_chunks(M, batch, _entry_info(M, batch))
            if progress is not None:
                progress(min(i + REBUILD_BATCH, len(ids)), len(ids))
        rebuild_overviews(M)
        scopes = set(M.ScopeSeriesHead.objects.values_list("scope", flat=True))
        reset_scope_heads(M, scopes)
        if models is None:
            store_home_charts(scopes)
            # Whatever pages kept from the old series is stale now (core.versions).
            data_changed()
            values_changed()
    return len(ids)


def rebuild_overview(competitor_id: int) -> None:
    """Recompute one competitor's overview in every scope (after entries were deleted)."""
    M = live_models()
    with transaction.atomic():
        heads = lock_scopes(M, SCOPES)
        M.ScopeSeriesChunk.objects.filter(competitor_id=competitor_id).delete()
        for scope in heads:
            keys = overview_keys(M, scope, competitor_id)
            if keys:
                recompute_overview(M, {(scope, competitor_id): keys})
        reset_scope_heads(M, heads)
        store_home_charts(heads)


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
    out = {}
    for e, first, last, total in rows:
        if first is not None and last is not None and total is not None:  # set together
            out[e] = (first, last, total)
    return out


def entry_values(entry_ids: list[int], step: int, k0: int, k1: int) -> dict[int, np.ndarray]:
    """entry id -> its values at grid points k0..k1 (k * step seconds) - one indexed query."""
    from cohorts.models import SeriesChunk

    if k1 < k0 or not entry_ids:
        return {}
    rows = SeriesChunk.objects.filter(
        entry_id__in=entry_ids, step=step, chunk__gte=k0 // CHUNK, chunk__lte=k1 // CHUNK
    ).values_list("entry_id", "step", "chunk", "values")
    return assemble(rows, step, k0, k1)
