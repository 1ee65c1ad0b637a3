"""What a visitor reads around the numbers (issue 27, items 10 and 11): the home page says what
the site is, `/?cohort=` is answered, the methodology badge is said once, an entry's header
shows its value and return, a staff correction is announced until the scores catch up, and the
market page is bounded and labelled."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from markets.corrections import set_resolution


def test_home_says_in_one_line_what_the_site_is(client, arena_world):
    page = client.get("/").content.decode()
    assert "AI forecasters paper-trade real prediction markets" in page


def test_home_cohort_parameter_goes_to_the_cohort_or_is_refused(client, arena_world):
    cohort = arena_world.cohort_main
    response = client.get("/", {"cohort": cohort.pk})
    assert response.status_code == 302
    assert response["Location"] == reverse("cohort-detail", args=[cohort.pk])
    missing = client.get("/", {"cohort": cohort.pk + 1000})
    assert missing.status_code == 400 and f"no cohort {cohort.pk + 1000}" in missing.text
    assert client.get("/", {"cohort": "abc"}).status_code == 400


def test_methodology_badge_is_said_once_not_on_every_row(client, arena_world):
    from scoring.models import LeaderboardRow

    LeaderboardRow.objects.update(details={"methodology": {"version": "1"}})
    page = client.get("/").content.decode()
    assert "badge-method" not in page  # every row was scored under the run's version
    first = LeaderboardRow.objects.order_by("rank").first()
    first.details = {"methodology": {"version": "2"}}
    first.save()
    page = client.get("/").content.decode()
    assert page.count('class="badge badge-method"') == 1  # only the row that differs


def test_entry_header_shows_value_and_return(client, arena_world):
    entry = arena_world.entries[0]
    url = reverse("entry-detail", args=[entry.cohort_id, entry.competitor.slug])
    page = client.get(url).content.decode()
    header = page.split('<dl class="facts">', 1)[1].split("</dl>", 1)[0]
    assert "<dt>Value" in header and "<dt>Return</dt>" in header and "%" in header


def test_a_staff_correction_shows_rescoring_until_a_newer_run(client, arena_world):
    from core import clock

    market = arena_world.markets[0]  # held and forecast by the live entries
    assert "Rescoring" not in client.get("/").content.decode()
    set_resolution(market, status="void", reason="the question was cancelled")
    cohort_url = reverse("cohort-detail", args=[arena_world.cohort_main.pk])
    assert "Rescoring" in client.get("/").content.decode()
    assert "Rescoring" in client.get(cohort_url).content.decode()
    run = arena_world.score_run("live")
    run.started_at = clock.now() + timedelta(seconds=1)
    run.save()
    assert "Rescoring" not in client.get("/").content.decode()


def test_a_correction_of_a_market_nobody_here_touched_says_nothing(client, arena_world):
    elsewhere = arena_world.market("Will a market no entry saw resolve?")
    set_resolution(elsewhere, status="void", reason="cancelled")
    assert "Rescoring" not in client.get("/").content.decode()


# --- the market page ------------------------------------------------------------------------


def test_market_forecasts_are_paged_with_their_cohort(client, arena_world):
    from cohorts.models import Forecast
    from web.visitor_reads import FORECASTS_PER_PAGE

    market = arena_world.markets[1]
    decision = arena_world.decisions[0]
    base = Forecast.objects.filter(market=market).count()
    Forecast.objects.bulk_create(
        Forecast(
            decision=decision,
            entry=decision.entry,
            market=market,
            outcome=f"Outcome {i}",
            probability=0.5,
            market_price=0.4,
            created_at=decision.decided_at,
        )
        for i in range(2 * FORECASTS_PER_PAGE)
    )
    total = base + 2 * FORECASTS_PER_PAGE
    url = reverse("market-detail", args=[market.pk])
    first = client.get(url).content.decode()
    table = first.split('id="forecasts-h"', 1)[1]
    assert table.count('data-label="Stated"') == FORECASTS_PER_PAGE
    assert 'data-label="Cohort"' in table and f"{total} forecasts" in table
    assert "?page=2" in table
    last_page = -(-total // FORECASTS_PER_PAGE)
    last = client.get(url, {"page": last_page}).content.decode().split('id="forecasts-h"', 1)[1]
    assert last.count('data-label="Stated"') == total - FORECASTS_PER_PAGE * (last_page - 1)
    assert client.get(url, {"page": last_page + 1}).status_code == 404
    assert client.get(url, {"page": "x"}).status_code == 400


def test_market_prices_read_yes_then_no_and_description_has_no_markdown(client, world):
    market = world.market(
        "Will `BTC` close above **$100k**?",
        description="Resolves `Yes` if **BTC** closes above $100k per [CoinGecko](https://example.org).",
        last_prices={"No": "0.70", "Yes": "0.30"},
    )
    page = client.get(reverse("market-detail", args=[market.pk])).content.decode()
    facts = page.split("Current prices", 1)[1].split("</dd>", 1)[0]
    assert facts.index("Yes") < facts.index("No")
    rules = page.split('class="prose rules"', 1)[1].split("</div>", 1)[0]
    assert "`" not in rules and "**" not in rules
    assert "Resolves Yes if BTC closes above $100k per CoinGecko (https://example.org)." in rules


def test_strip_markdown_keeps_text_and_never_markup():
    from web.plain_text import strip_markdown

    assert strip_markdown("## Rules\n\n> quoted *em* and snake_case and 2*3*4") == (
        "Rules\n\nquoted em and snake_case and 2*3*4"
    )
    assert strip_markdown("```\n<b>x</b>\n```") == "<b>x</b>"  # escaped later, by the template
    assert strip_markdown(None) == ""


# --- colours --------------------------------------------------------------------------------


def test_every_competitor_gets_its_own_style_even_with_gaps_in_the_ids(db):
    from agents.models import Competitor
    from web import colours

    made = [
        Competitor.objects.create(slug=f"c-{i}", display_name=f"C {i}", kind="baseline")
        for i in range(20)
    ]
    for gone in made[::3]:  # deleted rows leave gaps in the ids
        gone.delete()
    alive = [c for c in made if c.pk not in {g.pk for g in made[::3]}]
    alive.append(Competitor.objects.create(slug="late", display_name="Late", kind="baseline"))
    styles = [tuple(colours.style_for(c).values()) for c in alive]
    assert len(set(styles)) == len(alive)
    first = alive[: len(colours.PALETTE)]
    assert len({colours.colour_for(c) for c in first}) == len(first)  # colours before dashes
    # Okabe-Ito: none of the palette's colours is the old red/green pair nor a yellow.
    assert "#F0E442" not in colours.PALETTE and len(colours.PALETTE) == 7


def test_a_competitor_has_one_style_on_every_page_and_swatches_match_the_lines(client, arena_world):
    import re

    from agents.models import Competitor
    from web import colours

    # Many competitors elsewhere: the live competitors keep the style they have on the
    # competitor list (all competitors), distinct from each other.
    for i in range(12):
        Competitor.objects.create(slug=f"other-{i}", display_name=f"Other {i}", kind="baseline")
    data = client.get("/api/overview?scope=live").json()
    styles = [(s["color"], s["dash"]) for s in data["series"]]
    assert len(styles) == len(set(styles)) == 3
    everywhere = {tuple(colours.style_for(c, scope="").values()) for c in arena_world.competitors}
    assert set(styles) <= everywhere
    page = client.get("/?scope=live").content.decode()
    table = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    swatches = re.findall(r'<svg class="swatch".*?stroke="(#[0-9A-Fa-f]{6})"', table)
    assert sorted(swatches) == sorted(c for c, _ in styles)
    assert colours.rank(arena_world.competitors[0], "live") == colours.rank(
        arena_world.competitors[0], "demo"
    )


# --- the home chart -------------------------------------------------------------------------


def test_home_chart_does_not_drop_when_a_new_cohort_opens(client, world):
    from cohorts.snapshots import SnapshotRow, store_snapshots

    competitor = world.competitor("steady-grower")
    old = world.entry(world.cohort(weeks_ago=1), competitor)
    new = world.entry(world.cohort(weeks_ago=0), competitor)

    def snaps(entry, totals):
        start = entry.cohort.week_start
        store_snapshots(
            [
                SnapshotRow(
                    entry_id=entry.pk,
                    ts=start + timedelta(hours=h),
                    cash=total,
                    positions_value=Decimal(0),
                    total=total,
                    realized_pnl=Decimal(0),
                    unrealized_pnl=Decimal(0),
                )
                for h, total in enumerate(totals)
            ]
        )

    # The old entry grows 20 % in its first 6 days and holds; the new one opens flat at 0 %.
    snaps(
        old,
        [Decimal(10000 + min(h, 144) * 2000 / 144).quantize(Decimal("0.01")) for h in range(337)],
    )
    snaps(new, [Decimal("10000.00")] * 169)
    data = client.get("/api/overview?scope=live").json()
    (line,) = data["series"]
    y = [v for v in line["y"] if v is not None]
    assert data["value"].startswith("chain-linked growth (%)")  # the glossary's name for it
    assert max(y) == pytest.approx(20.0, abs=0.1) and y[-1] == pytest.approx(20.0, abs=0.1)
    drops = [a - b for a, b in zip(y, y[1:], strict=False)]
    assert max(drops) < 0.5  # a plain mean fell from +20 % to +10 % the moment the cohort opened
    page = client.get("/").content.decode()
    assert "chain-linked" in page and "Average return over time" not in page
