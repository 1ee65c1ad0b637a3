"""The rehearsal's Polymarket world read through the arena's real Gamma parser and resolution
judge: what each instant shows, and that nothing shown comes from after that instant."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from markets.gamma import parse_market
from markets.upstream import judge
from simulations.demo_plan import build_plan
from simulations.world import DISPUTE_DELAY, RESOLVE_DELAY, World, token_id, volume_at

START = datetime(2026, 10, 4, tzinfo=UTC)


@pytest.fixture(scope="module")
def world() -> World:
    return World.of(build_plan(seed=7, weeks=2, n_markets=60, start=START))


def _verdict(world: World, m, at: datetime):
    return judge(parse_market(world.gamma_market(m, at)))


def test_every_market_parses_at_every_stage(world):
    for m in world.plan.markets[:20]:
        for at in (
            m.open_at,
            m.close_at - timedelta(minutes=1),
            m.close_at,
            world.resolved_at(m) + timedelta(hours=1),
        ):
            p = parse_market(world.gamma_market(m, at))
            assert p.external_id == m.key and p.outcomes == ["Yes", "No"]
            assert p.closed is (at >= m.close_at)
            assert p.prices is not None, p.price_error


def test_trading_prices_are_the_plans_price_then_and_never_a_later_one(world):
    m = max(world.plan.markets, key=lambda m: m.close_at - m.open_at)
    for hours in range(0, int((m.close_at - m.open_at) / timedelta(hours=1)), 7):
        at = m.open_at + timedelta(hours=hours, minutes=30)
        yes, no = parse_market(world.gamma_market(m, at)).prices
        assert yes == m.price_at(at)
        assert yes + no == 1


def test_resolution_waits_for_the_oracle_then_names_the_plans_outcome(world):
    m = next(m for m in world.plan.markets if m.outcome and m.key != world.disputed_key)
    assert _verdict(world, m, m.close_at - timedelta(seconds=1)).action == "open"
    assert _verdict(world, m, m.close_at).action == "wait"
    assert _verdict(world, m, m.close_at + RESOLVE_DELAY - timedelta(seconds=1)).action == "wait"
    final = _verdict(world, m, m.close_at + RESOLVE_DELAY)
    assert (final.action, final.outcome) == ("resolve", m.outcome)


def test_a_void_market_resolves_50_50(world):
    m = replace(world.plan.markets[0], outcome="", key="void-1")
    v = _verdict(world, m, world.resolved_at(m))
    assert (v.action, v.reason) == ("void", "50-50")


def test_the_disputed_market_waits_through_its_dispute(world):
    m = world.by_key(world.disputed_key)
    assert m is not None and m.outcome in ("Yes", "No")
    during = m.close_at + RESOLVE_DELAY + timedelta(hours=1)
    raw = world.gamma_market(m, during)
    assert json.loads(raw["umaResolutionStatuses"]) == ["proposed", "disputed"]
    assert _verdict(world, m, during).action == "wait"
    assert _verdict(world, m, m.close_at + DISPUTE_DELAY - timedelta(seconds=1)).action == "wait"
    assert _verdict(world, m, m.close_at + DISPUTE_DELAY).outcome == m.outcome


def test_listing_holds_only_opened_markets_largest_volume_first(world):
    at = START + timedelta(days=3)
    listed = world.listed(at)
    assert listed and all(m.open_at <= at for m in listed)
    assert len(listed) == sum(m.open_at <= at for m in world.plan.markets)
    volumes = [volume_at(m, at) for m in listed]
    assert volumes == sorted(volumes, reverse=True)
    assert all(parse_market(world.gamma_market(m, at)).volume >= 0 for m in listed)


def test_history_stops_at_the_instant_asked_about(world):
    m = max(world.plan.markets, key=lambda m: m.close_at - m.open_at)
    at = m.open_at + (m.close_at - m.open_at) / 2
    token = token_id(m.key, "No")
    points = world.history(m, token, m.open_at - timedelta(days=1), m.close_at, at)
    assert points and points[-1]["t"] <= at.timestamp()
    first = datetime.fromtimestamp(points[0]["t"], UTC)
    assert float(1 - m.price_at(first)) == points[0]["p"]
    assert world.token_owner(token) is m
