"""The rehearsal's Polymarket stand-in read by the arena's real clients and services: the live
sync stores the world's top markets with the prices of the simulated instant, resolution waits
for the oracle and then records what the world decided, and faults reach the client's retries."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from core.clock import running_on
from markets.clob import ClobClient
from markets.gamma import GammaClient, GammaUnavailable
from markets.models import Market
from markets.sync import sync_markets
from markets.upstream import resolve_markets
from simulations.demo_plan import build_plan
from simulations.world import RESOLVE_DELAY, World, token_id
from tests.fixtures import WORLD_START

START = WORLD_START


@pytest.fixture(scope="module")
def world() -> World:
    return World.of(build_plan(seed=11, weeks=2, n_markets=40, start=START))


def _client(world_server, sleeps=None) -> GammaClient:
    return GammaClient(
        world_server.url,
        timeout=1.0,
        retries=2,
        page_size=7,
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
    )


@pytest.mark.django_db
def test_sync_stores_the_top_markets_with_the_prices_of_the_simulated_instant(
    world, world_clock, world_server
):
    with running_on(world_clock):
        report = sync_markets(15, client=_client(world_server))
    assert report.stored == 15 and report.pages == 3  # 7 + 7 + 1: cursors followed and bound
    top = [m for m in world.listed(START) if m.close_at > START][:15]  # closed=false
    stored = {m.external_id: m for m in Market.objects.all()}
    assert set(stored) == {m.key for m in top}
    m = top[0]
    assert Decimal(stored[m.key].last_prices["Yes"]) == m.price_at(START)
    assert stored[m.key].last_priced_at == START


@pytest.mark.django_db
def test_resolution_follows_the_world_on_its_clock(world, world_clock, world_server):
    with running_on(world_clock):
        sync_markets(40, client=_client(world_server))
    first = min(
        (
            m
            for m in world.plan.markets
            if m.outcome and m.key != world.disputed_key and m.open_at <= START < m.close_at
        ),
        key=lambda m: m.close_at,
    )
    world_clock.set(first.close_at + timedelta(minutes=5))
    with running_on(world_clock):
        resolve_markets(client=_client(world_server))
    assert (
        Market.objects.get(external_id=first.key).status == Market.Status.CLOSED
    )  # proposed: waits
    world_clock.set(first.close_at + RESOLVE_DELAY)
    with running_on(world_clock):
        resolve_markets(client=_client(world_server))
    market = Market.objects.get(external_id=first.key)
    assert (market.status, market.resolved_outcome) == (Market.Status.RESOLVED, first.outcome)
    assert market.resolved_at == first.close_at + RESOLVE_DELAY


def test_faults_reach_the_clients_retries(world, world_server):
    sleeps: list[float] = []
    world_server.fail("/markets/keyset", "status", times=1, status=429, retry_after="3")
    world_server.fail("/markets/keyset", "truncated", times=1)
    pages = list(_client(world_server, sleeps).iter_top_markets(5))
    assert [len(p) for p in pages] == [5] and sleeps[0] == 3.0
    world_server.fail("/markets/keyset", "status", times=3, status=503)
    with pytest.raises(GammaUnavailable):
        list(_client(world_server, sleeps).iter_top_markets(5))


def test_price_history_goes_no_further_than_the_clock(world, world_clock, world_server):
    m = next(m for m in world.listed(START) if m.close_at > START + timedelta(days=1))
    world_clock.set(START + timedelta(days=1))
    points = ClobClient(world_server.url, timeout=1.0, retries=0).prices_history(
        token_id(m.key, "Yes"), start=START - timedelta(days=3), end=START + timedelta(days=5)
    )
    assert points and max(t for t, _ in points) <= START + timedelta(days=1)
    assert min(t for t, _ in points) >= max(m.open_at, START - timedelta(days=3))
