"""What a visitor reads around the numbers (issue 27, items 10 and 11): the home page says what
the site is, `/?cohort=` is answered, the methodology badge is said once, an entry's header
shows its value and return, a staff correction is announced until the scores catch up, and the
market page is bounded and labelled."""

from __future__ import annotations

from datetime import timedelta

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
