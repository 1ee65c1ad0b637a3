"""Property tests: random sequences of trades, price moves and (re-)resolutions keep the books
exact, and a changed resolution ends exactly where a direct one would have."""

from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohorts.doctor import check_invariants
from cohorts.models import Entry, LedgerEntry, Position, Settlement, Snapshot, Trade
from cohorts.services import BetOrder, ExecutionError, SellOrder, check_orders, execute_orders
from cohorts.settlement import SettlementError, settle_market
from cohorts.snapshots import take_snapshot
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_market

D = Decimal
T0 = datetime(2026, 11, 16, tzinfo=UTC)
pytestmark = pytest.mark.django_db
PROPS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Three market shapes: binary with both sides quoted, binary with only Yes quoted (No = 1 - Yes),
# and a named-outcome market.
SHAPES = [
    (["Yes", "No"], ("Yes", "No")),
    (["Yes", "No"], ("Yes",)),
    (["Red", "Green", "Blue"], ("Red", "Green", "Blue")),
]

prices = st.integers(min_value=0, max_value=100).map(lambda n: D(n) / 100)
fractions = st.sampled_from(
    [D("0.001"), D("0.004"), D("0.01"), D("0.05"), D("0.1"), D("0.2"), D("0.25"), D("0.3")]
)
percentages = st.sampled_from(
    [D(1), D(10), D("33.33"), D(50), D("99.99"), D(100), D("0.5"), D(101)]
)
statuses = st.sampled_from(["resolved", "void", "open", "closed"])

ops = st.one_of(
    st.tuples(st.just("bet"), st.integers(0, 1), st.integers(0, 2), st.integers(0, 2), fractions),
    st.tuples(st.just("sell"), st.integers(0, 1), st.integers(0, 5), percentages),
    st.tuples(st.just("price"), st.integers(0, 2), st.lists(prices, min_size=3, max_size=3)),
    st.tuples(st.just("status"), st.integers(0, 2), statuses, st.integers(0, 2)),
    st.tuples(st.just("snapshot")),
)


def make_markets(n=3):
    return [
        make_market(outcomes=outcomes, prices={o: "0.5" for o in quoted})
        for outcomes, quoted in SHAPES[:n]
    ]


def state(entries):
    return [
        (
            Entry.objects.get(pk=e.pk).cash,
            sorted(
                Position.objects.filter(entry=e).values_list(
                    "pk", "status", "shares", "cost_basis", "realized_pnl"
                )
            ),
            LedgerEntry.objects.filter(entry=e).count(),
        )
        for e in entries
    ]


