"""The overview series: per scope (live / replay / demo) and competitor, the mean return in
percent over the competitor's entries alive at each grid point, recomputed from the committed
entry chunks a write touched (cohorts/series.py decides when). Writers lock the scope's
ScopeSeriesHead row after the entries' heads, so an overview chunk is never computed from a
half-written entry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from django.db.models import Max, Min

from cohorts.series_grid import CHUNK, DTYPE, pack, unpack, upsert


def lock_scopes(M, scopes: Iterable[str]) -> dict:
    scopes = sorted(set(scopes))
    M.ScopeSeriesHead.objects.bulk_create(
        [M.ScopeSeriesHead(scope=s) for s in scopes], ignore_conflicts=True
    )
    rows = M.ScopeSeriesHead.objects.select_for_update().filter(scope__in=scopes).order_by("scope")
    return {h.scope: h for h in rows}


def refresh_scopes(M, touched: dict, info: dict, written: list) -> None:
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
    heads = lock_scopes(M, scopes)
    recompute_overview(M, touched)
    for scope, (first, last) in spans.items():
        head = heads[scope]
        # One UPDATE per scope whether or not it moved: a tick costs the same queries each time.
        M.ScopeSeriesHead.objects.filter(scope=scope).update(
            first_ts=first if head.first_ts is None else min(head.first_ts, first),
            last_ts=last if head.last_ts is None else max(head.last_ts, last),
        )


def recompute_overview(M, touched: dict) -> None:
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
            ratio = (unpack(raw) / float(initial) - 1.0) * 100.0
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
                    {
                        "scope": scope,
                        "competitor_id": competitor,
                        "step": step,
                        "chunk": c,
                        "values": pack(mean),
                    }
                )
        upsert(M.ScopeSeriesChunk, out, ["scope", "step", "chunk", "competitor"], ["values"])
        for competitor, step, c in empty:
            M.ScopeSeriesChunk.objects.filter(
                scope=scope, competitor_id=competitor, step=step, chunk=c
            ).delete()


def reset_scope_heads(M, scopes: Iterable[str]) -> None:
    heads = lock_scopes(M, scopes)
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


def overview_keys(M, scope: str, competitor_id: int) -> set[tuple[int, int]]:
    return set(
        M.SeriesChunk.objects.filter(entry__cohort__kind=scope, entry__competitor_id=competitor_id)
        .values_list("step", "chunk")
        .distinct()
    )
