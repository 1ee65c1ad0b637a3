"""Fault: Polymarket's Gamma API returns garbage for an hour, then recovers.

Four consecutive 15-minute syncs (the beat's cadence) run the real sync task against the fake
Gamma server (a real HTTP server), each meeting a different kind of garbage: a truncated JSON
body, JSON of the wrong shape, NaN / out-of-range prices, and wrongly typed fields. Proves: no
stored price is overwritten with garbage (Market.last_prices and the PricePoint history stay as
the last good sync left them), staff are alerted (flagged markets and failed sync runs on
/admin/attention/, `sync` late on /healthz once the last good sync is over 45 minutes old), and
the first good answer afterwards brings fresh prices and clears the late flag.

In-process (the task called as beat's worker would call it, without Celery's retry), so it runs
on SQLite too; the client's own retries are off so each tick meets its fault once.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from core.models import JobRun
from markets.gamma import GammaError
from markets.models import Market, PricePoint
from markets.tasks import sync_markets
from tests.fakes.gamma_server import make_market as gamma_market

pytestmark = pytest.mark.django_db

IDS = ("910001", "910002", "910003")
GOOD = {"910001": {"Yes": "0.61", "No": "0.39"}, "910002": {"Yes": "0.25", "No": "0.75"},
        "910003": {"Yes": "0.5", "No": "0.5"}}  # fmt: skip


@pytest.fixture(autouse=True)
def _garbage_markets(gamma, gamma_settings):
    gamma.markets = [
        gamma_market(i, f"Garbage test market {i}?", prices=tuple(GOOD[i].values()), volume=v)
        for i, v in zip(IDS, (3000, 2000, 1000), strict=True)
    ]
    gamma_settings.ARENA_SYNC_LIMIT = 10


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("ops", password="pw-ops-12345", is_staff=True,
                                                is_superuser=True)  # fmt: skip
    client.force_login(user)
    return client


def _tick() -> str:
    """One beat tick of the sync task; returns "ok" or the error class it ended with."""
    try:
        sync_markets()
    except GammaError as exc:
        return type(exc).__name__
    return "ok"


def _decimals(prices: dict) -> dict:
    return {ext: {o: Decimal(p) for o, p in quotes.items()} for ext, quotes in prices.items()}


def _stored() -> tuple[dict, int]:
    """Every market's last prices (as Decimals) and the size of the price history."""
    prices = dict(Market.objects.values_list("external_id", "last_prices"))
    return _decimals(prices), PricePoint.objects.count()


def _sync_late(client) -> bool:
    return client.get("/healthz").json()["jobs"]["sync"]["late"]


def test_an_hour_of_garbage_from_gamma_keeps_good_prices_alerts_staff_and_recovers(
    gamma, staff_client
):
    assert _tick() == "ok"
    good = _stored()
    assert good[0] == _decimals(GOOD) and good[1] == 6
    assert not _sync_late(staff_client)
    # The good sync was an hour ago; the four below are this hour's ticks.
    hour_ago = timezone.now() - timedelta(minutes=60)
    JobRun.objects.filter(job="sync").update(started_at=hour_ago, finished_at=hour_ago)

    # :00 a truncated body, :15 valid JSON of the wrong shape, on every request.
    gamma.fail("malformed", path="/markets", times=50)
    assert _tick() == "GammaBadResponse"
    gamma.faults.clear()
    gamma.fail("shape", path="/markets", times=50)
    assert _tick() == "GammaBadResponse"
    gamma.faults.clear()
    assert _stored() == good

    # :30 prices that are not probabilities.
    gamma.update("910001", outcomePrices='["NaN", "NaN"]')
    gamma.update("910002", outcomePrices='["1.7", "-0.7"]')
    gamma.update("910003", outcomePrices='["Infinity", "0.5"]')
    assert _tick() == "GammaBadResponse"  # not a success: no usable price came in
    assert _stored() == good

    # :45 wrong types: prices as objects and as a number; a market whose question is a number
    # and whose closed flag is a string (unreadable: skipped, so its fine-looking quote is not
    # trusted either).
    gamma.update("910001", outcomePrices=json.dumps([{"p": 0.6}, {"p": 0.4}]))
    gamma.update("910002", outcomePrices=42)
    gamma.update("910003", question=12345, closed="no", outcomePrices='["0.9", "0.1"]')
    assert _tick() == "GammaBadResponse"
    assert _stored() == good

    # Staff see it: flagged markets, the failed syncs, and a late sync on /healthz.
    flagged = Market.objects.filter(needs_attention=True)
    assert set(flagged.values_list("external_id", flat=True)) >= {"910001", "910002"}
    failed = JobRun.objects.filter(job="sync", status=JobRun.Status.FAILED)
    assert failed.count() == 4 and all("GammaBadResponse" in r.error for r in failed)
    html = staff_client.get("/admin/attention/").content.decode()
    assert "Garbage test market 910001?" in html and "GammaBadResponse" in html
    assert _sync_late(staff_client)

    # Upstream recovers with new prices: they are stored, history grows, sync is on time.
    fresh = {"910001": ("0.66", "0.34"), "910002": ("0.2", "0.8"), "910003": ("0.45", "0.55")}
    for market_id, prices in fresh.items():
        gamma.update(market_id, outcomePrices=json.dumps(prices), closed=False,
                     question=f"Garbage test market {market_id}?")  # fmt: skip
    assert _tick() == "ok"
    prices, points = _stored()
    assert prices == {i: {"Yes": Decimal(y), "No": Decimal(n)} for i, (y, n) in fresh.items()}
    assert points == good[1] + 6
    assert not _sync_late(staff_client)
    # The flag stays until a human has looked (and clears it in the admin).
    assert Market.objects.filter(needs_attention=True).exists()
