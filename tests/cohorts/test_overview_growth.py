"""The home chart reads growth factors stored on write (cohorts/series/overview.py) and gives the
same chain-linked return as compounding every entry's stored series on each request.

The reference below is that per-request computation, kept here as the specification: the
entries of the scope with a snapshot, their values on the range's grid (plus a latest snapshot
between grid points), each step's growth averaged over the entries alive at both ends (an entry
born in the step from its starting balance), compounded from the start of the range.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.test import TestCase
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohorts.models import Cohort, Entry, ScopeSeriesChunk, SeriesHead, Snapshot
from cohorts.series import chart as series_chart
from cohorts.series import write as series
from cohorts.settlement import settle_market
from cohorts.snapshots import store_snapshots, take_snapshot
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_competitor, make_market, snapshot_row
from web import chart_reads, charts, colours, selectors

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 1, tzinfo=UTC)  # a Sunday
TEN = timedelta(minutes=10)


def reference(scope: str, range_key: str, max_points: int = charts.OVERVIEW_POINTS) -> dict:
    """The chain-linked return computed from every entry's stored series on the request."""
    payload = {
        "scope": scope, "range": range_key, "ranges": list(charts.RANGES),
        "value": charts.OVERVIEW_MEASURE, "step_seconds": series.FINEST, "x": [], "series": [],
        "annotations": [],
    }  # fmt: skip
    entries = list(
        SeriesHead.objects.filter(
            entry__cohort__kind=scope, first_ts__isnull=False, last_ts__isnull=False
        )
        .order_by("entry_id")
        .values_list(
            "entry_id", "entry__competitor_id", "entry__competitor__slug",
            "entry__competitor__display_name", "entry__initial_balance",
            "first_ts", "last_ts", "last_total",
        )
    )  # fmt: skip
    if not entries:
        return payload
    win = charts.Window(
        min(e[5] for e in entries), max(e[6] for e in entries), range_key, max_points
    )
    times = np.array(win.times, dtype=np.int64)
    lo, hi = int(times[0]), int(times[-1])
    alive = [e for e in entries if series.epoch(e[5]) <= hi and series.epoch(e[6]) >= lo]
    grid = series.entry_values([e[0] for e in alive], win.step, win.k0, win.k1)
    n_grid = win.k1 - win.k0 + 1 if win.k1 >= win.k0 else 0
    owners: dict[tuple, list] = {}
    for pk, cid, slug, name, initial, first, last, total in alive:
        values = grid.get(pk)
        if values is None:
            values = np.full(n_grid, np.nan)
        if win.tail is not None:
            values = np.append(values, float(total) if series.epoch(last) == win.tail else np.nan)
        start = (float(initial or 0) or float("nan"), series.epoch(first))
        owners.setdefault((cid, slug, name), []).append((values, *start))
    lines = []
    for owner in sorted(owners, key=lambda o: (o[2], o[1])):
        y = _chain_linked(owners[owner], times, win.start)
        if np.isnan(y).all():
            continue
        lines.append(
            {"competitor": owner[1], "label": owner[2],
             **colours.style_for(owner[0], scope=scope), "y": y}
        )  # fmt: skip
    if lines:
        payload["step_seconds"] = win.step
        payload["x"] = win.x()
        payload["series"] = [{**line, "y": charts._numbers(line["y"], 3)} for line in lines]
    payload["raw"] = {line["competitor"]: line["y"] for line in lines}
    return payload


def _chain_linked(entries, times, start) -> np.ndarray:
    values = np.vstack([v for v, _, _ in entries])
    previous = np.full_like(values, np.nan)
    previous[:, 1:] = values[:, :-1]
    since = np.concatenate(([start - 1], times[:-1]))
    for i, (_, initial, born) in enumerate(entries):
        born_in_step = (since < born) & (born <= times)
        take = born_in_step & np.isnan(previous[i]) & ~np.isnan(values[i])
        previous[i, take] = initial
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = values / previous
    both = ~np.isnan(growth) & np.isfinite(growth)
    counts = both.sum(axis=0)
    mean_growth = np.where(
        counts > 0, np.where(both, growth, 0.0).sum(axis=0) / np.maximum(counts, 1), 1.0
    )
    out = (np.cumprod(mean_growth) - 1.0) * 100.0
    out[np.isnan(values).all(axis=0)] = np.nan
    return out


def _assert_same_as_reference(scope: str = "live", max_points: int = charts.OVERVIEW_POINTS):
    # The default chart is read as the last series write stored it (cohorts/series/chart.py).
    assert series_chart.stored_home_chart(scope) == series_chart.home_chart(scope)
    for key in charts.RANGES:
        want = reference(scope, key, max_points)
        raw = want.pop("raw", {})
        got = chart_reads.overview_payload(scope, max_points=max_points, range_key=key)
        assert got == want, key
        # The home page passes the span it read with the scope's cohorts: the same chart.
        with_cohorts = chart_reads.overview_chart(scope, key, selectors.scope_cohorts(scope))
        assert with_cohorts == chart_reads.overview_chart(scope, key)
        if raw:
            assert got["series"], key
        # The unrounded figures too (the payload rounds to 3 decimals).
        for line in got["series"]:
            y = np.array([np.nan if v is None else v for v in line["y"]])
            ref = raw[line["competitor"]]
            np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
            np.testing.assert_allclose(y[~np.isnan(y)], ref[~np.isnan(ref)], atol=5e-4)


