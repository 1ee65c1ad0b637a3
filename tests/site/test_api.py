"""The JSON API: shapes, money as two-decimal strings, bounds, downsampling."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from cohorts.models import Snapshot
from cohorts.series import write as series
from cohorts.snapshots import SnapshotRow, store_snapshots
from tests.site.conftest import T0
from web import charts

pytestmark = pytest.mark.django_db


def test_cohorts_list_and_detail(client, arena_world):
    cohort = arena_world.cohort_main
    data = client.get("/api/cohorts/").json()
    assert [c["id"] for c in data["cohorts"]] == [cohort.pk]
    assert data["cohorts"][0]["kind"] == "live"
    assert data["cohorts"][0]["entries"] == 3
    assert data["cohorts"][0]["initial_balance"] == "10000.00"

    detail = client.get(f"/api/cohorts/{cohort.pk}").json()
    first = detail["entries"][0]
    assert set(first) >= {"competitor", "cash", "value", "invested", "trades", "return_pct"}
    assert isinstance(first["cash"], str) and first["cash"].count(".") == 1
    assert len(first["cash"].split(".")[1]) == 2
    # the entry that won: cash after three $100 buys
    alpha = next(e for e in detail["entries"] if e["competitor"] == "alpha-model")
    assert alpha["cash"] == "9700.00"
    assert alpha["trades"] == 3
    assert alpha["resolved_positions"] == 1


def test_cohort_list_limit_is_bounded(client, world):
    for i in range(3):
        world.cohort(weeks_ago=i)
    resp = client.get("/api/cohorts/?limit=100000")
    assert resp.status_code == 400  # past the cap: said, not silently clamped
    assert resp.json() == {"error": "limit must be a whole number from 1 to 200"}
    assert client.get("/api/cohorts/?limit=200").json()["limit"] == 200
    data = client.get("/api/cohorts/?limit=2&offset=1").json()
    assert len(data["cohorts"]) == 2


def test_series_ranges_and_shared_axis(client, arena_world):
    cohort = arena_world.cohort_main
    full = client.get(f"/api/cohorts/{cohort.pk}/series?range=ALL").json()
    assert full["range"] == "ALL"
    assert len(full["x"]) == 12  # 12 snapshots, 10 minutes apart: no downsampling needed
    assert len(full["entries"]) == 3
    assert all(len(e["y"]) == len(full["x"]) for e in full["entries"])
    hour = client.get(f"/api/cohorts/{cohort.pk}/series?range=1H").json()
    assert len(hour["x"]) == 7  # the last hour, both ends included
    ten = client.get(f"/api/cohorts/{cohort.pk}/series?range=10M").json()
    assert len(ten["x"]) == 2
    # an unknown range is refused, not silently replaced by ALL
    bogus = client.get(f"/api/cohorts/{cohort.pk}/series?range=bogus")
    assert bogus.status_code == 400
    assert bogus.json() == {"error": "range must be one of 10M, 1H, 1D, 1W, 1M, 3M, ALL"}
    assert client.get(f"/api/cohorts/{cohort.pk}/series?range=1h").json()["range"] == "1H"


def test_series_for_one_entry(client, arena_world):
    entry = arena_world.entries[1]
    data = client.get(f"/api/cohorts/{entry.cohort_id}/series?entry={entry.pk}").json()
    assert [e["entry"] for e in data["entries"]] == [entry.pk]


def test_series_downsamples_to_at_most_max_points(client, world):
    comp = world.competitor()
    cohort = world.cohort()
    entry = world.entry(cohort, comp)
    n = 3 * 1008  # three weeks of 10-minute snapshots, total = its index
    store_snapshots([
        SnapshotRow(entry_id=entry.pk, ts=T0 + timedelta(minutes=10 * i), cash=Decimal("1"),
                 positions_value=Decimal("0"), total=Decimal(i), realized_pnl=Decimal("0"),
                 unrealized_pnl=Decimal("0"))
        for i in range(n)
    ])  # fmt: skip
    data = client.get(f"/api/cohorts/{cohort.pk}/series?range=ALL").json()
    assert 100 < len(data["x"]) <= charts.MAX_POINTS
    assert data["step_seconds"] % 3600 == 0
    y = data["entries"][0]["y"]
    # every sample is the real snapshot at that time, and the series ends on the latest one
    for x, value in zip(data["x"], y):
        ts = datetime.strptime(x, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
        assert value == (ts - T0) / timedelta(minutes=10)
    assert y[-1] == n - 1
    week = client.get(f"/api/cohorts/{cohort.pk}/series?range=1W").json()
    assert week["x"][-1] == data["x"][-1]
    assert week["entries"][0]["y"][0] == pytest.approx(n - 1 - 1008, abs=6)


def test_series_carries_the_last_snapshot_over_a_missing_one(client, world):
    """A missing snapshot is no gap: the value at a sample time is the entry's latest snapshot
    at or before it (a sparse replay history would otherwise draw nothing)."""
    comp = world.competitor()
    cohort = world.cohort()
    entry = world.entry(cohort, comp)
    world.snapshots(entry, n=6)
    Snapshot.objects.filter(entry=entry, ts=T0 + timedelta(minutes=20)).delete()
    series.rebuild_entries([entry.pk])  # a row removed around the services: rebuild
    y = client.get(f"/api/cohorts/{cohort.pk}/series").json()["entries"][0]["y"]
    assert None not in y and len(y) == 6
    assert y[2] == y[1] and y[3] > y[2]


def test_series_of_a_sparse_history_has_a_value_at_every_sample(client, world):
    """Snapshots days apart (a replay's clock steps) still draw a line at every sample time,
    null only outside an entry's life."""
    comp, other = world.competitor(), world.competitor()
    cohort = world.cohort()
    entry, late = world.entry(cohort, comp), world.entry(cohort, other)
    for i, e in enumerate((entry, late)):  # both to day 12; the late one from day 3
        store_snapshots(
            [
                SnapshotRow(
                    entry_id=e.pk,
                    ts=T0 + timedelta(days=3 * d + 3 * i),
                    cash=Decimal("10000"),
                    positions_value=Decimal("0"),
                    total=Decimal(10000 + d),
                    realized_pnl=Decimal("0"),
                    unrealized_pnl=Decimal("0"),
                )
                for d in range(5 - i)
            ]
        )
    data = client.get(f"/api/cohorts/{cohort.pk}/series").json()
    by_entry = {e["entry"]: e["y"] for e in data["entries"]}
    assert len(data["x"]) > 100
    assert None not in by_entry[entry.pk]
    assert by_entry[entry.pk][0] == 10000 and by_entry[entry.pk][-1] == 10004
    late_y = by_entry[late.pk]
    born = late_y.index(10000)
    assert set(late_y[:born]) == {None} and None not in late_y[born:]


def test_decision_api_is_the_full_audit(client, arena_world):
    d = arena_world.decisions[0]
    data = client.get(f"/api/decisions/{d.pk}").json()
    assert data["system_prompt"] == "You are a forecaster."
    assert data["llm_calls"][0]["raw_response"] == '{"action": "BET"}'
    assert data["llm_calls"][0]["served_model"] == "vendor/model-2026"
    assert data["cost_usd"] == "0.012000"
    assert data["trades"][0]["amount"] == "100.00"
    assert data["forecasts"][0]["probability"] == 0.55
    assert data["cohort"]["kind"] == "live"


def test_markets_list_filters_and_bounds(client, arena_world):
    data = client.get("/api/markets?status=resolved").json()
    assert [m["question"] for m in data["markets"]] == ["Did the resolved market happen?"]
    assert data["markets"][0]["resolved_outcome"] == "Yes"
    data = client.get("/api/markets?q=second").json()
    assert len(data["markets"]) == 1
    data = client.get("/api/markets?limit=1&offset=1").json()
    assert len(data["markets"]) == 1 and data["offset"] == 1
    assert client.get("/api/markets?limit=9999").status_code == 400
    assert client.get("/api/markets?limit=200").json()["limit"] == 200
    for bad in ("limit=abc", "limit=-1", "limit=0", "offset=-1", "status=bogus", "q=%00"):
        resp = client.get(f"/api/markets?{bad}")
        assert resp.status_code == 400, bad
        assert set(resp.json()) == {"error"} and "\n" not in resp.json()["error"]
    assert client.get("/api/markets").json()["limit"] == 50  # absent: the default


def test_market_detail_api(client, arena_world):
    m = arena_world.markets[1]
    data = client.get(f"/api/markets/{m.pk}").json()
    assert data["prices"] == {"Yes": 0.4, "No": 0.6}
    assert data["positions"] and data["positions"][0]["cost_basis"] == "100.00"
    assert data["positions"][0]["cohort_kind"] == "live"
    resolved = arena_world.markets[-1]
    trail = client.get(f"/api/markets/{resolved.pk}").json()["resolution_changes"]
    assert trail[0]["to"] == {"status": "resolved", "outcome": "Yes"}


def test_api_is_read_only(client, arena_world):
    assert client.post("/api/markets").status_code == 405


def test_leaderboard_api_is_wired(client, arena_world):
    response = client.get("/api/leaderboard")
    assert response.status_code == 200
    assert [r["competitor"] for r in response.json()["rows"]][:1] == ["alpha-model"]
