"""Back-filling price history from the CLOB's /prices-history (served by the same fake)."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from markets.clob import ClobClient
from markets.models import Market, PricePoint
from markets.services import backfill_price_history, sync_markets
from tests.fakes.gamma_server import make_market, neg_risk_event

pytestmark = pytest.mark.django_db
HOUR = 3600


@pytest.fixture
def clob(gamma, sleeps):
    return ClobClient(gamma.url, timeout=2, retries=2, sleep=sleeps.append)


def hourly(days: int, end: datetime, price=lambda i: 0.5) -> list[tuple[int, object]]:
    last = int(end.timestamp()) // HOUR * HOUR
    return [(last - i * HOUR, price(i)) for i in range(days * 24)]


def soon() -> datetime:
    return timezone.now() + timedelta(days=30)  # make_market opens markets 60 days before


def tracked(gamma, gamma_client, raw) -> Market:
    gamma.add(raw)
    sync_markets(10, client=gamma_client)
    return Market.objects.get(external_id=raw["id"])


def test_binary_history_fills_both_sides(gamma, gamma_client, clob):
    raw = make_market("1", end_date=soon())
    m = tracked(gamma, gamma_client, raw)
    yes_token = json.loads(raw["clobTokenIds"])[0]
    gamma.history[yes_token] = hourly(
        40, timezone.now(), price=lambda i: round(0.2 + (i % 50) / 100, 2)
    )

    written = backfill_price_history(m, days=30, client=clob)

    points = PricePoint.objects.filter(market=m).exclude(ts=m.last_priced_at)
    assert written == points.count() and 2 * 24 * 29 <= written <= 2 * 24 * 31
    for yes in points.filter(outcome="Yes")[:50]:
        no = points.get(outcome="No", ts=yes.ts)
        assert yes.price + no.price == 1 and yes.bid is None
    windows = [r.query for r in gamma.requests_to("/prices-history")]
    assert all(q["market"] == [yes_token] for q in windows)
    assert all(int(q["endTs"][0]) - int(q["startTs"][0]) <= 14 * 86400 for q in windows)
    assert len(windows) == 3  # 30 days in 14-day chunks

    assert backfill_price_history(m, days=30, client=clob) == 0  # nothing new the second time


def test_refused_long_window_is_split(gamma, gamma_client, clob):
    raw = make_market("1", end_date=soon())
    m = tracked(gamma, gamma_client, raw)
    gamma.history[json.loads(raw["clobTokenIds"])[0]] = hourly(14, timezone.now())
    gamma.history_max_days = 5  # this server refuses anything over 5 days
    written = backfill_price_history(m, days=14, client=clob)
    assert written >= 2 * 24 * 13
    statuses = [r for r in gamma.requests_to("/prices-history")]
    assert len(statuses) > 3  # the refused 14-day window was retried in halves


def test_closed_market_uses_coarse_fidelity(gamma, gamma_client, clob):
    closed_at = timezone.now() - timedelta(days=2)
    raw = make_market("1", end_date=closed_at)
    m = tracked(gamma, gamma_client, raw)
    gamma.update("1", closed=True, closedTime=closed_at.strftime("%Y-%m-%d %H:%M:%S+00"))
    sync_markets(10, client=gamma_client)
    m.refresh_from_db()
    gamma.history[json.loads(raw["clobTokenIds"])[0]] = hourly(10, timezone.now())
    synced = list(PricePoint.objects.values_list("id", flat=True))
    written = backfill_price_history(m, days=10, client=clob)
    assert written > 0
    assert {q.query["fidelity"][0] for q in gamma.requests_to("/prices-history")} == {"720"}
    filled = PricePoint.objects.exclude(id__in=synced)
    assert filled.count() == written and not filled.filter(ts__gt=m.closed_time).exists()


def test_garbage_points_are_dropped(gamma, gamma_client, clob):
    raw = make_market("1", end_date=soon())
    m = tracked(gamma, gamma_client, raw)
    now = int(timezone.now().timestamp())
    gamma.history[json.loads(raw["clobTokenIds"])[0]] = [
        (now - 3 * HOUR, 0.4),
        (now - 2 * HOUR, 1.5),
        (now - HOUR, "NaN"),
    ]
    assert backfill_price_history(m, days=1, client=clob) == 2
    point = PricePoint.objects.get(
        market=m, outcome="Yes", ts=datetime.fromtimestamp(now - 3 * HOUR, UTC)
    )
    assert point.price == Decimal("0.4")


def test_multi_token_history_per_outcome(gamma, gamma_client, clob):
    raw = make_market("1", outcomes=("A", "B", "C"), prices=("0.2", "0.3", "0.5"), end_date=soon())
    m = tracked(gamma, gamma_client, raw)
    assert m.kind == Market.Kind.MULTI
    for i, token in enumerate(json.loads(raw["clobTokenIds"])):
        gamma.history[token] = hourly(1, timezone.now(), price=lambda _, i=i: [0.2, 0.3, 0.5][i])
    written = backfill_price_history(m, days=1, client=clob)
    assert written == 3 * 24
    assert set(
        PricePoint.objects.filter(market=m, price=Decimal("0.3")).values_list("outcome", flat=True)
    ) == {"B"}


def test_markets_without_tokens_are_skipped(clob, gamma):
    demo = Market.objects.create(
        source="demo", external_id="d", question="?", outcomes=["Yes", "No"]
    )
    assert backfill_price_history(demo, client=clob) == 0
    leg = neg_risk_event(resolved=False)[0]
    legacy = Market.objects.create(external_id=leg["id"], question="?", outcomes=["Yes", "No"])
    assert backfill_price_history(legacy, client=clob) == 0
    assert gamma.requests == []


def test_daily_backfill_covers_only_held_markets(gamma, gamma_client, clob):
    from cohorts.holdings import backfill_held_markets
    from cohorts.services import BetOrder, execute_orders
    from tests.factories import make_cohort_with_entries

    held_raw, idle_raw = make_market("11", end_date=soon()), make_market("12", end_date=soon())
    held, idle = tracked(gamma, gamma_client, held_raw), tracked(gamma, gamma_client, idle_raw)
    for raw in (held_raw, idle_raw):
        gamma.history[json.loads(raw["clobTokenIds"])[0]] = hourly(3, timezone.now())
    sunday = datetime(2026, 11, 15, tzinfo=UTC)
    _, (entry,) = make_cohort_with_entries(1, week_start=sunday, at=sunday)
    execute_orders(entry, [BetOrder(held.pk, "Yes", Decimal("60"))], [], None)

    before = {m.pk: PricePoint.objects.filter(market=m).count() for m in (held, idle)}

    summary = backfill_held_markets(days=2, client=clob)

    assert summary["markets"] == 1 and summary["failed"] == 0 and summary["points"] > 0
    assert PricePoint.objects.filter(market=idle).count() == before[idle.pk]  # nobody holds it
    assert PricePoint.objects.filter(market=held).count() == before[held.pk] + summary["points"]
