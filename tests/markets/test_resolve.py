"""resolve_markets and set_resolution: what is recorded, and what is deliberately not."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from markets.models import Market, ResolutionChange
from markets.services import resolve_markets, set_resolution, sync_markets
from tests.fakes.gamma_server import (
    disputed_market,
    example_legacy_zero,
    example_resolved_binary,
    make_market,
    neg_risk_event,
    proposed_market,
    void_market,
)

pytestmark = pytest.mark.django_db


def trading_copy(raw: dict) -> dict:
    """The same market as it looked while it was still trading."""
    live = {
        k: v for k, v in raw.items() if k not in {"closedTime", "umaResolutionStatus", "umaEndDate"}
    }
    n = len(__import__("json").loads(raw["outcomes"]))
    share = "0.5" if n == 2 else str(round(1 / n, 4))
    live.update(closed=False, acceptingOrders=True, outcomePrices=f'["{share}", "{share}"]')
    return live


def track_then_close(gamma, gamma_client, *closed: dict) -> None:
    """Sync the markets while open (so we track them), let them close upstream, and sync
    again: the tracked refresh notices they closed (status closed), as the beat would."""
    gamma.markets = [trading_copy(raw) for raw in closed]
    sync_markets(100, client=gamma_client)
    gamma.markets = list(closed)
    sync_markets(100, client=gamma_client)
    assert not Market.objects.filter(status="open").exists()


def market(external_id: str) -> Market:
    return Market.objects.get(external_id=external_id)


def test_resolved_binary_is_recorded_with_audit_row(gamma, gamma_client):
    track_then_close(gamma, gamma_client, example_resolved_binary())
    report = resolve_markets(client=gamma_client)

    m = market("604489")
    assert report.checked == 1 and report.resolved == 1
    assert (m.status, m.resolved_outcome, m.resolved_by) == ("resolved", "No", "upstream")
    assert m.resolved_at == datetime(2025, 11, 1, 6, 28, 8, tzinfo=UTC)  # umaEndDate
    assert m.closed_time == datetime(2025, 11, 1, 6, 28, 8, tzinfo=UTC)
    assert m.last_prices == {"Yes": "0", "No": "1"}
    change = ResolutionChange.objects.get(market=m)
    assert (change.source, change.changed_by, change.reason) == (
        "upstream",
        None,
        "upstream resolution",
    )
    assert (change.from_status, change.from_outcome) == ("closed", "")
    assert (change.to_status, change.to_outcome) == ("resolved", "No")


def test_fifty_fifty_is_void(gamma, gamma_client):
    track_then_close(gamma, gamma_client, void_market())
    report = resolve_markets(client=gamma_client)
    m = market("700001")
    assert report.voided == 1 and (m.status, m.resolved_outcome) == ("void", "")
    assert m.resolved_by == "upstream" and m.resolved_at == datetime(2026, 3, 2, 18, tzinfo=UTC)
    assert ResolutionChange.objects.get(market=m).to_status == "void"


@pytest.mark.parametrize(
    "factory, uma", [(disputed_market, "disputed"), (proposed_market, "proposed")]
)
def test_proposed_or_disputed_waits(gamma, gamma_client, factory, uma):
    raw = factory()
    track_then_close(gamma, gamma_client, raw)
    report = resolve_markets(client=gamma_client)
    m = market(raw["id"])
    assert report.waiting == 1 and report.resolved == 0
    assert m.status == "closed" and m.uma_status == uma and m.resolved_outcome == ""
    assert not m.needs_attention and not ResolutionChange.objects.exists()
    # Extreme trading prices on the disputed one are stored as prices, not as a resolution.
    assert m.last_prices


def test_closed_without_any_proposal_waits(gamma, gamma_client):
    raw = make_market("5", prices=("0.97", "0.03"), closed=True)
    track_then_close(gamma, gamma_client, raw)
    report = resolve_markets(client=gamma_client)
    assert report.waiting == 1 and market("5").status == "closed"


def test_neg_risk_legs_resolve_to_one_winner(gamma, gamma_client):
    legs = neg_risk_event(resolved=True)
    track_then_close(gamma, gamma_client, *legs)
    report = resolve_markets(client=gamma_client)
    assert report.resolved == 3
    outcomes = dict(Market.objects.values_list("group_item_title", "resolved_outcome"))
    assert outcomes == {"27°F or below": "No", "32-33°F": "Yes", "38°F or higher": "No"}


def test_legacy_zero_zero_is_never_resolved(gamma, gamma_client):
    raw = example_legacy_zero()
    Market.objects.create(
        external_id="12",
        question=raw["question"],
        condition_id=raw["conditionId"],
        outcomes=["Yes", "No"],
        status="closed",
    )
    gamma.markets = [raw]
    report = resolve_markets(client=gamma_client)
    m = market("12")
    assert report.flagged == 1 and report.resolved == 0
    assert m.status == "closed" and m.resolved_outcome == "" and m.needs_attention
    assert "legacy" in m.attention_reason and not ResolutionChange.objects.exists()


def test_resolved_status_with_ambiguous_prices_is_flagged(gamma, gamma_client):
    raw = make_market("6", prices=("0.9995", "0.0005"), closed=True, uma_status="resolved")
    track_then_close(gamma, gamma_client, raw)
    report = resolve_markets(client=gamma_client)
    m = market("6")
    assert report.flagged == 1 and m.status == "closed" and m.needs_attention
    assert "ambiguous" in m.attention_reason


def test_missing_upstream_is_flagged_not_guessed(gamma, gamma_client):
    raw = make_market("7", end_date=datetime(2026, 1, 1, tzinfo=UTC))
    gamma.add(raw)
    sync_markets(10, client=gamma_client)
    gamma.remove("7")
    report = resolve_markets(client=gamma_client)

    m = market("7")
    assert report.missing == 1 and report.flagged == 1
    assert m.status == "open" and m.needs_attention and m.upstream_missing
    assert "404" in m.attention_reason
    assert gamma.requests_to("/markets/7")  # confirmed by id, not inferred from a list
    assert not ResolutionChange.objects.exists()

    # It comes back resolved: the flag for "missing" goes, the resolution is recorded.
    gamma.add(make_market("7", prices=("1", "0"), closed=True, uma_status="resolved"))
    resolve_markets(client=gamma_client)
    m.refresh_from_db()
    assert (m.status, m.resolved_outcome, m.upstream_missing) == ("resolved", "Yes", False)


def test_past_close_but_still_trading_is_left_open(gamma, gamma_client):
    gamma.add(make_market("8", end_date=datetime(2026, 1, 1, tzinfo=UTC)))  # endDate passed
    sync_markets(10, client=gamma_client)
    report = resolve_markets(client=gamma_client)
    m = market("8")
    assert report.checked == 1 and report.still_open == 1 and report.flagged == 0
    assert m.status == "open" and not m.needs_attention


def test_open_markets_before_close_are_not_checked(gamma, gamma_client):
    gamma.add(make_market("9", end_date=timezone.now() + timedelta(days=3)))
    sync_markets(10, client=gamma_client)
    gamma.requests.clear()
    assert resolve_markets(client=gamma_client).checked == 0
    assert gamma.requests == []


def test_resolve_twice_records_once(gamma, gamma_client):
    track_then_close(gamma, gamma_client, example_resolved_binary(), void_market())
    resolve_markets(client=gamma_client)
    Market.objects.update(tracked=True)  # as if settlement had not run: still a candidate?
    second = resolve_markets(client=gamma_client)
    assert second.resolved == 0 and second.voided == 0  # final markets are not re-judged
    assert ResolutionChange.objects.count() == 2


def test_staff_resolution_is_not_overridden_by_upstream(gamma, gamma_client):
    raw = example_resolved_binary()
    track_then_close(gamma, gamma_client, raw)
    set_resolution(
        market("604489"), status="resolved", outcome="Yes", user=None, reason="checked the source"
    )
    resolve_markets(client=gamma_client)
    m = market("604489")
    assert (m.resolved_outcome, m.resolved_by) == ("Yes", "admin")


def test_reopened_market_goes_back_to_upstream_detection(gamma, gamma_client):
    track_then_close(gamma, gamma_client, example_resolved_binary())
    resolve_markets(client=gamma_client)
    set_resolution(market("604489"), status="closed", user=None, reason="recheck")
    assert market("604489").resolved_by == ""
    report = resolve_markets(client=gamma_client)
    assert report.resolved == 1 and market("604489").resolved_outcome == "No"
    assert ResolutionChange.objects.filter(market__external_id="604489").count() == 3


def test_resolution_is_settled_and_then_untracked(gamma, gamma_client):
    track_then_close(gamma, gamma_client, example_resolved_binary())
    report = resolve_markets(client=gamma_client)
    m = market("604489")
    assert report.settled == 1 and report.settle_failed == 0
    assert m.settled_at is not None and not m.tracked  # nobody can hold it any more
    # Later syncs and resolve runs leave it alone.
    gamma.requests.clear()
    assert resolve_markets(client=gamma_client).checked == 0
    assert gamma.requests == []


# --- set_resolution -------------------------------------------------------------------------


@pytest.fixture
def staff():
    return get_user_model().objects.create_user("ada", password="x", is_staff=True)


@pytest.fixture
def open_market():
    return Market.objects.create(external_id="m1", question="Will it?", outcomes=["Up", "Down"])


def test_set_resolution_writes_audit_row(open_market, staff):
    change = set_resolution(
        open_market, status="resolved", outcome="Down", user=staff, reason="  source says so "
    )
    m = Market.objects.get(pk=open_market.pk)
    assert (m.status, m.resolved_outcome, m.resolved_by) == ("resolved", "Down", "admin")
    assert m.resolved_at is not None
    assert (change.changed_by, change.source, change.reason) == (staff, "admin", "source says so")
    assert (change.from_status, change.from_outcome, change.to_status, change.to_outcome) == (
        "open",
        "",
        "resolved",
        "Down",
    )


def test_changing_an_outcome_records_from_and_to(open_market, staff):
    set_resolution(open_market, status="resolved", outcome="Up", user=staff, reason="first read")
    change = set_resolution(
        open_market, status="resolved", outcome="Down", user=staff, reason="misread"
    )
    assert (change.from_status, change.from_outcome, change.to_outcome) == (
        "resolved",
        "Up",
        "Down",
    )
    assert Market.objects.get(pk=open_market.pk).resolved_outcome == "Down"


def test_void_and_reopen(open_market, staff):
    open_market.needs_attention = True
    open_market.save()
    set_resolution(open_market, status="void", user=staff, reason="cancelled event")
    m = Market.objects.get(pk=open_market.pk)
    assert (m.status, m.resolved_outcome, m.needs_attention) == ("void", "", False)
    change = set_resolution(m, status="open", user=staff, reason="event rescheduled")
    m.refresh_from_db()
    assert (m.status, m.resolved_outcome, m.resolved_by, m.resolved_at) == ("open", "", "", None)
    assert m.tracked and (change.from_status, change.to_status) == ("void", "open")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"status": "resolved", "outcome": "Yes", "reason": "x"}, "not one of"),
        ({"status": "resolved", "outcome": "Up", "reason": "  "}, "reason is required"),
        ({"status": "void", "outcome": "Up", "reason": "x"}, "Only a resolved market"),
        ({"status": "cancelled", "reason": "x"}, "Unknown status"),
        ({"status": "open", "reason": "x"}, "already open"),
    ],
)
def test_set_resolution_validates(open_market, staff, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        set_resolution(open_market, user=staff, **kwargs)
    assert not ResolutionChange.objects.exists()
    assert Market.objects.get(pk=open_market.pk).status == "open"


def test_final_prices_without_an_oracle_resolution_are_flagged_not_waited_on(gamma, gamma_client):
    # Real market 1812085: closed with prices ["1","0"] and no umaResolutionStatus. It waited
    # for ever, never flagged; it must not be resolved from prices either (EXTERNAL_APIS §1.7).
    raw = make_market("1812085", closed=True, prices=("1", "0"), uma_status=None,
                      closed_time=datetime(2026, 11, 1, tzinfo=UTC))  # fmt: skip
    track_then_close(gamma, gamma_client, raw)
    report = resolve_markets(client=gamma_client)
    m = market("1812085")
    assert report.flagged == 1 and report.resolved == 0
    assert m.status == "closed" and m.needs_attention
    assert "final prices ['1', '0'] but no UMA resolution" in m.attention_reason
