"""record_resolution stamps when the arena recorded a market's resolution state, on the clock of
record and apart from upstream's resolution time; a correction and a reopen restamp it, and the
stamp is taken after the settlement, the nearest the transaction gets to its commit."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from cohorts.models import Cohort, Position, Settlement
from cohorts.services import BetOrder, execute_orders
from core import clock
from markets.models import Market, ResolutionChange
from markets.resolution import record_resolution
from markets.services import set_resolution
from tests.factories import make_cohort_with_entries, make_market

pytestmark = pytest.mark.django_db
WEEK = datetime(2026, 11, 15, tzinfo=UTC)
UPSTREAM = WEEK + timedelta(days=2)
RECORDED = WEEK + timedelta(days=2, hours=7)


def _held(market: Market) -> Position:
    _, (entry,) = make_cohort_with_entries(1, week_start=WEEK, kind=Cohort.Kind.LIVE)
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("100"))], [], None, at=WEEK)
    return Position.objects.get(entry=entry, market=market)


def _record(market: Market, **kw):
    return record_resolution(
        market.pk, status=Market.Status.RESOLVED, outcome="Yes", by=Market.ResolvedBy.UPSTREAM,
        reason="upstream resolution", at=UPSTREAM, only_unresolved=True, **kw,
    )  # fmt: skip


def test_an_upstream_resolution_keeps_its_time_and_is_stamped_when_recorded():
    market = make_market(source=Market.Source.POLYMARKET)
    _held(market)
    with clock.running_on(clock.SimulatedClock(RECORDED)):
        recorded = _record(market)
    assert recorded is not None
    market.refresh_from_db()
    assert market.resolved_at == UPSTREAM
    assert market.resolution_recorded_at == RECORDED == recorded.change.changed_at


def test_a_correction_and_a_reopen_restamp_it():
    market = make_market(source=Market.Source.POLYMARKET)
    sim = clock.SimulatedClock(RECORDED)
    with clock.running_on(sim):
        _record(market)
        sim.set(RECORDED + timedelta(days=3))
        set_resolution(market, status=Market.Status.RESOLVED, outcome="No", reason="misread")
        market.refresh_from_db()
        assert market.resolution_recorded_at == RECORDED + timedelta(days=3)
        assert market.resolved_at == RECORDED + timedelta(days=3)  # staff's time is its own
        sim.set(RECORDED + timedelta(days=5))
        set_resolution(market, status=Market.Status.CLOSED, reason="disputed again")
    market.refresh_from_db()
    assert (market.status, market.resolved_at) == (Market.Status.CLOSED, None)
    assert market.resolution_recorded_at == RECORDED + timedelta(days=5)
    # Always the latest audit row's time: what the migration fills existing rows from.
    assert market.resolution_recorded_at == ResolutionChange.objects.latest("changed_at").changed_at


class Ticking:
    """A clock that moves a second every time it is read, like an accelerated one does between
    the statements of a transaction."""

    def __init__(self, start: datetime) -> None:
        self.at = start

    def __call__(self) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


def test_the_stamp_is_taken_after_the_settlement():
    market = make_market(source=Market.Source.POLYMARKET)
    position = _held(market)
    ticking = Ticking(RECORDED)
    with clock.running_on(ticking):
        recorded = _record(market)
    assert recorded is not None and recorded.settlement == "settled"
    market.refresh_from_db()
    settled = Settlement.objects.get(position=position).settled_at
    assert recorded.change.changed_at < settled < market.resolution_recorded_at
    assert market.resolution_recorded_at <= ticking.at


def test_a_skipped_recording_leaves_the_stamp_alone():
    market = make_market(source=Market.Source.POLYMARKET)
    with clock.running_on(clock.SimulatedClock(RECORDED)):
        _record(market)
    with clock.running_on(clock.SimulatedClock(RECORDED + timedelta(days=1))):
        assert _record(market) is None  # already final: an automatic source records nothing
    market.refresh_from_db()
    assert market.resolution_recorded_at == RECORDED
