"""Every public page: status, key content, truthful empty states and 404s."""

import pytest
from django.urls import reverse

from cohorts.models import Cohort
from tests.site.conftest import build_arena

pytestmark = pytest.mark.django_db


def get(client, url, status=200):
    response = client.get(url)
    assert response.status_code == status, response.content[:500]
    return response


def text(response) -> str:
    return response.content.decode()


# --- empty site ----------------------------------------------------------------------------


def test_home_on_an_empty_site_says_markets_not_synced_and_no_cohort(client):
    body = text(get(client, "/"))
    assert "Markets not synced yet" in body
    assert "No live cohort yet" in body
    assert '<table class="leaderboard"' not in body


def test_home_says_no_scores_before_the_first_run(client, world):
    world.market()
    build_arena(world)
    body = text(get(client, "/"))
    assert "Markets not synced yet" not in body
    assert "No scores yet" in body


def test_home_says_no_resolutions_when_the_run_scored_nothing(client, world):
    build_arena(world)
    world.score_run("live", n_resolved=0)
    body = text(get(client, "/"))
    assert "No resolutions yet" in body
    assert "none of their markets has resolved" in body


@pytest.mark.parametrize(
    "url, expected",
    [
        ("/cohorts/", "No cohort yet"),
        ("/competitors/", "No competitors yet"),
        ("/markets/", "Markets not synced yet"),
    ],
)
def test_list_pages_have_empty_states(client, url, expected):
    assert expected in text(get(client, url))


def test_cohort_without_snapshots_decisions_or_universe_explains_itself(client, world):
    comp = world.competitor()
    cohort = world.cohort()
    world.entry(cohort, comp)
    body = text(get(client, f"/cohorts/{cohort.pk}/"))
    assert "No snapshots yet" in body
    assert "No decisions yet" in body
    assert "No universe frozen yet" in body
    assert "at cost" in body  # value before the first snapshot is labelled


def test_competitor_page_without_scores(client, world):
    comp = world.competitor("lonely-model")
    body = text(get(client, f"/competitors/{comp.slug}/"))
    assert "No live score run yet" in body
    assert "No calibration data yet" in body


# --- populated pages -----------------------------------------------------------------------


def test_home_ranks_rows_with_ci_n_and_provisional_badge(client, arena_world):
    body = text(get(client, "/"))
    assert body.index("Alpha Model") < body.index("Beta Model") < body.index("Market Baseline")
    assert "[0.050, 0.150]" in body  # rank 1 Brier CI
    assert "provisional" in body
    assert 'aria-sort="ascending"' in body
    assert 'id="overview-data"' in body  # chart data via json_script
    assert "No resolutions yet" not in body


def test_home_sort_by_column_with_and_without_htmx(client, arena_world):
    body = text(get(client, "/?sort=brier&dir=desc"))
    assert body.index("Market Baseline") < body.index("Alpha Model")
    partial = client.get(
        "/?sort=brier&dir=desc", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="leaderboard-table"
    )
    part = text(partial)
    assert part.lstrip().startswith('<div id="leaderboard-table"')
    assert "<html" not in part
    assert part.index("Market Baseline") < part.index("Alpha Model")


def test_home_scope_toggle_labels_demo(client, arena_world):
    body = text(get(client, "/?scope=demo"))
    assert "badge-demo" in body
    assert "Nothing here is real" in body
    assert "No demo cohort yet" in body


def test_cohort_list_and_detail(client, arena_world):
    cohort = arena_world.cohort_main
    body = text(get(client, "/cohorts/"))
    assert f"/cohorts/{cohort.pk}/" in body
    body = text(get(client, f"/cohorts/{cohort.pk}/"))
    for needle in (
        "Alpha Model",
        "Beta Model",
        "value-chart-data",
        "Recent decisions",
        "range-btn",
        "Will the first test market resolve YES?",
        "3 of 5",
    ):
        assert needle in body, needle


def test_cohort_detail_replay_badge(client, world):
    cohort = build_arena(world, kind=Cohort.Kind.REPLAY)
    body = text(get(client, f"/cohorts/{cohort.pk}/"))
    assert "badge-replay" in body


def test_cohort_range_param_without_js_renders_that_range(client, arena_world):
    cohort = arena_world.cohort_main
    body = text(get(client, f"/cohorts/{cohort.pk}/?range=1H"))
    assert 'data-range="1H" data-target="value-chart-plot" aria-current="true"' in body


