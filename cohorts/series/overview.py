"""The overview series: per scope (live / replay / demo) and competitor, the mean growth of
the competitor's entries from each grid point to the next, the factor the home chart compounds
into its chain-linked return (web/charts.py). Recomputed from the committed entry chunks a
write touched (cohorts/series/write.py decides when), so a page only multiplies stored factors.
Writers lock the scope's ScopeSeriesHead row after the entries' heads, so an overview chunk is
never computed from a half-written entry, and before any append to the scope's event log in the
same transaction (cohorts/series/write.py, "Locking").

The factor at grid point k of a step averages, over the entries alive at k, value(k) divided
by value(k - 1), or by the starting balance for an entry whose first snapshot falls in
((k - 1) * step, k * step]; an entry with neither counts for nothing. It is 1.0 where entries
are alive but none counts, and NaN where none of the competitor's entries is alive (the chart
draws no point there). The first point of a chart's range and a latest snapshot between grid
points depend on the range itself, so the page computes those two from the entries
(`growth_at`), the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np
from django.db.models import Max, Min

from cohorts.series.grid import CHUNK, DTYPE, epoch, pack, unpack, upsert


def lock_scopes(M, scopes: Iterable[str]) -> dict:
    scopes = sorted(set(scopes))
    M.ScopeSeriesHead.objects.bulk_create(
        [M.ScopeSeriesHead(scope=s) for s in scopes], ignore_conflicts=True
    )
    rows = (
        M.ScopeSeriesHead.objects.select_for_update()
        .filter(scope__in=scopes)
        .only("scope", "first_ts", "last_ts")  # not the stored chart: kilobytes, rewritten
        .order_by("scope")
    )
    return {h.scope: h for h in rows}


def refresh_scopes(
    M, touched: dict, info: dict, written: list, chart: Callable[..., dict] | None = None
) -> None:
    """Recompute the overview chunks in `touched` ((scope, competitor) -> {(step, chunk)})
    from the committed entry chunks, and widen the scopes' heads to the heads written;
    with `chart(scope, span)`, store what it returns as the scope's home chart in the same
    update (cohorts/series/chart.py), given the widened head as its span."""
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
    for scope in sorted(scopes):
        head, fields = heads[scope], {}
        if scope in spans:
            first, last = spans[scope]
            fields["first_ts"] = first if head.first_ts is None else min(head.first_ts, first)
            fields["last_ts"] = last if head.last_ts is None else max(head.last_ts, last)
        if chart is not None:
            widened = (fields["first_ts"], fields["last_ts"]) if fields else None
            fields["home_chart"] = chart(scope, widened)
        # One UPDATE per scope whether or not it moved: a tick costs the same queries each time.
        if fields:
            M.ScopeSeriesHead.objects.filter(scope=scope).update(**fields)


def starting_balance(initial) -> float:
    # An entry without a starting balance has no growth to count (NaN divides to NaN).
    return float(initial or 0) or float("nan")


def mean_growth(values: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Per column, the mean of values / previous over the rows (entries, in entry id order)
    where both are numbers and the ratio finite; 1.0 where no row counts."""
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = values / previous
    both = ~np.isnan(growth) & np.isfinite(growth)
    counts = both.sum(axis=0)
    return np.where(
        counts > 0, np.where(both, growth, 0.0).sum(axis=0) / np.maximum(counts, 1), 1.0
    )


def growth_at(values: np.ndarray, previous: np.ndarray, starts, since: int, at: int) -> float:
    """The factor at one time `at` (seconds) from the entries' values there and at the point
    before (NaN where none), each row's entry counting from its starting balance when its
    first snapshot is in (since, at]. `starts` holds (starting balance, first snapshot)."""
    previous = previous.copy()
    for i, (initial, born) in enumerate(starts):
        if since < born <= at and np.isnan(previous[i]) and not np.isnan(values[i]):
            previous[i] = initial
    return float(mean_growth(values[:, None], previous[:, None])[0])


def _chunk_growth(step: int, c: int, members: list[tuple], before: dict) -> np.ndarray | None:
    """The factors of one competitor's chunk c of a step; `members` are its entries' (entry id,
    starting balance, first snapshot in seconds, values of chunk c) in entry id order, `before`
    their values of chunk c - 1. None where no entry is alive in the chunk."""
    values = np.vstack([v for _, _, _, v in members])
    if np.isnan(values).all():
        return None
    previous = np.full_like(values, np.nan)
    previous[:, 1:] = values[:, :-1]
    for i, (entry_id, initial, born, v) in enumerate(members):
        earlier = before.get(entry_id)
        if earlier is not None:
            previous[i, 0] = earlier[-1]
        k = -(-born // step) - c * CHUNK  # the first point at or after the first snapshot
        if 0 <= k < CHUNK and np.isnan(previous[i, k]) and not np.isnan(v[k]):
            previous[i, k] = initial
    factors = mean_growth(values, previous)
    factors[np.isnan(values).all(axis=0)] = np.nan
    return factors.astype(DTYPE, copy=False)


def recompute_overview(M, touched: dict) -> None:
    by_scope: dict[str, dict[int, set]] = defaultdict(dict)
    for (scope, competitor), keys in touched.items():
        by_scope[scope][competitor] = keys
    for scope, competitors in by_scope.items():
        steps = {s for keys in competitors.values() for s, _ in keys}
        chunks = {c for keys in competitors.values() for _, c in keys}
        # Chunk c - 1 too: the first point of a chunk grows from the last of the one before.
        rows = (
            M.SeriesChunk.objects.filter(
                entry__cohort__kind=scope,
                entry__competitor_id__in=list(competitors),
                step__in=steps,
                chunk__in=chunks | {c - 1 for c in chunks},
                entry__series_head__first_ts__isnull=False,
            )
            .order_by("entry_id")
            .values_list(
                "entry_id", "entry__competitor_id", "entry__initial_balance",
                "entry__series_head__first_ts", "step", "chunk", "values",
            )
        )  # fmt: skip
        members: dict[tuple, list] = defaultdict(list)
        before: dict[tuple, dict] = defaultdict(dict)
        for entry_id, competitor, initial, first, step, c, raw in rows.iterator(chunk_size=2000):
            wanted = competitors[competitor]
            if (step, c + 1) in wanted:
                before[(competitor, step, c + 1)][entry_id] = unpack(raw)
            if (step, c) in wanted:
                start = (starting_balance(initial), epoch(first))
                members[(competitor, step, c)].append((entry_id, *start, unpack(raw)))
        out, empty = [], []
        for competitor, keys in competitors.items():
            for step, c in keys:
                key = (competitor, step, c)
                factors = (
                    _chunk_growth(step, c, members[key], before[key]) if key in members else None
                )
                if factors is None:
                    empty.append(key)
                    continue
                out.append(
                    {
                        "scope": scope,
                        "competitor_id": competitor,
                        "step": step,
                        "chunk": c,
                        "values": pack(factors),
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


def rebuild_overviews(M) -> None:
    """Every scope's growth factors from the stored entry chunks (a backfill)."""
    M.ScopeSeriesChunk.objects.all().delete()
    pairs = M.Entry.objects.values_list("cohort__kind", "competitor_id").distinct()
    for scope, competitor in pairs:
        recompute_overview(M, {(scope, competitor): overview_keys(M, scope, competitor)})


def overview_keys(M, scope: str, competitor_id: int) -> set[tuple[int, int]]:
    return set(
        M.SeriesChunk.objects.filter(entry__cohort__kind=scope, entry__competitor_id=competitor_id)
        .values_list("step", "chunk")
        .distinct()
    )
