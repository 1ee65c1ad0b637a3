"""Settlement: payouts, refunds, exactly-once, reversals on re-resolution and reopening."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from cohorts.doctor import check_invariants
from cohorts.models import Entry, LedgerEntry, Position, Settlement, Snapshot
from cohorts.services import BetOrder, SellOrder, execute_orders
from cohorts.settlement import (
    SettlementError,
    markets_needing_settlement,
    settle_market,
    settle_pending,
)
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_market

D = Decimal
pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 16, 10, tzinfo=UTC)


def bet(entry, market, outcome, amount, at=T0):
    execute_orders(entry, [BetOrder(market.pk, outcome, D(amount))], [], None, at=at)


def set_status(market, status, outcome=""):
    Market.objects.filter(pk=market.pk).update(status=status, resolved_outcome=outcome)
    market.refresh_from_db()


def cash(entry):
    return Entry.objects.get(pk=entry.pk).cash


def ledger_sum(entry):
    return sum(LedgerEntry.objects.filter(entry=entry).values_list("amount", flat=True))


@pytest.fixture
def two_entries(db):
    _, entries = make_cohort_with_entries(2, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    return entries


def test_winner_paid_a_dollar_a_share_loser_nothing(two_entries):
    a, b = two_entries
    m = make_market(prices={"Yes": "0.40", "No": "0.60"})
    bet(a, m, "Yes", "100")  # 250 shares
    bet(b, m, "No", "120")  # 200 shares
    set_status(m, "resolved", "Yes")
    report = settle_market(m, at=T0 + timedelta(days=1))
    assert (report.settled, report.paid, report.market_settled) == (2, D("250.00"), True)
    assert cash(a) == D("10000") - 100 + 250 and cash(b) == D("10000") - 120
    pa = Position.objects.get(entry=a)
    assert (pa.status, pa.realized_pnl) == ("settled", D("150.00"))
    assert Position.objects.get(entry=b).realized_pnl == D("-120.00")
    assert LedgerEntry.objects.get(entry=a, kind="payout").amount == D("250.00")
    assert not LedgerEntry.objects.filter(entry=b, kind="payout").exists()  # no zero rows
    m.refresh_from_db()
    assert m.settled_at == T0 + timedelta(days=1)
    assert check_invariants() == []


def test_payouts_are_exact_to_the_cent_per_entry(two_entries):
    # $100 at 0.30 buys 333.333333 shares (rounded down to 6 places) in each of three markets,
    # all won: $999.999999 of winning shares, which rounds to $1000.00. v1 paid each position
    # rounded down (333.33 x 3 = 999.99, a cent lost); now each payout is the rounded running
    # total minus what was paid: 333.33, 666.67 - 333.33 = 333.34, 1000.00 - 666.67 = 333.33.
    a, _ = two_entries
    markets = [make_market(prices={"Yes": "0.30", "No": "0.70"}) for _ in range(3)]
    for m in markets:
        bet(a, m, "Yes", "100")
    assert {p.shares for p in Position.objects.filter(entry=a)} == {D("333.333333")}
    paid = []
    for i, m in enumerate(markets):
        set_status(m, "resolved", "Yes")
        paid.append(settle_market(m, at=T0 + timedelta(days=1, hours=i)).paid)
    assert paid == [D("333.33"), D("333.34"), D("333.33")]
    assert cash(a) == D("10000") - 300 + D("1000.00")
    assert ledger_sum(a) == cash(a)
    # A staff reversal takes back exactly what was paid; the next payout trues the total again.
    set_status(markets[0], "resolved", "No")
    settle_market(markets[0], at=T0 + timedelta(days=2))
    assert cash(a) == D("10000") - 300 + D("666.67")
    set_status(markets[0], "resolved", "Yes")
    assert settle_market(markets[0], at=T0 + timedelta(days=3)).paid == D("333.33")
    assert cash(a) == D("10000") - 300 + D("1000.00")
    assert check_invariants() == []


def test_settling_twice_pays_once(two_entries):
    a, _ = two_entries
    m = make_market()
    bet(a, m, "Yes", "60")
    set_status(m, "resolved", "Yes")
    settle_market(m, at=T0)
    again = settle_market(m, at=T0 + timedelta(hours=1))
    assert (again.settled, again.reversed, again.paid) == (0, 0, 0)
    assert (
        Settlement.objects.count() == 1 and LedgerEntry.objects.filter(kind="payout").count() == 1
    )
    m.refresh_from_db()
    assert m.settled_at == T0  # not moved by the idle rerun


def test_void_refunds_remaining_cost_basis(two_entries):
    a, _ = two_entries
    m = make_market(prices={"Yes": "0.50", "No": "0.50"})
    bet(a, m, "Yes", "200")
    pos = Position.objects.get(entry=a)
    Market.objects.filter(pk=m.pk).update(last_prices={"Yes": "0.80"})
    execute_orders(a, [], [SellOrder(pos.pk, D("50"))], None, at=T0)  # 200 sh @0.8 = 160, cost 100
    set_status(m, "void")
    settle_market(m, at=T0)
    assert LedgerEntry.objects.get(entry=a, kind="refund").amount == D("100.00")
    assert cash(a) == D("10000") - 200 + 160 + 100
    assert Position.objects.get(entry=a).realized_pnl == D("60.00")  # only the sale's gain


def test_named_outcome_resolution(two_entries):
    a, b = two_entries
    m = make_market(
        outcomes=["Red", "Green", "Blue"], prices={"Red": "0.2", "Green": "0.5", "Blue": "0.3"}
    )
    bet(a, m, "Red", "50")
    bet(b, m, "Green", "50")
    set_status(m, "resolved", "Red")
    settle_market(m, at=T0)
    assert cash(a) == D("10000") - 50 + 250 and cash(b) == D("9950")


def test_bad_resolution_is_refused(two_entries):
    m = make_market()
    bet(two_entries[0], m, "Yes", "60")
    set_status(m, "resolved", "Maybe")
    with pytest.raises(SettlementError, match="not one of its outcomes"):
        settle_market(m, at=T0)
    assert Settlement.objects.count() == 0
    assert settle_pending(T0)["errors"]  # reported, not raised, by the periodic job


def _fresh_twin(entries, outcome_first, outcome_final):
    """Two entries make the same bets on twin markets; one market resolves to `outcome_first`
    and is then changed to `outcome_final`, the other resolves to `outcome_final` directly."""
    a, b = entries
    ma, mb = make_market(prices={"Yes": "0.30"}), make_market(prices={"Yes": "0.30"})
    for entry, m in ((a, ma), (b, mb)):
        bet(entry, m, "Yes", "90")
        bet(entry, m, "No", "70")
    return ma, mb


@pytest.mark.parametrize(
    "first, final",
    [
        (("resolved", "Yes"), ("resolved", "No")),
        (("resolved", "No"), ("void", "")),
        (("void", ""), ("resolved", "Yes")),
    ],
)
def test_re_resolution_equals_a_fresh_resolution(two_entries, first, final):
    a, b = two_entries
    ma, mb = _fresh_twin(two_entries, first, final)
    set_status(ma, *first)
    settle_market(ma, at=T0)
    set_status(ma, *final)
    assert ma.pk in markets_needing_settlement()
    report = settle_market(ma, at=T0 + timedelta(days=1))
    assert report.reversed == 2 and report.settled == 2
    set_status(mb, *final)
    settle_market(mb, at=T0 + timedelta(days=1))

    assert cash(a) == cash(b)
    assert ledger_sum(a) == cash(a)
    pa = sorted(
        Position.objects.filter(entry=a).values_list(
            "outcome", "status", "shares", "cost_basis", "realized_pnl"
        )
    )
    pb = sorted(
        Position.objects.filter(entry=b).values_list(
            "outcome", "status", "shares", "cost_basis", "realized_pnl"
        )
    )
    assert pa == pb
    # The old settlements stay, marked reversed, with REVERSAL rows for what they paid.
    reversed_ = Settlement.objects.filter(market=ma, reversed_at__isnull=False)
    assert reversed_.count() == 2
    paid_before = sum(s.payout for s in reversed_)
    assert (
        -sum(LedgerEntry.objects.filter(entry=a, kind="reversal").values_list("amount", flat=True))
        == paid_before
    )
    assert ma.pk not in markets_needing_settlement()
    assert check_invariants() == []


def test_reopen_reverses_and_reopens_positions(two_entries):
    a, _ = two_entries
    m = make_market()
    bet(a, m, "Yes", "60")
    set_status(m, "resolved", "Yes")
    settle_market(m, at=T0)
    set_status(m, "open")
    # Until the reversal runs, the reopened market takes no bets.
    assert m.pk in markets_needing_settlement()
    settle_pending(T0 + timedelta(hours=1))
    pos = Position.objects.get(entry=a)
    assert (pos.status, pos.shares, pos.cost_basis, pos.realized_pnl) == (
        "open",
        D("100"),
        D("60.00"),
        0,
    )
    assert cash(a) == D("9940.00")
    m.refresh_from_db()
    assert m.settled_at is None
    bet(a, m, "Yes", "50")  # trading again: averages into the reopened position
    assert Position.objects.filter(entry=a, status="open").count() == 1
    assert check_invariants() == []


def test_reversal_that_would_overdraw_is_refused(two_entries):
    a, _ = two_entries
    m = make_market(prices={"Yes": "0.10"})
    bet(a, m, "Yes", "2500")  # 25000 shares
    set_status(m, "resolved", "Yes")
    settle_market(m, at=T0)
    # Spend the winnings on other markets (each bet <= 25% of cash).
    for _ in range(8):
        bet(a, make_market(), "Yes", str((cash(a) / 4).quantize(D("0.01"), rounding="ROUND_DOWN")))
    before = cash(a)
    set_status(m, "resolved", "No")
    with pytest.raises(SettlementError, match="already spent"):
        settle_market(m, at=T0 + timedelta(days=1))
    assert cash(a) == before and Settlement.objects.filter(reversed_at__isnull=False).count() == 0


def test_final_snapshot_when_last_position_settles(two_entries):
    a, b = two_entries
    m1, m2 = make_market(), make_market()
    bet(a, m1, "Yes", "60")
    bet(a, m2, "Yes", "60")
    bet(b, m1, "No", "60")
    set_status(m1, "resolved", "Yes")
    settle_market(m1, at=T0 + timedelta(minutes=3))
    # b's only position settled: b gets a final snapshot in the bucket. a still holds m2 and
    # is snapshotted too: every entry a settlement changes is, so its value agrees at once.
    snap = Snapshot.objects.get(entry=b)
    assert snap.ts == T0 and snap.total == cash(b) and snap.positions_value == 0
    snap_a = Snapshot.objects.get(entry=a)
    assert snap_a.ts == T0 and snap_a.total == cash(a) + snap_a.positions_value
    assert snap_a.positions_value == D("60.00")  # m2's 100 shares at its price, 0.60
    set_status(m2, "resolved", "No")
    settle_market(m2, at=T0 + timedelta(hours=2))
    final = Snapshot.objects.filter(entry=a).latest("ts")
    assert final.total == cash(a) == D("10000") - 120 + 100


def test_settle_pending_finds_each_kind_of_lag(two_entries):
    a, _ = two_entries
    fresh, changed, reopened, fine = (make_market() for _ in range(4))
    for m in (fresh, changed, reopened, fine):
        bet(a, m, "Yes", "50")
    for m in (changed, reopened, fine):
        set_status(m, "resolved", "Yes")
        settle_market(m, at=T0)
    set_status(fresh, "void")
    set_status(changed, "resolved", "No")
    set_status(reopened, "closed")
    assert markets_needing_settlement() == sorted([fresh.pk, changed.pk, reopened.pk])
    summary = settle_pending(T0 + timedelta(hours=1))
    assert summary["markets"] == 3 and summary["errors"] == []
    assert markets_needing_settlement() == []
    assert check_invariants() == []


def test_unsettleable_market_is_put_on_the_staff_attention_list(two_entries):
    from cohorts.settlement import settle_pending

    a, _ = two_entries
    m = make_market(prices={"Yes": "0.10"})
    bet(a, m, "Yes", "2500")
    set_status(m, "resolved", "Yes")
    settle_market(m, at=T0)
    for _ in range(8):
        bet(a, make_market(), "Yes", str((cash(a) / 4).quantize(D("0.01"), rounding="ROUND_DOWN")))
    set_status(m, "resolved", "No")
    summary = settle_pending(at=T0 + timedelta(days=1))
    m.refresh_from_db()
    assert summary["errors"] and m.needs_attention
    assert "already spent" in m.attention_reason


def test_a_staff_reopen_that_cannot_be_carried_out_changes_nothing_and_says_why(
    two_entries, admin_client, caplog
):
    # Before: the admin "Reopen" committed the reopen, the reversal then failed (the payout
    # was spent), and `arena doctor` failed until someone re-resolved by hand; nothing logged.
    a, _ = two_entries
    m = make_market(prices={"Yes": "0.10"})
    bet(a, m, "Yes", "2500")
    set_status(m, "resolved", "Yes")
    settle_market(m, at=T0)
    for _ in range(8):
        bet(a, make_market(), "Yes", str((cash(a) / 4).quantize(D("0.01"), rounding="ROUND_DOWN")))
    before = cash(a)
    response = admin_client.post(
        "/admin/markets/market/",
        {"action": "reopen_markets", "_selected_action": [m.pk], "apply": "1",
         "status": "closed", "reason": "recheck the source"},
        follow=True,
    )  # fmt: skip
    page = response.content.decode()
    assert "1 market(s) not changed" in page and "already spent" in page
    m.refresh_from_db()
    assert (m.status, m.resolved_outcome) == ("resolved", "Yes")  # as it was
    assert not m.resolution_changes.filter(source="admin").exists()  # no audit row of a non-change
    assert cash(a) == before and ledger_sum(a) == before
    assert check_invariants() == []
    assert any("refused, nothing changed" in r.getMessage() for r in caplog.records)