def test_entry_page(client, arena_world):
    entry = arena_world.entries[0]
    url = reverse("entry-detail", args=[entry.cohort_id, entry.competitor.slug])
    body = text(get(client, url))
    for needle in (
        "Equity",
        "Week 1",
        "Week 3",
        "Won",
        "Open positions",
        "Trades",
        "Forecasts",
        "equity-chart-data",
    ):
        assert needle in body, needle


def test_entry_replicates(client, world):
    comp = world.competitor("twin-model")
    world.market()
    cohort = world.cohort()
    world.entry(cohort, comp, replicate=1)
    second = world.entry(cohort, comp, replicate=2)
    world.decision(second, reasoning="second replicate thinking")
    url = reverse("entry-detail", args=[cohort.pk, comp.slug])
    assert "second replicate thinking" not in text(get(client, url))
    body = text(get(client, url + "?replicate=2"))
    assert "second replicate thinking" in body
    assert "replicate 2" in body
    get(client, url + "?replicate=3", status=404)


def test_competitor_pages(client, arena_world):
    body = text(get(client, "/competitors/"))
    assert "Alpha Model" in body and "Baseline strategy" in body
    body = text(get(client, "/competitors/alpha-model/"))
    for needle in (
        "Reliability diagram",
        "reliability-data",
        "n=",
        "Murphy",
        "0.2500",
        "WEAK_EDGE",
        "beta-model",
        "better",
        "Prize share",
        "Per scored forecast",
    ):
        if needle == "n=":
            continue  # bin counts are drawn by charts.js; the table shows them below
        assert needle in body, needle
    # DM row is oriented: beta-model's page shows the pair from its side
    beta = text(get(client, "/competitors/beta-model/"))
    assert "worse" in beta


def test_market_list_search_filter_and_pagination(client, world):
    for i in range(55):
        world.market(f"Zebra question {i}")
    world.market("Unique giraffe question")
    body = text(get(client, "/markets/"))
    assert "Page 1 of 2" in body
    body = text(get(client, "/markets/?q=giraffe"))
    assert "Unique giraffe question" in body and "Zebra" not in body
    body = text(get(client, "/markets/?status=resolved"))
    assert "No market matches" in body
    partial = client.get(
        "/markets/?q=giraffe", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="market-results"
    )
    assert text(partial).lstrip().startswith('<div id="market-results"')


def test_market_detail(client, arena_world):
    resolved = arena_world.markets[-1]
    body = text(get(client, f"/markets/{resolved.pk}/"))
    for needle in (
        "Resolved <strong>Yes</strong>",
        "upstream resolved",
        "price-data",
        "Rules",
        "Stated forecasts vs the price",
        "+0.150",
    ):
        assert needle in body, needle
    first = arena_world.markets[1]
    body = text(get(client, f"/markets/{first.pk}/"))
    assert "Who holds what" in body and "Alpha Model" in body


def test_decision_page(client, arena_world):
    d = arena_world.decisions[0]
    body = text(get(client, f"/decisions/{d.pk}/"))
    for needle in (
        "You are a forecaster.",
        "<details",
        "Raw response",
        "vendor/model-2026",
        "1000 in / 200 out",
        "$0.012",  # one money rule: cents, up to four decimals below a dollar
        "900 ms",
        "Parsed decision",
        "BUY",
    ):
        assert needle in body, needle


def test_decision_page_lists_each_attempts_problems_readably(client, arena_world):
    d = arena_world.decisions[0]
    d.validation_errors = [
        {"phase": "initial", "problems": ["missing forecasts for markets 35, 78"]},
        {"phase": "repair", "problems": ["BETs total $3750.00, above 25% of cash"]},
    ]
    d.save(update_fields=["validation_errors"])
    body = text(get(client, f"/decisions/{d.pk}/"))
    assert "First answer:" in body and "Repair answer:" in body
    assert "<li>missing forecasts for markets 35, 78</li>" in body
    assert "above 25% of cash</li>" in body
    assert "{&#x27;phase&#x27;" not in body and "{'phase'" not in body  # no Python dict repr


