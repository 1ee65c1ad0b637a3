"""sync_markets against the fake Gamma server: what ends up in the database."""

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from markets.gamma import GammaClient, GammaUnavailable
from markets.models import Market, PricePoint
from markets.services import sync_markets
from tests.fakes.gamma_server import (
    bulk_markets,
    example_open_binary,
    make_market,
    neg_risk_event,
    over_under_market,
    team_names_market,
    up_down_market,
)

pytestmark = pytest.mark.django_db


def prices_of(external_id: str) -> list[tuple[str, Decimal, Decimal | None, Decimal | None]]:
    return list(
        PricePoint.objects.filter(market__external_id=external_id)
        .order_by("ts", "id")
        .values_list("outcome", "price", "bid", "ask")
    )


def test_first_sync_stores_markets_and_prices(gamma, gamma_client):
    gamma.add(example_open_binary(), *neg_risk_event(resolved=False), *bulk_markets(20))
    report = sync_markets(100, client=gamma_client)

    assert report.stored == 24 and report.new == 24 and report.price_points == 48
    m = Market.objects.get(external_id="516706")
    assert m.source == Market.Source.POLYMARKET and m.question == "Fed rate hike in 2025?"
    assert m.condition_id == "0x4319532e181605cb15b1bd677759a3bc7f7394b2fdf145195b700eeaedfd5221"
    assert (m.slug, m.event_slug, m.event_title) == (
        "fed-rate-hike-in-2025",
        "fed-rate-hike-in-2025",
        "Fed rate hike in 2025?",
    )
    assert m.description.startswith("This market will resolve to “Yes”")
    assert m.tags == ["Fed Rates", "Politics"] and m.category == "Fed Rates"
    assert m.outcomes == ["Yes", "No"] and m.kind == Market.Kind.BINARY
    assert len(m.token_ids) == 2 and m.token_ids[1].startswith("8110463775058884086")
    assert m.volume == Decimal("1089143.41") and m.liquidity == Decimal("51025.14")
    assert m.close_time.isoformat() == "2025-12-10T12:00:00+00:00"
    assert m.status == Market.Status.OPEN and m.tracked and m.in_top and not m.needs_attention
    assert m.last_prices == {"Yes": "0.0025", "No": "0.9975"}
    assert m.last_priced_at == m.last_synced_at
    assert m.raw["submitted_by"] == "0x91430CaD2d3975766499717fA0D66A78D814E5c5"
    # Mid from outcomePrices; bid/ask given for "Yes", complements for "No".
    assert prices_of("516706") == [
        ("Yes", Decimal("0.0025"), Decimal("0.002"), Decimal("0.003")),
        ("No", Decimal("0.9975"), Decimal("0.997"), Decimal("0.998")),
    ]


def test_neg_risk_legs_are_grouped(gamma, gamma_client):
    gamma.add(*neg_risk_event(resolved=False))
    sync_markets(10, client=gamma_client)
    legs = Market.objects.order_by("group_item_threshold")
    assert [leg.group_item_title for leg in legs] == ["27°F or below", "32-33°F", "38°F or higher"]
    assert [leg.group_item_threshold for leg in legs] == [0, 3, 6]
    assert len({leg.neg_risk_market_id for leg in legs}) == 1 and all(leg.neg_risk for leg in legs)
    assert {leg.event_slug for leg in legs} == {"highest-temperature-in-nyc-on-december-30"}
    assert {leg.category for leg in legs} == {"Highest temperature"}


@pytest.mark.parametrize(
    "factory, outcomes",
    [
        (up_down_market, ["Up", "Down"]),
        (team_names_market, ["K27", "Walczaki"]),
        (over_under_market, ["Over", "Under"]),
    ],
)
def test_named_binary_markets(gamma, gamma_client, factory, outcomes):
    raw = factory()
    gamma.add(raw)
    sync_markets(10, client=gamma_client)
    m = Market.objects.get()
    assert m.kind == Market.Kind.BINARY and m.outcomes == outcomes
    assert list(m.last_prices) == outcomes
    points = prices_of(raw["id"])
    assert [p[0] for p in points] == outcomes
    assert sum(p[1] for p in points) == 1
    if "bestBid" in raw:  # second side quoted as the complement of the first
        assert points[1][2] == 1 - points[0][3] and points[1][3] == 1 - points[0][2]


def test_limit_takes_the_top_by_volume(gamma, gamma_client):
    markets = bulk_markets(250)
    gamma.add(*markets)
    report = sync_markets(150, client=gamma_client)
    assert report.pages == 2 and report.stored == 150
    stored = set(Market.objects.values_list("external_id", flat=True))
    assert stored == {m["id"] for m in markets[:150]}
    assert Market.objects.filter(in_top=True).count() == 150


