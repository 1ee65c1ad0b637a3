"""A live week is never decided on nothing, nor at a stale price.

- `decide` refuses a week whose universe would be empty, or built only from markets the sync
  has not refreshed within MARKET_SYNC_BOUND: no claim, no universe row, no seal; the verb says
  why and exits non-zero, and /admin/attention/ lists the week with the same reason.
- A decision run later than UNIVERSE_PRICE_WINDOW after its universe froze (a staff re-run,
  the catch-up) trades at the market's current marked price, never the frozen one, and only
  when that price is itself fresh; the trade keeps both prices.
"""

from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from cohorts.decisions.run import UNIVERSE_PRICE_WINDOW, decide, run_decision
from cohorts.models import Decision, Trade, Universe
from cohorts.seals import sealing as seals
from cohorts.seals.models import WeekSeal
from cohorts.universe import MARKET_SYNC_BOUND, freeze_universe
from core import clock
from tests.agents.helpers import (
    AT,
    answer,
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_market,
    make_markets,
)
from tests.fakes.openai_server import success

pytestmark = pytest.mark.django_db


# --- refusing an empty universe --------------------------------------------------------------


def _decide_verb(cohort) -> tuple[str, str]:
    out = StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("arena", "decide", "--cohort", str(cohort.pk), "--week", "1", "--sync",
                     stdout=out)  # fmt: skip
    return out.getvalue(), str(failed.value)


def _nothing_happened(cohort) -> None:
    assert not Decision.objects.filter(entry__cohort=cohort).exists()
    assert not Universe.objects.filter(cohort=cohort).exists()
    assert not WeekSeal.objects.filter(cohort=cohort).exists()


def test_decide_refuses_a_week_without_any_market():
    cohort = make_cohort([baseline_competitor("favorite")])
    refused: list[dict] = []
    assert decide(cohort, 1, AT, sync=True, refused=refused) == 0
    assert refused == [{"cohort": cohort.pk, "week": 1,
                        "reason": "no open market to show (has the market sync run?)"}]  # fmt: skip
    _nothing_happened(cohort)

    out, error = _decide_verb(cohort)
    assert out.strip() == (f"refused: cohort={cohort.pk} week=1 reason=no open market to show "
                           "(has the market sync run?)")  # fmt: skip
    assert error == "1 cohort week refused (listed above)"
    _nothing_happened(cohort)
    seals.upkeep(AT + timedelta(days=2))  # the snapshot tick's sealing, well past the deadline
    _nothing_happened(cohort)  # nothing sealed on nothing


def test_decide_refuses_markets_the_sync_has_not_refreshed_then_runs_once_it_has():
    at = clock.now()
    markets = make_markets(5)
    stale = at - MARKET_SYNC_BOUND - timedelta(minutes=1)
    for m in markets:
        m.last_synced_at = m.last_priced_at = stale
        m.close_time = at + timedelta(days=30)
        m.save()
    cohort = make_cohort([baseline_competitor("favorite")])

    out, error = _decide_verb(cohort)
    assert f"reason=no open market synced since {at - MARKET_SYNC_BOUND:%Y-%m-%d %H:%M} UTC" in out
    assert error == "1 cohort week refused (listed above)"
    _nothing_happened(cohort)

    markets[0].last_synced_at = markets[0].last_priced_at = at
    markets[0].save()
    out = StringIO()
    call_command("arena", "decide", "--cohort", str(cohort.pk), "--week", "1", "--sync",
                 stdout=out)  # fmt: skip
    assert "decided 1 entries: 1 done" in out.getvalue()
    universe = Universe.objects.get(cohort=cohort)
    assert [item["market_id"] for item in universe.markets] == [markets[0].pk]  # the fresh one


def test_the_attention_page_says_why_a_week_is_refused(client):
    staff = get_user_model().objects.create_user("staff", password="pw-staff-123",
                                                 is_staff=True, is_superuser=True)  # fmt: skip
    client.force_login(staff)
    cohort = make_cohort([baseline_competitor("favorite")])
    cohort.week_start = clock.now() - timedelta(days=1)
    cohort.save()
    html = client.get("/admin/attention/").content.decode()
    assert "Weeks whose decisions are refused (1)" in html
    assert "no open market to show (has the market sync run?)" in html


# --- a late run trades at a fresh price, never the frozen one ------------------------------


@pytest.fixture
def late_setup(model_server):
    market = make_market(1, yes="0.40")
    market.last_priced_at = market.last_synced_at = AT
    market.save()
    cohort = make_cohort([llm_competitor(model_server)])
    universe = freeze_universe(cohort, 1, AT)
    order = {"market_id": str(market.pk), "outcome": "Yes", "amount": 2000, "probability": 0.9}
    return cohort.entries.get(), universe, market, order


def test_a_late_rerun_trades_at_the_current_price_and_keeps_the_frozen_one(
    model_server, late_setup
):
    entry, universe, market, order = late_setup
    later = AT + UNIVERSE_PRICE_WINDOW + timedelta(hours=2)
    market.last_prices = {"Yes": "0.95"}
    market.last_priced_at = later - timedelta(minutes=5)
    market.save()
    model_server.enqueue(success(answer(universe, bets=[order])))

    decision = run_decision(entry.pk, 1, later)

    assert (decision.status, decision.action) == ("done", "BET")
    trade = Trade.objects.get(decision=decision)
    assert trade.price == Decimal("0.95")  # not the 0.40 the universe froze
    assert trade.quote["source"] == "market"
    assert trade.quote["shown_price"] == "0.4"
    assert trade.quote["priced_at"] == market.last_priced_at.isoformat()


def test_a_late_rerun_refuses_to_trade_when_the_current_price_is_stale(model_server, late_setup):
    entry, universe, market, order = late_setup
    later = AT + UNIVERSE_PRICE_WINDOW + timedelta(hours=2)  # the market was last marked at AT
    model_server.enqueue(
        success(answer(universe, bets=[order])), success(answer(universe, bets=[order]))
    )

    decision = run_decision(entry.pk, 1, later)

    assert (decision.status, decision.action) == ("done", "HOLD")
    assert "no price marked recently enough to trade at" in decision.hold_reason
    assert not Trade.objects.filter(decision=decision).exists()


def test_an_on_time_decision_trades_at_the_frozen_price(model_server, late_setup):
    entry, universe, market, order = late_setup
    market.last_prices = {"Yes": "0.95"}  # moved since the freeze, within the window
    market.save()
    model_server.enqueue(success(answer(universe, bets=[order])))

    decision = run_decision(entry.pk, 1, AT + UNIVERSE_PRICE_WINDOW)

    trade = Trade.objects.get(decision=decision)
    assert trade.price == Decimal("0.4") and trade.quote["source"] == "decision"
    assert "shown_price" not in trade.quote
