"""What visitors read after staff work (issue 43): a resolved market shows its final prices,
not the quote synced after it; a staff change says when it was made (wall clock) and, for a
simulated scope, the scope's time it applies at."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.urls import reverse

from markets.models import Market, PricePoint, ResolutionChange
from tests.site.conftest import T0


def test_a_resolved_market_shows_final_prices_never_current_ones(client, world):
    market = world.market(last_prices={"Yes": "0.998", "No": "0.002"})
    PricePoint.objects.filter(market=market, ts=T0 + timedelta(hours=4), outcome="Yes").update(
        price=Decimal("0.31")
    )
    world.resolve(market, "No")  # resolved_at is T0 + 3 days, after every quote
    PricePoint.objects.create(  # a quote synced after the resolution is not a final price
        market=market, outcome="Yes", ts=T0 + timedelta(days=4), price=Decimal("0.998")
    )
    page = client.get(reverse("market-detail", args=[market.pk])).content.decode()
    assert "Current prices" not in page
    facts = page.split("Final prices (last quote before the resolution)", 1)[1].split("</dd>")[0]
    assert "0.310" in facts and "0.998" not in facts
    assert "Resolved: No" in page


def test_an_open_market_still_shows_current_prices(client, world):
    market = world.market(last_prices={"Yes": "0.30", "No": "0.70"})
    page = client.get(reverse("market-detail", args=[market.pk])).content.decode()
    assert "Current prices" in page and "Final prices" not in page


def test_the_audit_trail_labels_both_clocks(client, world):
    market = world.market()
    simulated = T0 + timedelta(days=2, hours=18, minutes=50)
    ResolutionChange.objects.create(
        market=market, source=Market.ResolvedBy.ADMIN, from_status="open", to_status="void",
        reason="disputed", changed_at=simulated, made_at=simulated + timedelta(days=40, minutes=30),
    )  # fmt: skip
    page = client.get(reverse("market-detail", args=[market.pk])).content.decode()
    made = (simulated + timedelta(days=40, minutes=30)).strftime("%Y-%m-%d %H:%M")
    assert f"made {made} (wall clock)" in page
    assert f"applies at {simulated:%Y-%m-%d %H:%M} (simulated clock)" in page


def test_leaderboard_and_cohort_page_say_the_standings_last_changed_by_a_correction(client, db):
    from datetime import UTC, datetime

    from cohorts.services import BetOrder, execute_orders
    from markets.corrections import set_resolution
    from scoring.services import compute_scores
    from tests.factories import make_cohort_with_entries, make_market

    cohort, (a, b) = make_cohort_with_entries(2, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    m = make_market(prices={"Yes": "0.50", "No": "0.50"})
    at = datetime(2026, 11, 16, 10, tzinfo=UTC)
    execute_orders(a, [BetOrder(m.pk, "Yes", Decimal("100"))], [], None, at=at)
    execute_orders(b, [BetOrder(m.pk, "No", Decimal("50"))], [], None, at=at)
    set_resolution(m, status="resolved", outcome="Yes", reason="upstream said Yes")
    compute_scores("live")
    home = client.get("/?scope=live").content.decode()
    assert "last changed because of a staff correction" in home  # the first resolution, by staff

    set_resolution(m, status="resolved", outcome="No", reason="source misread")
    compute_scores("live")  # the rescore has landed: no "rescoring" notice any more
    link = f'{reverse("market-detail", args=[m.pk])}#resolution-h'
    for url in ("/?scope=live", reverse("cohort-detail", args=[cohort.pk])):
        page = client.get(url).content.decode()
        line = page.split("last changed because of a staff correction", 1)[1].split("</p>")[0]
        assert link in line and "resolved Yes → resolved No" in line and "(wall clock)" in line