def _walk(seed: int, n: int, start: float = 10_000.0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(start + np.cumsum(rng.normal(0, 40, n)))


def test_entries_joining_and_leaving_give_the_per_request_figures():
    """Three weekly cohorts (entries join), the first one stopping early (its entries leave),
    one competitor missing from a cohort, snapshots off the grid at the end."""
    a, b, c = (make_competitor(s) for s in ("alpha", "beta", "gamma"))
    cohorts = [
        make_cohort_with_entries(1, week_start=T0, competitors=[a, b, c])[1],
        make_cohort_with_entries(1, week_start=T0 + timedelta(days=7), competitors=[a, b])[1],
        make_cohort_with_entries(1, week_start=T0 + timedelta(days=14), competitors=[a, b, c])[1],
    ]
    lives = [(0, 10 * 144), (7 * 144, 18 * 144), (14 * 144 + 3, 18 * 144)]
    seed = 0
    for entries, (lo, hi) in zip(cohorts, lives, strict=True):
        for entry in entries:
            seed += 1
            totals = _walk(seed, hi - lo)
            store_snapshots(
                [snapshot_row(entry, T0 + (lo + i) * TEN, t) for i, t in enumerate(totals)]
            )
    # A latest snapshot between grid points of every step but the finest.
    last = T0 + 18 * 144 * TEN + timedelta(minutes=7)
    store_snapshots([snapshot_row(e, last, 10_500) for e in cohorts[1] + cohorts[2]])
    _assert_same_as_reference()
    _assert_same_as_reference(max_points=30)
    # The stored factors are the same whether kept tick by tick or rebuilt from scratch.
    kept = _factors()
    series.rebuild_all()
    assert _factors() == kept


def _factors() -> dict:
    return {
        (scope, comp, step, c): bytes(v)
        for scope, comp, step, c, v in ScopeSeriesChunk.objects.values_list(
            "scope", "competitor_id", "step", "chunk", "values"
        )
    }


def test_a_cohort_with_a_resolved_market_midway_gives_the_per_request_figures():
    from cohorts.services import BetOrder, execute_orders

    a, b = make_competitor("resolver-a"), make_competitor("resolver-b")
    first, _ = make_cohort_with_entries(1, week_start=T0, competitors=[a, b])
    second, _ = make_cohort_with_entries(1, week_start=T0 + timedelta(days=7), competitors=[a, b])
    market = make_market(prices={"Yes": "0.50", "No": "0.50"})
    for entry in Entry.objects.filter(cohort=first):
        execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("400"))], [], None, at=T0)
    for i in range(0, 10 * 144, 3):
        at = T0 + i * TEN
        take_snapshot(at, cohorts=[c for c in (first, second) if at >= c.week_start])
        if i == 8 * 144:  # the market resolves on day 8: the first cohort's entries move
            Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="Yes")
            settle_market(market, at=at + TEN)
    assert Snapshot.objects.filter(entry__cohort=first).values("total").distinct().count() > 1
    _assert_same_as_reference()


def test_replay_scope_and_sparse_hourly_snapshots_give_the_per_request_figures():
    comp = make_competitor("sparse")
    (_, (e1,)), (_, (e2,)) = (
        make_cohort_with_entries(1, week_start=T0 + timedelta(weeks=w), kind=Cohort.Kind.REPLAY,
                                 competitors=[comp])
        for w in (0, 1)
    )  # fmt: skip
    store_snapshots([snapshot_row(e1, T0 + timedelta(hours=h), 10_000 + 7 * h) for h in range(300)])
    store_snapshots(
        [
            snapshot_row(e2, T0 + timedelta(weeks=1, hours=h, minutes=13), 10_000 - 3 * h)
            for h in range(9)
        ]
    )
    _assert_same_as_reference("replay")


# Entries: (competitor 0-2, first step, number of snapshots, minutes between them, seed).
entries_strategy = st.lists(
    st.tuples(
        st.integers(0, 2), st.integers(0, 400), st.integers(1, 300),
        st.sampled_from([7, 10, 60]), st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=5,
)  # fmt: skip


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=entries_strategy)
def test_any_history_gives_the_per_request_figures(plan):
    competitors = [make_competitor() for _ in range(3)]
    made = []
    try:
        for n, (who, lo, count, minutes, seed) in enumerate(plan):
            cohort, (entry,) = make_cohort_with_entries(
                1, week_start=T0 + timedelta(weeks=n), competitors=[competitors[who]]
            )
            made.append(cohort)
            start = T0 + lo * TEN
            totals = _walk(seed, count)
            store_snapshots(
                [snapshot_row(entry, start + i * timedelta(minutes=minutes), t)
                 for i, t in enumerate(totals)]
            )  # fmt: skip
        _assert_same_as_reference()
    finally:
        # As in production, what a deletion runs once it commits (the overview's rebuild).
        with TestCase.captureOnCommitCallbacks(execute=True):
            for cohort in made:
                cohort.delete()
            for comp in competitors:
                comp.delete()


def test_the_migration_replaces_stored_plain_means_with_the_growth_factors():
    """Databases from before stored a plain mean return per grid point in the same rows: the
    migration recomputes every scope's factors from the entries' stored chunks."""
    from importlib import import_module

    from django.apps import apps

    comp = make_competitor("migrated")
    _, (entry,) = make_cohort_with_entries(1, week_start=T0, competitors=[comp])
    store_snapshots([snapshot_row(entry, T0 + i * TEN, 10_000 + 5 * i) for i in range(300)])
    factors = _factors()
    assert factors
    ScopeSeriesChunk.objects.update(values=np.full(series.CHUNK, 1.5).astype("<f8").tobytes())
    ScopeSeriesChunk.objects.filter(step=series.FINEST).delete()
    migration = import_module("cohorts.migrations.0011_overview_growth_factors")
    migration.recompute(apps, None)
    assert _factors() == factors
