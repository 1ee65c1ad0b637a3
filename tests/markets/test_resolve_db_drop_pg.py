"""Fault: the database connection is killed while a resolve run settles what it resolved.

The fault is PostgreSQL's own (pg_terminate_backend from a trigger on the second payout row,
the fixture of tests/faults/test_settlement_db_drop.py). Before: the resolution was committed
first and the settlement died, leaving a resolved market with three open positions until the
next snapshot, with nothing logged. Proves: a market is recorded and settled together or not
at all, the run says so in the log and goes on, and the next run does it exactly once.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from cohorts.doctor import check_invariants
from cohorts.models import Position
from cohorts.services import BetOrder, execute_orders
from markets.models import Market
from markets.services import resolve_markets, sync_markets
from tests.factories import make_cohort_with_entries
from tests.fakes.gamma_server import example_resolved_binary
from tests.faults.conftest import inject_fault  # noqa: F401 (fixture)
from tests.markets.test_resolve import trading_copy

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_killed_connection_mid_resolve_leaves_no_resolved_market_with_open_positions(
    gamma,
    gamma_client,
    inject_fault,  # noqa: F811 (the imported fixture)
    caplog,
):
    raw = example_resolved_binary()  # resolves "No"
    gamma.markets = [trading_copy(raw)]
    sync_markets(100, client=gamma_client)
    market = Market.objects.get(external_id=raw["id"])
    _, entries = make_cohort_with_entries(3)
    for entry in entries:
        execute_orders(entry, [BetOrder(market.pk, "No", Decimal("100"))], [], None)
    gamma.markets = [raw]
    sync_markets(100, client=gamma_client)  # closed upstream now
    inject_fault("payout ledger rows", 2, "terminate")

    report = resolve_markets(client=gamma_client)  # must not raise

    market.refresh_from_db()
    open_positions = Position.objects.filter(market=market, status="open").count()
    assert (market.status, open_positions) == ("closed", 3)  # none of it happened
    assert report.resolved == 0 and report.settle_failed == 1
    assert any("resolution not recorded" in r.getMessage() for r in caplog.records)

    report = resolve_markets(client=gamma_client)  # the fault was one-shot: the rerun does it
    market.refresh_from_db()
    assert (market.status, market.resolved_outcome) == ("resolved", "No")
    assert report.resolved == 1
    assert not Position.objects.filter(market=market, status="open").exists()
    assert market.resolution_changes.count() == 1
    assert check_invariants() == []