def apply_op(op, entries, markets, at):
    """Apply one random operation the way the arena would; invalid ones must change nothing."""
    kind = op[0]
    if kind == "bet":
        _, ei, mi, oi, frac = op
        entry, market = entries[ei], markets[mi]
        cash = Entry.objects.get(pk=entry.pk).cash
        amount = (cash * frac).quantize(D("0.01"))
        orders = [BetOrder(market.pk, market.outcomes[oi % len(market.outcomes)], amount)]
        _execute(entries, entry, orders, [], at)
    elif kind == "sell":
        _, ei, pi, pct = op
        entry = entries[ei]
        open_ids = list(
            Position.objects.filter(entry=entry, status="open")
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        position_id = open_ids[pi % len(open_ids)] if open_ids else 10**9
        _execute(entries, entry, [], [SellOrder(position_id, pct)], at)
    elif kind == "price":
        _, mi, ps = op
        market = markets[mi]
        quoted = SHAPES[mi][1]
        Market.objects.filter(pk=market.pk).update(
            last_prices={o: str(p) for o, p in zip(quoted, ps)}
        )
    elif kind == "status":
        _, mi, status, oi = op
        market = markets[mi]
        outcome = market.outcomes[oi % len(market.outcomes)] if status == "resolved" else ""
        Market.objects.filter(pk=market.pk).update(status=status, resolved_outcome=outcome)
        before = state(entries)
        try:
            settle_market(market, at=at)
        except SettlementError as exc:
            # Only possible when a reversal would take back money the entry already spent.
            assert "already spent" in str(exc)
            assert state(entries) == before
    elif kind == "snapshot":
        take_snapshot(at, cohorts=[entries[0].cohort_id])


def _execute(entries, entry, bets, sells, at):
    reasons = check_orders(entry, bets, sells, None)
    before = state(entries)
    try:
        execute_orders(entry, bets, sells, None, at=at)
    except ExecutionError as exc:
        assert exc.reasons == reasons
        assert state(entries) == before
    else:
        assert reasons == []


def mark(position):
    """An independent re-implementation of marking, to check the snapshot's arithmetic."""
    market = position.market
    quotes = market.last_prices
    if market.status == "resolved":
        return D(1) if position.outcome == market.resolved_outcome else D(0)
    if market.status == "void":
        return None
    if position.outcome in quotes:
        return D(quotes[position.outcome])
    if len(market.outcomes) == 2:
        other = [o for o in market.outcomes if o != position.outcome][0]
        return D(1) - D(quotes[other]) if other in quotes else None
    return None


def assert_books_exact(entries, at):
    assert check_invariants() == []
    take_snapshot(at, cohorts=[entries[0].cohort_id])
    for e in entries:
        e = Entry.objects.get(pk=e.pk)
        assert e.cash >= 0
        ledger = LedgerEntry.objects.filter(entry=e)
        assert e.cash == ledger.aggregate(s=Sum("amount"))["s"]
        # Money enters only as the deposit, sale proceeds and payouts/refunds; a reversal takes
        # back exactly what its settlement paid. Checked against trades and settlements, not
        # the ledger itself.
        buys = Trade.objects.filter(entry=e, side="BUY").aggregate(s=Sum("amount"))["s"] or 0
        sells = Trade.objects.filter(entry=e, side="SELL").aggregate(s=Sum("amount"))["s"] or 0
        settled = Settlement.objects.filter(position__entry=e)
        live_paid = settled.filter(reversed_at__isnull=True).aggregate(s=Sum("payout"))["s"] or 0
        assert e.cash == e.initial_balance - buys + sells + live_paid
        assert ledger.filter(kind="deposit").get().amount == e.initial_balance
        assert (
            not ledger.exclude(kind="deposit")
            .filter(trade__isnull=True, settlement__isnull=True)
            .exists()
        )
        for kind, sign in (
            ("buy", -1),
            ("sell", 1),
            ("payout", 1),
            ("refund", 1),
            ("reversal", -1),
        ):
            assert all(
                a * sign > 0 for a in ledger.filter(kind=kind).values_list("amount", flat=True)
            )

        snap = Snapshot.objects.filter(entry=e).order_by("-ts").first()
        value = D(0)
        for p in Position.objects.filter(entry=e, status="open").select_related("market"):
            price = mark(p)
            value += p.cost_basis if price is None else p.shares * price
        assert snap.cash == e.cash
        assert snap.positions_value == value.quantize(D("0.01"), rounding=ROUND_HALF_EVEN)
        assert snap.total == e.cash + snap.positions_value
        assert snap.total == e.initial_balance + snap.realized_pnl + snap.unrealized_pnl


@PROPS
@given(sequence=st.lists(ops, min_size=1, max_size=25))
def test_random_sequences_keep_the_books_exact(db, sequence):
    with transaction.atomic():
        _, entries = make_cohort_with_entries(2, week_start=T0 - timedelta(days=1))
        markets = make_markets()
        for i, op in enumerate(sequence):
            at = T0 + timedelta(minutes=11 * i)
            apply_op(op, entries, markets, at)
            assert_books_exact(entries, at)
        transaction.set_rollback(True)


trades = st.lists(
    st.one_of(
        st.tuples(st.just("bet"), st.just(0), st.integers(0, 2), st.integers(0, 2), fractions),
        st.tuples(st.just("sell"), st.just(0), st.integers(0, 5), percentages),
        st.tuples(st.just("price"), st.integers(0, 2), st.lists(prices, min_size=3, max_size=3)),
    ),
    max_size=10,
)
histories = st.lists(
    st.lists(st.tuples(statuses, st.integers(0, 2)), min_size=1, max_size=4), min_size=3, max_size=3
)


@PROPS
@given(trade_ops=trades, history=histories)
def test_changed_resolution_equals_a_direct_one(db, trade_ops, history):
    """Entry A's markets go through a random resolution history (resolve, void, reopen,
    re-resolve); twin entry B made the same trades on twin markets that only ever see the
    final status. The books must agree to the cent."""
    with transaction.atomic():
        _, (a, b) = make_cohort_with_entries(2, week_start=T0 - timedelta(days=1))
        ma, mb = make_markets(), make_markets()
        for i, op in enumerate(trade_ops):
            at = T0 + timedelta(minutes=i)
            apply_op(op, [a], ma, at)
            apply_op(op, [b], mb, at)
        assert state([a])[0][0] == state([b])[0][0]

        end = T0 + timedelta(days=1)
        for k, events in enumerate(history):
            for j, (status, oi) in enumerate(events):
                apply_op(("status", k, status, oi), [a], ma, end + timedelta(minutes=j))
            apply_op(("status", k, *events[-1]), [b], mb, end + timedelta(minutes=len(events)))

        def books(entry):
            e = Entry.objects.get(pk=entry.pk)
            positions = sorted(
                Position.objects.filter(entry=e).values_list(
                    "outcome", "status", "shares", "cost_basis", "realized_pnl"
                )
            )
            return e.cash, positions

        assert books(a) == books(b)
        assert_books_exact([a, b], end + timedelta(hours=1))
        transaction.set_rollback(True)
