"""Chart series kept by the snapshot writers (cohorts/series/write.py) equal what the snapshot rows say.

The reference everywhere is computed from the Snapshot table directly: the value at a grid time
is the total of the entry's last snapshot at or before it, within its life.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohorts.models import (
    Entry,
    ScopeSeriesChunk,
    ScopeSeriesHead,
    SeriesChunk,
    SeriesHead,
    Snapshot,
)
from cohorts.series import chart as series_chart
from cohorts.series import write as series
from cohorts.settlement import settle_market
from cohorts.snapshots import store_snapshots
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_competitor, make_market, snapshot_row
from web import chart_reads, charts

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 1, tzinfo=UTC)  # a Sunday
TEN = timedelta(minutes=10)


def _stored(entry_ids) -> dict:
    return {
        (e, step, c): bytes(v)
        for e, step, c, v in SeriesChunk.objects.filter(entry_id__in=entry_ids).values_list(
            "entry_id", "step", "chunk", "values"
        )
    }


def _overview() -> dict:
    return {
        (scope, comp, step, c): np.frombuffer(bytes(v), dtype="<f8")
        for scope, comp, step, c, v in ScopeSeriesChunk.objects.values_list(
            "scope", "competitor_id", "step", "chunk", "values"
        )
    }


def _reference(entry, step) -> dict[int, float]:
    """grid index -> value, straight from the snapshot rows."""
    rows = list(Snapshot.objects.filter(entry=entry).order_by("ts").values_list("ts", "total"))
    first, last = series.epoch(rows[0][0]), series.epoch(rows[-1][0])
    out = {}
    for k in range(-(-first // step), last // step + 1):
        at = k * step
        out[k] = float([t for ts, t in rows if series.epoch(ts) <= at][-1])
    return out


def _grid(entry, step) -> dict[int, float]:
    values = {}
    for c, raw in SeriesChunk.objects.filter(entry=entry, step=step).values_list("chunk", "values"):
        for i, v in enumerate(np.frombuffer(bytes(raw), dtype="<f8")):
            if not np.isnan(v):
                values[c * series.CHUNK + i] = float(v)
    return values


# Batches of (minutes after T0, total): ticks in order, gaps of any length, rewrites of the
# latest bucket and, now and then, a bucket older than the latest (out of order).
batches = st.lists(
    st.lists(
        st.tuples(st.integers(0, 3 * 24 * 6), st.integers(9_000, 11_000)), min_size=1, max_size=4
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=batches, cut=st.integers(0, 3 * 24 * 6))
def test_incremental_series_equal_the_snapshot_rows(batches, cut):
    _, (entry,) = make_cohort_with_entries(1)  # a new cohort per example
    try:
        for batch in batches:
            rows = {m: total for m, total in batch}  # one row per bucket per write
            store_snapshots([snapshot_row(entry, T0 + m * TEN, t) for m, t in sorted(rows.items())])
        for step in (600, 3600, 86400):
            assert _grid(entry, step) == _reference(entry, step)
        head = SeriesHead.objects.get(entry=entry)
        latest = Snapshot.objects.filter(entry=entry).latest("ts")
        assert (head.last_ts, head.last_total) == (latest.ts, latest.total)
        incremental = _stored([entry.pk])
        series.rebuild_entries([entry.pk])
        assert _stored([entry.pk]) == incremental
        # Rows after `cut` deleted around the services: rewinding from there equals a rebuild.
        Snapshot.objects.filter(entry=entry, ts__gte=T0 + cut * TEN).delete()
        series.rebuild_entries([entry.pk], since=T0 + cut * TEN)
        rewound = _stored([entry.pk])
        series.rebuild_entries([entry.pk])
        assert rewound == _stored([entry.pk])
        if Snapshot.objects.filter(entry=entry).exists():
            assert _grid(entry, 1800) == _reference(entry, 1800)
    finally:
        Entry.objects.filter(pk=entry.pk).delete()


def test_overview_is_the_mean_return_of_the_entries_alive():
    comp = make_competitor("steady")
    _, (a,) = make_cohort_with_entries(1, week_start=T0, competitors=[comp])
    _, (b,) = make_cohort_with_entries(1, week_start=T0 + timedelta(weeks=1), competitors=[comp])
    # a: +10% for its first week only; b: -20% from the second week on.
    store_snapshots([snapshot_row(a, T0 + i * TEN, 11_000) for i in range(0, 7 * 144 + 1, 6)])
    week2 = T0 + timedelta(weeks=1)
    store_snapshots([snapshot_row(b, week2 + i * TEN, 8_000) for i in range(0, 144, 6)])
    # The plain mean of the entries alive, from their stored series, jumps when b opens.
    step = 3600
    k0, k1 = series.epoch(T0) // step, series.epoch(week2 + 138 * TEN) // step
    values = series.entry_values([a.pk, b.pk], step, k0, k1)
    returns = np.vstack([(values[e.pk] / 10_000 - 1) * 100 for e in (a, b)])
    mean = np.nanmean(returns, axis=0)
    assert mean[(series.epoch(T0 + timedelta(days=1)) // step) - k0] == pytest.approx(10.0)
    assert mean[(series.epoch(week2) // step) - k0] == pytest.approx(-5.0)  # (10 - 20) / 2
    assert mean[-1] == pytest.approx(-20.0)  # a's life ended at week 2: only b counts
    assert ScopeSeriesHead.objects.get(scope="live").last_ts == week2 + 138 * TEN
    # What the scope stores instead is each step's mean growth (cohorts/series/overview.py):
    # a from its starting balance at its first point, flat afterwards; at week 2 a flat and b
    # from its balance, (1.0 + 0.8) / 2; then b alone, flat.
    ((_, factors),) = series_chart.scope_growth("live", step, k0, k1).items()
    assert factors[0] == pytest.approx(1.1)
    assert factors[(series.epoch(T0 + timedelta(days=1)) // step) - k0] == 1.0
    assert factors[(series.epoch(week2) // step) - k0] == pytest.approx(0.9)
    assert factors[-1] == 1.0
    # The home chart chain-links it instead (issue 27: the plain mean jumps whenever a cohort
    # opens): at week 2 the step's growth is the mean of a's (none) and b's from its balance
    # (-20%), so 1.10 * 0.90 = 0.99; afterwards only b runs, flat.
    payload = chart_reads.overview_payload("live", range_key="ALL")
    (line,) = payload["series"]
    points = dict(zip(payload["x"], line["y"], strict=True))
    assert points[charts.fmt_ts(T0 + timedelta(days=1))] == 10.0
    assert points[charts.fmt_ts(week2)] == pytest.approx(-1.0)
    assert points[payload["x"][-1]] == pytest.approx(-1.0)
    assert None not in line["y"]


def test_sparse_history_draws_every_range_in_full():
    """A 4-week cohort snapshotted hourly (as the demo does): no blanks, 1W spans seven days."""
    cohort, entries = make_cohort_with_entries(2, week_start=T0)
    hours = 4 * 7 * 24
    for e in entries:
        store_snapshots(
            [snapshot_row(e, T0 + timedelta(hours=h), 10_000 + h) for h in range(hours)]
        )
    last = T0 + timedelta(hours=hours - 1)
    for key in charts.RANGES:
        data = chart_reads.cohort_payload(cohort, key)
        xs = [datetime.strptime(x, "%Y-%m-%d %H:%M").replace(tzinfo=UTC) for x in data["x"]]
        assert 2 <= len(xs) <= charts.MAX_POINTS and xs[-1] == last
        window = charts.RANGES[key] or (last - T0)
        assert xs[0] - (last - min(window, last - T0)) < timedelta(seconds=data["step_seconds"])
        for e in data["entries"]:
            assert None not in e["y"]
            hour = [int((x - T0).total_seconds() // 3600) for x in xs]
            assert e["y"] == [10_000 + h for h in hour]  # the last hourly snapshot at or before
    assert "3M" in data["ranges"] and data["annotations"] == []
    overview = chart_reads.overview_payload("live", range_key="1W")
    assert overview["x"][-1] == charts.fmt_ts(last)
    assert all(None not in s["y"] for s in overview["series"])


def test_settlement_reversal_and_a_late_final_snapshot_keep_the_series_true():
    cohort, (entry,) = make_cohort_with_entries(1, week_start=T0)
    market = make_market(prices={"Yes": "0.50", "No": "0.50"})
    from cohorts.services import BetOrder, execute_orders

    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("100"))], [], None, at=T0)
    from cohorts.snapshots import take_snapshot

    for i in range(6):
        take_snapshot(T0 + i * TEN, cohorts=[cohort])
    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="Yes")
    settle_market(market, at=T0 + 6 * TEN)  # final snapshot: won 200 shares
    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="No")
    settle_market(market, at=T0 + 9 * TEN)  # staff re-resolution: reversed, then lost
    for step in (600, 1800):
        assert _grid(entry, step) == _reference(entry, step)
    data = chart_reads.cohort_payload(cohort, "ALL")
    assert data["entries"][0]["y"][-1] == float(
        Snapshot.objects.filter(entry=entry).latest("ts").total
    )


@pytest.mark.django_db(transaction=True)
def test_deleted_entries_leave_the_overview_and_a_rebuild_restores_everything():
    comp = make_competitor("deleted-later")
    cohort_a, (a,) = make_cohort_with_entries(1, week_start=T0, competitors=[comp])
    cohort_b, (b,) = make_cohort_with_entries(
        1, week_start=T0 + timedelta(days=7), competitors=[comp]
    )
    store_snapshots([snapshot_row(a, T0 + i * TEN, 12_000) for i in range(1200)])
    store_snapshots([snapshot_row(b, T0 + timedelta(days=7) + i * TEN, 9_000) for i in range(12)])
    before = _overview()
    cohort_a.delete()  # cascades to the entry; the overview follows once this commits
    after = chart_reads.overview_payload("live", range_key="ALL")
    assert {v for s in after["series"] for v in s["y"]} == {-10.0}
    assert _overview() != before
    SeriesChunk.objects.all().delete()
    ScopeSeriesChunk.objects.all().delete()
    call_command("arena", "rebuild-series")
    assert chart_reads.overview_payload("live", range_key="ALL") == after
    assert _grid(b, 600) == _reference(b, 600)


def _overview_after_full_rebuild() -> tuple[dict, dict]:
    kept = _overview()
    series.rebuild_all()
    return kept, _overview()


@pytest.mark.parametrize("kind", ["live", "demo"])
def test_a_correction_dated_before_later_snapshots_keeps_the_series_true(kind):
    """Settlement rewrites a row that is not after the entry's latest: on a simulated clock its
    latest row (the correction's wall-clock time means nothing there), on the live clock a past
    bucket when the settlement runs for a past time. The series from that row on are rebuilt in
    the settlement's transaction: they equal the rows, and a full rebuild changes nothing."""
    from cohorts.services import BetOrder, execute_orders
    from cohorts.snapshots import take_snapshot

    cohort, (entry,) = make_cohort_with_entries(1, week_start=T0, kind=kind)
    market = make_market(prices={"Yes": "0.50", "No": "0.50"})
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("100"))], [], None, at=T0)
    for i in range(12):
        take_snapshot(T0 + i * TEN, cohorts=[cohort])
    # Live: settled "as of" 40 minutes in, with later rows already there. Demo: at the wall
    # clock, long after the cohort's own clock stopped.
    at = T0 + 4 * TEN if kind == "live" else T0 + timedelta(days=30)
    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="Yes")
    settle_market(market, at=at)
    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="No")
    settle_market(market, at=at + TEN)  # the staff re-resolution: reversed, then lost
    latest = Snapshot.objects.filter(entry=entry).latest("ts")
    if kind == "demo":
        assert latest.ts == T0 + 11 * TEN  # no row at the wall-clock time
    for step in (600, 1800, 3600):
        assert _grid(entry, step) == _reference(entry, step)
    head = SeriesHead.objects.get(entry=entry)
    assert (head.last_ts, head.last_total) == (latest.ts, latest.total)
    kept, rebuilt = _overview_after_full_rebuild()
    assert kept.keys() == rebuilt.keys()
    for key, values in kept.items():
        np.testing.assert_array_equal(values, rebuilt[key])
