"""The execution service: every rule, whole-decision rejection, rounding and averaging in."""

from decimal import Decimal

import pytest

from cohorts.models import Entry, LedgerEntry, Position, Trade
from cohorts.services import BetOrder, ExecutionError, SellOrder, check_orders, execute_orders
from markets.models import Market
from tests.factories import make_market

D = Decimal
pytestmark = pytest.mark.django_db


def db_state(entry):
    """Everything execution may write, to prove a rejection changed nothing."""
    return (
        Entry.objects.get(pk=entry.pk).cash,
        list(
            Position.objects.filter(entry=entry).values_list("pk", "shares", "cost_basis", "status")
        ),
        Trade.objects.filter(entry=entry).count(),
        LedgerEntry.objects.filter(entry=entry).count(),
    )


def rejected(entry, bets=(), sells=(), prices=None):
    before = db_state(entry)
    reasons = check_orders(entry, list(bets), list(sells), prices)
    with pytest.raises(ExecutionError) as err:
        execute_orders(entry, list(bets), list(sells), prices)
    assert err.value.reasons == reasons and reasons
    assert db_state(entry) == before
    return " | ".join(reasons)


def test_bet_buys_shares_rounded_down_and_debits_cash(entry, market, now):
    trades = execute_orders(entry, [BetOrder(market.pk, "Yes", D("100.00"))], [], None, at=now)
    (trade,) = trades
    # 100 / 0.6 = 166.666666..., rounded down so the entry never gets an unpaid fraction.
    assert trade.shares == D("166.666666")
    assert trade.price == D("0.6") and trade.quote["source"] == "market"
    entry.refresh_from_db()
    assert entry.cash == D("9900.00")
    pos = Position.objects.get(entry=entry)
    assert (pos.shares, pos.cost_basis, pos.status) == (D("166.666666"), D("100.00"), "open")
    ledger = LedgerEntry.objects.get(entry=entry, kind="buy")
    assert ledger.amount == D("-100.00") and ledger.trade_id == trade.pk


def test_no_price_is_its_own_quote_when_given(entry, now):
    m = make_market(prices={"Yes": "0.60", "No": "0.45"})  # quotes need not sum to 1
    (trade,) = execute_orders(entry, [BetOrder(m.pk, "No", D("90"))], [], None, at=now)
    assert trade.price == D("0.45") and trade.shares == D("200")


def test_no_price_is_one_minus_yes_without_its_own_quote(entry, now):
    m = make_market(prices={"Yes": "0.75"})
    (trade,) = execute_orders(entry, [BetOrder(m.pk, "No", D("50"))], [], None, at=now)
    assert trade.price == D("0.25") and trade.shares == D("200")


def test_named_outcomes_of_a_multi_market(entry, now):
    m = make_market(
        outcomes=["Alice", "Bob", "Carol"], prices={"Alice": "0.5", "Bob": "0.3", "Carol": "0.2"}
    )
    (trade,) = execute_orders(entry, [BetOrder(m.pk, "Bob", D("60"))], [], None, at=now)
    assert trade.shares == D("200") and trade.position.outcome == "Bob"
    assert "unknown outcome" in rejected(entry, [BetOrder(m.pk, "Dave", D("60"))])
    # 1 - p only applies to binary markets: a multi outcome without a quote has no price.
    m2 = make_market(outcomes=["A", "B", "C"], prices={"A": "0.5", "B": "0.5"})
    assert "no price" in rejected(entry, [BetOrder(m2.pk, "C", D("60"))])


def test_price_book_of_the_decision_wins_over_the_latest_quote(entry, market, now):
    book = {(market.pk, "Yes"): D("0.50")}
    (trade,) = execute_orders(entry, [BetOrder(market.pk, "Yes", D("100"))], [], book, at=now)
    assert trade.price == D("0.50") and trade.quote["source"] == "decision"


def test_min_bet(entry, market):
    assert "below the $50.00 minimum" in rejected(entry, [BetOrder(market.pk, "Yes", D("49.99"))])
    assert check_orders(entry, [BetOrder(market.pk, "Yes", D("50"))], [], None) == []


def test_bets_together_at_most_a_quarter_of_cash(entry, market):
    other = make_market()
    bets = [BetOrder(market.pk, "Yes", D("1500")), BetOrder(other.pk, "No", D("1000.01"))]
    assert "above 25% of cash ($2500.00 of $10000.00)" in rejected(entry, bets)
    ok = [BetOrder(market.pk, "Yes", D("1500")), BetOrder(other.pk, "No", D("1000"))]
    assert len(execute_orders(entry, ok, [], None)) == 2
    entry.refresh_from_db()
    assert entry.cash == D("7500.00")


def test_whole_decision_rejected_when_one_item_is_invalid(entry, market):
    closed = make_market(status=Market.Status.CLOSED)
    bets = [BetOrder(market.pk, "Yes", D("100")), BetOrder(closed.pk, "Yes", D("100"))]
    assert f"market {closed.pk} is closed, not open" in rejected(entry, bets)


@pytest.mark.parametrize("price", ["0", "1", "1.2", "-0.1"])
def test_price_strictly_inside_zero_one(entry, price):
    m = make_market(prices={"Yes": price, "No": "0.5"})
    assert "not strictly between 0 and 1" in rejected(entry, [BetOrder(m.pk, "Yes", D("50"))])


def test_unknown_market_fractional_cents_and_garbage_amounts(entry, market):
    assert "does not exist" in rejected(entry, [BetOrder(999999, "Yes", D("50"))])
    assert "fractions of a cent" in rejected(entry, [BetOrder(market.pk, "Yes", D("50.001"))])
    assert "not a number" in rejected(entry, [BetOrder(market.pk, "Yes", "lots")])


