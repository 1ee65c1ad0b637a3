"""The one resolution service: upstream, staff, replay and demo resolutions all leave their
ResolutionChange, on the clock of record, settle in the same transaction, reach the event log,
and send the rescore request only once the resolution commits."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction

from cohorts.models import Cohort, Position, Settlement
from cohorts.seals.models import EventLogEntry
from cohorts.services import BetOrder, execute_orders
from core import clock
from markets.models import Market, ResolutionChange
from markets.resolution import record_resolution
from markets.services import resolve_markets, set_resolution
from markets.signals import resolutions_changed
from simulations.replay import resolve_market as replay_resolve
from tests.factories import make_cohort_with_entries, make_market
from tests.fakes.gamma_server import example_resolved_binary
from tests.markets.test_resolve import track_then_close

D = Decimal
pytestmark = pytest.mark.django_db
WEEK = datetime(2026, 11, 15, tzinfo=UTC)


def _hold(market: Market, kind: str, outcome: str = "Yes") -> Position:
    cohort, (entry,) = make_cohort_with_entries(1, week_start=WEEK, kind=kind)
    execute_orders(entry, [BetOrder(market.pk, outcome, D("100"))], [], None, at=WEEK)
    return Position.objects.get(entry=entry, market=market)


def _settled_and_logged(market: Market, position: Position, scope: str) -> ResolutionChange:
    (change,) = ResolutionChange.objects.filter(market=market)
    assert Settlement.objects.filter(position=position, reversed_at__isnull=True).count() == 1
    position.refresh_from_db()
    assert position.status == Position.Status.SETTLED
    logged = EventLogEntry.objects.filter(kind=EventLogEntry.Kind.RESOLUTION, ref=change.pk)
    assert logged.get().scope == scope
    return change


@pytest.fixture
def rescores():
    sent = []

    def receiver(sender, **kwargs):
        sent.append(sender)

    resolutions_changed.connect(receiver, dispatch_uid="test.rescores")
    yield sent
    resolutions_changed.disconnect(dispatch_uid="test.rescores")


def test_a_replay_resolution_is_audited_settled_and_logged_at_replay_time():
    market = make_market(prices={"Yes": "0.50"}, source=Market.Source.FORECASTBENCH)
    position = _hold(market, Cohort.Kind.REPLAY)
    replay_time = WEEK + timedelta(days=3)
    with clock.running_on(clock.SimulatedClock(replay_time)):
        assert replay_resolve(market.pk, "Yes", replay_time, "resolution set") is True
        assert replay_resolve(market.pk, "Yes", replay_time, "resolution set") is False  # rerun
    change = _settled_and_logged(market, position, Cohort.Kind.REPLAY)
    assert (change.source, change.to_status, change.to_outcome) == ("replay", "resolved", "Yes")
    assert change.changed_at == replay_time  # the replay's clock, not the wall clock
    market.refresh_from_db()
    assert market.updated_at == replay_time and market.resolved_at == replay_time


def test_a_demo_resolution_is_audited_settled_and_logged(
    rescores, django_capture_on_commit_callbacks
):
    market = make_market(prices={"Yes": "0.50"}, source=Market.Source.DEMO)
    position = _hold(market, Cohort.Kind.DEMO, outcome="No")
    tick = WEEK + timedelta(days=2, hours=5)
    demo_time = clock.SimulatedClock(tick)
    with django_capture_on_commit_callbacks(execute=True), clock.running_on(demo_time):
        recorded = record_resolution(
            market.pk,
            status=Market.Status.VOID,
            by=Market.ResolvedBy.DEMO,
            reason="demo plan",
            at=tick - timedelta(minutes=30),
            only_unresolved=True,
            rescore=False,
        )
    assert recorded is not None and recorded.settlement == "settled"
    change = _settled_and_logged(market, position, Cohort.Kind.DEMO)
    assert change.changed_at == tick and change.source == "demo"
    assert Settlement.objects.get(position=position).settled_at == tick
    assert rescores == []  # the demo scores its own scope at the end of its run


def test_an_upstream_resolution_is_audited_settled_and_logged(
    gamma, gamma_client, rescores, django_capture_on_commit_callbacks
):
    track_then_close(gamma, gamma_client, example_resolved_binary())
    market = Market.objects.get(external_id="604489")
    Market.objects.filter(pk=market.pk).update(last_prices={"Yes": "0.40", "No": "0.60"})
    Market.objects.filter(pk=market.pk).update(status=Market.Status.OPEN)
    position = _hold(market, Cohort.Kind.LIVE, outcome="No")
    Market.objects.filter(pk=market.pk).update(status=Market.Status.CLOSED)
    with django_capture_on_commit_callbacks(execute=True):
        report = resolve_markets(client=gamma_client)
    assert report.resolved == 1 and report.settled == 1 and report.settle_failed == 0
    change = _settled_and_logged(market, position, Cohort.Kind.LIVE)
    assert (change.source, change.to_outcome, change.reason) == (
        "upstream",
        "No",
        "upstream resolution",
    )
    assert rescores  # asked for once the resolution committed


def test_a_rollback_after_set_resolution_sends_nothing_and_leaves_nothing(
    rescores, django_capture_on_commit_callbacks
):
    market = make_market(prices={"Yes": "0.50"})
    position = _hold(market, Cohort.Kind.LIVE)
    capture = django_capture_on_commit_callbacks(execute=True)
    with capture as callbacks, pytest.raises(RuntimeError), transaction.atomic():
        set_resolution(market, status=Market.Status.RESOLVED, outcome="Yes", reason="checked")
        # Settled inside the resolution's transaction...
        assert Settlement.objects.filter(position=position).exists()
        assert rescores == []  # ...but nothing is sent before the commit
        raise RuntimeError("the caller's transaction rolls back")
    assert callbacks == [] and rescores == []
    market.refresh_from_db()
    assert market.status == Market.Status.OPEN
    assert not ResolutionChange.objects.exists() and not Settlement.objects.exists()
    assert not EventLogEntry.objects.exists()


def test_the_rescore_request_follows_the_commit(rescores, django_capture_on_commit_callbacks):
    market = make_market(prices={"Yes": "0.50"})
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        set_resolution(market, status=Market.Status.RESOLVED, outcome="No", reason="checked")
        assert rescores == []
    assert rescores == [Market]


def test_a_staff_correction_during_a_simulation_carries_the_simulated_time():
    market = make_market(prices={"Yes": "0.50"}, source=Market.Source.DEMO)
    _hold(market, Cohort.Kind.DEMO)
    simulated = datetime(2027, 2, 7, 12, 0, tzinfo=UTC)
    with clock.running_on(clock.SimulatedClock(simulated)):
        change = set_resolution(market, status=Market.Status.VOID, reason="staff check")
    assert change.changed_at == simulated and change.source == "admin"
    market.refresh_from_db()
    assert market.resolved_at == simulated and market.updated_at == simulated