def test_methodology_page_shows_hash_constants_and_rules(client):
    from core.methodology import METHODOLOGY_HASH, describe

    body = text(get(client, "/methodology/"))
    assert METHODOLOGY_HASH in body
    assert describe()[0][0] in body
    assert "Minimum bet $50" in body
    # The changelog: every sealed version with its hash, what v2 changed and why.
    from core.methodology import history

    for version in history():
        assert version["sha256"] in body
    assert "Version 1" in body and "Version 3" in body and "Version 4" in body and "Version 5 (current)" in body
    # What v3 states: the paired tests' loss order, group letters, Holm-adjusted edge labels.
    assert "first decision time" in body and "group letters" in body
    assert "Holm-adjusted" in body and "borderline" in body
    assert "shift_replicates_by_bias" in body and "350 resolved questions" in body
    assert "2c88d7d" in body  # the in-place edit of v1 is named, not hidden


@pytest.mark.parametrize(
    "url",
    [
        "/cohorts/999999/",
        "/cohorts/999999/entries/nobody/",
        "/competitors/nobody/",
        "/markets/999999/",
        "/decisions/999999/",
        "/api/cohorts/999999",
        "/api/cohorts/999999/series",
        "/api/decisions/999999",
        "/api/markets/999999",
        "/exports/nothing.csv",
        "/exports/trades.xml",
    ],
)
def test_missing_things_are_404(client, db, url):
    get(client, url, status=404)


def test_no_inline_scripts_on_any_page(client, arena_world):
    d = arena_world.decisions[0]
    entry = arena_world.entries[0]
    urls = [
        "/",
        "/cohorts/",
        f"/cohorts/{entry.cohort_id}/",
        reverse("entry-detail", args=[entry.cohort_id, entry.competitor.slug]),
        "/competitors/",
        "/competitors/alpha-model/",
        "/markets/",
        f"/markets/{arena_world.markets[0].pk}/",
        f"/decisions/{d.pk}/",
        "/methodology/",
        "/about/",
    ]
    import re

    for url in urls:
        body = text(get(client, url))
        for tag in re.findall(r"<script\b[^>]*>", body):
            assert "src=" in tag or 'type="application/json"' in tag, (url, tag)
        assert " onclick=" not in body and " onload=" not in body


def test_home_and_competitor_default_to_the_scope_that_has_data(client, world):
    # A fresh install after `arena demo`: only demo cohorts exist, so that is what `/` shows.
    build_arena(world, kind="demo", n_competitors=2)
    world.score_run("demo")
    body = text(get(client, "/"))
    assert "Nothing here is real" in body
    comp = world.competitors[0]
    body = text(get(client, f"/competitors/{comp.slug}/"))
    assert "Metrics across demo cohorts" in body
    # Once a live cohort exists, live is the default again; demo stays one click away.
    build_arena(world, kind="live", n_competitors=1)
    body = text(get(client, "/"))
    assert "Nothing here is real" not in body


def test_replay_cohort_page_shows_its_warning_notes_escaped(client, world):
    cohort = build_arena(world, kind="replay", n_competitors=1)
    Cohort.objects.filter(pk=cohort.pk).update(
        notes="Models may know outcomes before their training cutoff.\n<b>cutoff</b> 2025-06"
    )
    body = text(get(client, f"/cohorts/{cohort.pk}/"))
    assert "Models may know outcomes before their training cutoff." in body
    assert "&lt;b&gt;cutoff&lt;/b&gt;" in body


def test_prose_reads_the_provisional_rule_from_the_sealed_constants(client):
    from core.methodology import CONSTANTS

    body = text(get(client, "/methodology/"))
    delta = f"{CONSTANTS.provisional_brier_delta:g}"
    power = f"{CONSTANTS.provisional_power:.0%}"
    assert f"enough to detect a {delta} Brier edge at {power} power" in body
    assert "{% sealed" not in body


def test_home_with_a_run_that_has_no_table_names_the_run_and_says_so(client, world):
    """A finished run whose all-cohorts table is empty (every row is a cohort's) still names
    the run, and the page says the table is empty rather than showing nothing."""
    build_arena(world)
    run = world.score_run("live")
    run.rows.filter(cohort__isnull=True).delete()
    body = text(get(client, "/"))
    assert "This score run has no leaderboard rows." in body
    # A run stored without its counts in words still says how many forecasts it scored.
    assert f"{run.n_resolved} forecasts on resolved markets of {run.n_forecasts}" in body
    assert "Markets not synced yet" not in body  # the facts come without the rows too