def test_resolved_market_and_reopened_awaiting_resettlement_are_rejected(entry, now):
    resolved = make_market(status=Market.Status.RESOLVED, resolved_outcome="Yes")
    assert "is resolved, not open" in rejected(entry, [BetOrder(resolved.pk, "Yes", D("50"))])
    reopened = make_market(settled_at=now)
    assert "awaiting re-settlement" in rejected(entry, [BetOrder(reopened.pk, "Yes", D("50"))])


def test_average_in_keeps_one_open_position(entry, market, now):
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("60"))], [], None, at=now)
    Market.objects.filter(pk=market.pk).update(last_prices={"Yes": "0.40"})
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("100"))], [], None, at=now)
    (pos,) = Position.objects.filter(entry=entry)
    assert pos.shares == D("100") + D("250") and pos.cost_basis == D("160.00")


def test_sell_part_realises_pnl_and_reduces_cost_proportionally(entry, market, now):
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("120"))], [], None, at=now)  # 200 sh @ 0.6
    pos = Position.objects.get(entry=entry)
    Market.objects.filter(pk=market.pk).update(last_prices={"Yes": "0.90", "No": "0.10"})
    (trade,) = execute_orders(entry, [], [SellOrder(pos.pk, D("25"))], None, at=now)
    assert (trade.side, trade.shares, trade.amount) == ("SELL", D("50"), D("45.00"))
    assert trade.realized_pnl == D("15.00")  # 45 proceeds - 30 cost (25% of 120)
    pos.refresh_from_db()
    assert (pos.shares, pos.cost_basis, pos.realized_pnl, pos.status) == (
        D("150"),
        D("90.00"),
        D("15.00"),
        "open",
    )
    entry.refresh_from_db()
    assert entry.cash == D("10000") - D("120") + D("45")
    assert LedgerEntry.objects.get(entry=entry, kind="sell").amount == D("45.00")


def test_sell_everything_exits_and_rounds_proceeds_down(entry, market, now):
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("100"))], [], None, at=now)  # 166.666666 sh
    pos = Position.objects.get(entry=entry)
    Market.objects.filter(pk=market.pk).update(last_prices={"Yes": "0.333333"})
    (trade,) = execute_orders(entry, [], [SellOrder(pos.pk, D("100"))], None, at=now)
    # 166.666666 * 0.333333 = 55.5554...: the entry gets 55.55, never a rounded-up cent.
    assert trade.amount == D("55.55") and trade.realized_pnl == D("-44.45")
    pos.refresh_from_db()
    assert (pos.status, pos.shares, pos.cost_basis, pos.closed_at) == ("exited", 0, 0, now)
    # A later bet on the same side opens a fresh position.
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("50"))], [], None, at=now)
    assert Position.objects.filter(entry=entry, status="open").count() == 1


def test_sell_rules(entry, market, now):
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("60"))], [], None, at=now)
    pos = Position.objects.get(entry=entry)
    assert "between 1 and 100" in rejected(entry, sells=[SellOrder(pos.pk, D("0.5"))])
    assert "between 1 and 100" in rejected(entry, sells=[SellOrder(pos.pk, D("101"))])
    assert "sold twice" in rejected(
        entry, sells=[SellOrder(pos.pk, D("10")), SellOrder(pos.pk, D("10"))]
    )
    assert "not an open position of this entry" in rejected(
        entry, sells=[SellOrder(999999, D("10"))]
    )
    Market.objects.filter(pk=market.pk).update(status=Market.Status.CLOSED)
    assert "is closed, not open" in rejected(entry, sells=[SellOrder(pos.pk, D("10"))])


def test_cannot_sell_another_entrys_position(entry, market, now):
    from tests.factories import make_cohort_with_entries

    _, (other,) = make_cohort_with_entries(1)
    execute_orders(other, [BetOrder(market.pk, "Yes", D("60"))], [], None, at=now)
    theirs = Position.objects.get(entry=other)
    assert "not an open position" in rejected(entry, sells=[SellOrder(theirs.pk, D("50"))])


def test_sells_run_before_bets_and_the_limit_uses_cash_before_them(entry, market, now):
    execute_orders(entry, [BetOrder(market.pk, "Yes", D("2500"))], [], None, at=now)
    entry.refresh_from_db()
    assert entry.cash == D("7500.00")
    pos = Position.objects.get(entry=entry)
    # Limit is 25% of 7500 = 1875 even though the sell would bring cash back up.
    sells = [SellOrder(pos.pk, D("100"))]
    assert "above 25%" in rejected(entry, [BetOrder(market.pk, "No", D("1875.01"))], sells)
    trades = execute_orders(entry, [BetOrder(market.pk, "No", D("1875"))], sells, None, at=now)
    assert [t.side for t in trades] == ["SELL", "BUY"]


def test_decision_is_linked_to_trades(entry, market, now):
    from cohorts.models import Decision

    decision = Decision.objects.create(entry=entry, week=1, claimed_at=now)
    (trade,) = execute_orders(
        entry, [BetOrder(market.pk, "Yes", D("50"))], [], None, decision=decision, at=now
    )
    assert trade.decision_id == decision.pk and trade.executed_at == now


def test_check_orders_reads_fresh_cash(entry, market):
    Entry.objects.filter(pk=entry.pk).update(cash=D("200"))  # entry object still says 10000
    LedgerEntry.objects.create(
        entry=entry, kind="buy", amount=D("-9800"), created_at=entry.created_at
    )
    assert "above 25%" in " ".join(
        check_orders(entry, [BetOrder(market.pk, "Yes", D("60"))], [], None)
    )