def test_resync_updates_prices_and_adds_a_point_per_sync(gamma, gamma_client):
    gamma.add(*bulk_markets(30))
    sync_markets(30, client=gamma_client)
    first = Market.objects.get(external_id="2000001")

    gamma.markets = bulk_markets(30, shift=0.03)
    report = sync_markets(30, client=gamma_client)

    assert report.new == 0 and report.stored == 30
    m = Market.objects.get(external_id="2000001")
    assert m.last_prices != first.last_prices
    assert Decimal(m.last_prices["Yes"]) == Decimal(first.last_prices["Yes"]) + Decimal("0.03")
    assert m.last_priced_at > first.last_priced_at and m.created_at == first.created_at
    assert PricePoint.objects.count() == 30 * 2 * 2
    assert PricePoint.objects.filter(market=m).values("ts").distinct().count() == 2


def test_unreadable_market_is_skipped_and_counted(gamma, gamma_client):
    bad = make_market("2", outcomes=("Yes", "No"))
    bad["outcomes"] = "Yes or No"
    gamma.add(make_market("1", volume=3), bad, make_market("3", volume=1))
    report = sync_markets(10, client=gamma_client)
    assert report.parse_errors == 1 and report.stored == 2
    assert set(Market.objects.values_list("external_id", flat=True)) == {"1", "3"}


def test_garbage_price_never_overwrites_a_good_one(gamma, gamma_client):
    gamma.add(make_market("1", prices=("0.6", "0.4")))
    sync_markets(10, client=gamma_client)
    good = Market.objects.get()

    gamma.set_prices("1", ["NaN", "0.4"])
    report = sync_markets(10, client=gamma_client)

    m = Market.objects.get()
    assert report.bad_prices == 1
    assert m.last_prices == {"Yes": "0.6", "No": "0.4"} and m.last_priced_at == good.last_priced_at
    assert m.needs_attention and "NaN" in m.attention_reason
    assert PricePoint.objects.filter(market=m).count() == 2  # only the first sync's points
    assert m.last_synced_at > good.last_synced_at  # the rest of the market still refreshed

    # The flag stays for staff even after prices recover; prices move on again.
    gamma.set_prices("1", ["0.7", "0.3"])
    sync_markets(10, client=gamma_client)
    m.refresh_from_db()
    assert m.last_prices == {"Yes": "0.7", "No": "0.3"} and m.needs_attention


def test_new_market_with_garbage_prices_is_stored_unpriced(gamma, gamma_client):
    gamma.add(make_market("1", prices=("1.2", "-0.2")))
    sync_markets(10, client=gamma_client)
    m = Market.objects.get()
    assert m.last_prices == {} and m.last_priced_at is None and m.needs_attention
    assert not PricePoint.objects.exists()


def test_market_leaving_the_top_stays_tracked_and_refreshed(gamma, gamma_client):
    gamma.add(*bulk_markets(10))
    sync_markets(5, client=gamma_client)
    leaving = "2000004"
    assert Market.objects.get(external_id=leaving).in_top

    gamma.update(leaving, volumeNum=1.0)  # drops out of the top 5
    gamma.set_prices(leaving, ["0.11", "0.89"])
    report = sync_markets(5, client=gamma_client)

    m = Market.objects.get(external_id=leaving)
    assert report.left_top == 1 and report.tracked_checked == 1 and report.tracked_refreshed == 1
    assert not m.in_top and m.tracked
    assert m.last_prices == {"Yes": "0.11", "No": "0.89"}
    assert PricePoint.objects.filter(market=m).count() == 4
    lookup = [r for r in gamma.requests_to("/markets/keyset") if "condition_ids" in r.query]
    assert lookup and all(r.query["condition_ids"] == [m.condition_id] for r in lookup)
    assert Market.objects.filter(in_top=True).count() == 5


def test_tracked_market_that_closed_upstream_becomes_closed(gamma, gamma_client):
    gamma.add(*bulk_markets(3))
    sync_markets(3, client=gamma_client)
    gamma.update(
        "2000001", closed=True, closedTime="2026-11-01 10:00:00+00", umaResolutionStatus="proposed"
    )
    sync_markets(3, client=gamma_client)
    m = Market.objects.get(external_id="2000001")
    assert m.status == Market.Status.CLOSED and not m.in_top and m.tracked
    assert m.uma_status == "proposed" and m.closed_time.isoformat() == "2026-11-01T10:00:00+00:00"


def test_tracked_market_without_condition_id_is_looked_up_by_id(gamma, gamma_client):
    raw = make_market("1")
    del raw["conditionId"]
    gamma.add(raw, *bulk_markets(2))
    sync_markets(3, client=gamma_client)
    gamma.update("1", volumeNum=0.0)
    gamma.set_prices("1", ["0.2", "0.8"])
    report = sync_markets(2, client=gamma_client)
    assert report.tracked_refreshed == 1 and gamma.requests_to("/markets/1")
    assert Market.objects.get(external_id="1").last_prices == {"Yes": "0.2", "No": "0.8"}


def test_tracked_market_gone_upstream_is_counted_not_guessed(gamma, gamma_client):
    gamma.add(*bulk_markets(3))
    sync_markets(3, client=gamma_client)
    gamma.remove("2000002")
    report = sync_markets(3, client=gamma_client)
    assert report.tracked_missing == 1
    m = Market.objects.get(external_id="2000002")
    assert m.status == Market.Status.OPEN and m.tracked  # resolve_markets decides what it means


