"""The home page's default chart is stored by every series write (cohorts/series/chart.py) and
read as stored: always the chart the committed series give, named at render."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cohorts.models import Entry, ScopeSeriesHead
from cohorts.series import chart as series_chart
from cohorts.series import write as series
from cohorts.snapshots import store_snapshots
from tests.factories import make_cohort_with_entries, make_competitor, snapshot_row

T0 = datetime(2026, 11, 1, tzinfo=UTC)  # a Sunday
TEN = timedelta(minutes=10)


def stored(scope: str = "live"):
    return ScopeSeriesHead.objects.get(scope=scope).home_chart


def tick(entries, at, total) -> None:
    store_snapshots([snapshot_row(e, at, total(e)) for e in entries])


@pytest.mark.django_db
def test_every_kind_of_series_write_stores_the_chart_the_series_give():
    a, b = make_competitor("home-a"), make_competitor("home-b")
    _, entries = make_cohort_with_entries(1, week_start=T0, competitors=[a, b])
    for i in range(30):  # ticks
        tick(entries, T0 + i * TEN, lambda e, i=i: 10_000 + (e.pk % 3 + 1) * i)
        assert stored() == series_chart.home_chart("live")
    first = stored()
    assert [pk for pk, _ in first["lines"]] == sorted(e.competitor_id for e in entries)
    assert len(first["x"]) == len(first["lines"][0][1])

    # An older snapshot rewritten (a rebuild from there), then a second cohort joining.
    store_snapshots([snapshot_row(entries[0], T0 + 5 * TEN, 12_345)])
    assert stored() == series_chart.home_chart("live") != first
    _, later = make_cohort_with_entries(1, week_start=T0 + timedelta(days=7), competitors=[a])
    tick(later, T0 + timedelta(days=7), lambda e: 10_000)
    assert stored() == series_chart.home_chart("live")

    # rebuild_entries and rebuild_all (arena rebuild-series) store it too.
    ScopeSeriesHead.objects.update(home_chart=None)
    series.rebuild_entries([entries[1].pk], since=T0 + 10 * TEN)
    assert stored() == series_chart.home_chart("live")
    ScopeSeriesHead.objects.update(home_chart=None)
    series.rebuild_all()
    assert stored() == series_chart.home_chart("live")

    # An entry deleted: its competitor's overview is rebuilt once that commits.
    Entry.objects.filter(pk=later[0].pk).delete()
    series.rebuild_overview(a.pk)
    assert stored() == series_chart.home_chart("live")


@pytest.mark.django_db
def test_the_api_and_the_page_read_the_stored_chart_without_reading_the_series(client):
    comp = make_competitor("read-stored")
    _, entries = make_cohort_with_entries(1, week_start=T0, competitors=[comp])
    for i in range(20):
        tick(entries, T0 + i * TEN, lambda e, i=i: 10_000 + 3 * i)
    computed = client.get("/api/overview?scope=live").json()
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/api/overview?scope=live").json() == computed
        page = client.get("/?scope=live")
    assert page.status_code == 200
    series_reads = [q["sql"] for q in ctx.captured_queries if "serieschunk" in q["sql"].lower()]
    assert series_reads == []
    # Another range is computed from the series on the request.
    with CaptureQueriesContext(connection) as ctx:
        client.get("/api/overview?scope=live&range=1H")
    assert any("serieschunk" in q["sql"].lower() for q in ctx.captured_queries)
    (line,) = computed["series"]
    assert (line["competitor"], line["label"]) == ("read-stored", comp.display_name)


@pytest.mark.django_db
def test_a_rename_shows_at_once_and_a_stale_format_is_computed_on_the_request(client):
    comp = make_competitor("renamed")
    _, entries = make_cohort_with_entries(1, week_start=T0, competitors=[comp])
    for i in range(12):
        tick(entries, T0 + i * TEN, lambda e, i=i: 10_000 - 7 * i)
    before = client.get("/api/overview?scope=live").json()

    comp.display_name = "Renamed Since"
    comp.save(update_fields=["display_name"])
    (line,) = client.get("/api/overview?scope=live").json()["series"]
    assert line["label"] == "Renamed Since" and line["y"] == before["series"][0]["y"]

    for older in (None, {"format": 0, "lines": []}, {**stored(), "points": 7}):
        ScopeSeriesHead.objects.update(home_chart=older)
        assert series_chart.stored_home_chart("live") is None
        again = client.get("/api/overview?scope=live").json()
        assert again["x"] == before["x"] and again["series"][0]["y"] == before["series"][0]["y"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_writers_of_one_scope_at_once_leave_the_chart_of_both():
    """Each writer computes the chart under the scope's lock, after the other's commit: the
    one committing last read everything, so the stored chart is never missing a writer's
    points (PostgreSQL, READ COMMITTED, one connection per thread)."""
    comps = [make_competitor(f"race-{i}") for i in range(2)]
    _, entries = make_cohort_with_entries(1, week_start=T0, competitors=comps)
    for i in range(6):
        tick(entries, T0 + i * TEN, lambda e: 10_000)
    barrier = threading.Barrier(2)
    errors = []

    def write(entry, total):
        try:
            barrier.wait(timeout=10)
            for i in range(6, 30):
                store_snapshots([snapshot_row(entry, T0 + i * TEN, total + i)])
        except Exception as exc:  # the test reports it
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=write, args=(entries[0], 10_500)),
        threading.Thread(target=write, args=(entries[1], 9_500)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    chart = stored()
    assert chart == series_chart.home_chart("live")
    assert (
        len(chart["lines"]) == 2
        and chart["x"][-1]
        == series_chart.Window(T0, T0 + 29 * TEN, "ALL", series_chart.HOME_POINTS).x()[-1]
    )