def test_untracked_market_is_not_refreshed(gamma, gamma_client):
    gamma.add(*bulk_markets(3))
    sync_markets(3, client=gamma_client)
    Market.objects.filter(external_id="2000002").update(tracked=False)
    gamma.remove("2000002")
    report = sync_markets(2, client=gamma_client)  # 2000002 (lowest volume) leaves the top
    assert report.left_top == 1 and report.tracked_checked == 0
    assert not [r for r in gamma.requests_to("/markets/keyset") if "condition_ids" in r.query]


def test_sync_never_overwrites_a_resolution(gamma, gamma_client):
    gamma.add(make_market("1"))
    sync_markets(10, client=gamma_client)
    Market.objects.update(
        status=Market.Status.RESOLVED, resolved_outcome="Yes", resolved_by="admin"
    )
    sync_markets(10, client=gamma_client)
    m = Market.objects.get()
    assert (m.status, m.resolved_outcome, m.resolved_by) == ("resolved", "Yes", "admin")


def test_other_sources_are_left_alone(gamma, gamma_client):
    Market.objects.create(
        source=Market.Source.DEMO, external_id="1", question="Demo?", outcomes=["Yes", "No"]
    )
    gamma.add(make_market("1"))
    sync_markets(10, client=gamma_client)
    assert Market.objects.count() == 2
    assert Market.objects.get(source=Market.Source.DEMO).question == "Demo?"


def test_repeated_cursor_does_not_duplicate_or_drop_top_flags(gamma, gamma_client):
    gamma.add(*bulk_markets(250))
    sync_markets(250, client=gamma_client)
    gamma.repeat_cursor = True
    report = sync_markets(250, client=gamma_client)
    assert report.stopped_early and report.stored == 100
    assert PricePoint.objects.count() == 250 * 2 * 2  # 100 from the walk, 150 refreshed
    # A truncated walk says nothing about who left the top; the 150 not reached are refreshed.
    assert report.left_top == 0 and Market.objects.filter(in_top=True).count() == 250
    assert report.tracked_refreshed == 150


def test_gamma_failure_mid_sync_keeps_committed_pages(gamma, sleeps):
    gamma.add(*bulk_markets(250))
    gamma_client = GammaClient(gamma.url, timeout=1, retries=1, sleep=sleeps.append)
    pages = []

    def on_page(n):
        pages.append(n)
        if len(pages) == 1:
            gamma.fail(status=502, times=5)  # the next page fails past every retry

    with pytest.raises(GammaUnavailable):
        sync_markets(250, client=gamma_client, on_page=on_page)
    assert Market.objects.count() == 100 and PricePoint.objects.count() == 200


def count_sync_queries(gamma, limit: int, page_size: int) -> tuple[int, list[int]]:
    """Statements for a whole sync, and per page (between two page callbacks)."""
    gamma_client = GammaClient(gamma.url, timeout=5, retries=0, page_size=page_size)
    marks: list[int] = []
    with CaptureQueriesContext(connection) as ctx:
        sync_markets(limit, client=gamma_client, on_page=lambda n: marks.append(len(ctx)))
    per_page = [b - a for a, b in zip(marks, marks[1:])]
    return len(ctx.captured_queries), per_page


def test_query_count_does_not_depend_on_markets_per_page(gamma):
    gamma.add(*bulk_markets(400))
    total_small, per_small = count_sync_queries(gamma, 400, page_size=20)  # 20 pages of 20
    Market.objects.all().delete()
    total_big, per_big = count_sync_queries(gamma, 400, page_size=100)  # 4 pages of 100
    assert set(per_small) == set(per_big) and len(set(per_big)) == 1
    (per_page,) = set(per_big)
    assert per_page <= 4  # (SAVEPOINT), upsert markets, insert price points, (RELEASE)
    # The rest of the sync is a fixed overhead whatever the page size.
    assert total_small - 20 * per_page == total_big - 4 * per_page


def test_resync_query_count_does_not_depend_on_markets_per_page(gamma):
    gamma.add(*bulk_markets(400))
    count_sync_queries(gamma, 400, page_size=100)
    gamma.markets = bulk_markets(400, shift=0.01)
    _, per_small = count_sync_queries(gamma, 400, page_size=25)
    _, per_big = count_sync_queries(gamma, 400, page_size=100)
    assert set(per_small) == set(per_big) and len(set(per_big)) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_syncs_are_safe(gamma):
    gamma.add(*bulk_markets(300))

    def run():
        try:
            gamma_client = GammaClient(gamma.url, timeout=5, retries=1, sleep=lambda s: None)
            return sync_markets(300, client=gamma_client).stored
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: run(), range(2)))
    assert results == [300, 300]
    assert Market.objects.count() == 300
    assert PricePoint.objects.count() == 300 * 2 * 2
