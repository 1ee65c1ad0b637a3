"""What a cold render of a route reads, where issue 44's profiles found reads to cut: the
number of queries of each route named here (a query costs a cold render about a millisecond of
Django's work, whatever it reads), and links written without a reverse() each that are the
links reverse() writes."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, reverse

from cohorts.models import Entry
from markets.models import Market, ResolutionChange

pytestmark = pytest.mark.django_db


def queries(client, url: str) -> list[str]:
    cache.clear()  # cold, as right after a write
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return [q["sql"] for q in ctx.captured_queries]


def test_the_list_pages_read_every_scopes_latest_run_in_one_query(client, arena_world):
    # Four scopes, one query: it was a query per scope.
    for url in ("/competitors/", "/cohorts/"):
        runs = [
            q for q in queries(client, url) if q.lstrip().startswith('SELECT "scoring_scorerun"')
        ]
        assert len(runs) == 1, (url, runs)


def test_the_entry_page_reads_its_series_head_with_the_entry(client, arena_world):
    """The header's value and the chart's range both read the entry's series head: it comes
    with the entry (no query of its own), and the staff corrections are tested once."""
    entry = arena_world.entries[0]
    url = reverse("entry-detail", args=[entry.cohort_id, entry.competitor.slug])
    sql = queries(client, url)
    assert not [q for q in sql if q.lstrip().startswith('SELECT "cohorts_serieshead"')]
    staff = [q for q in sql if 'FROM "markets_resolutionchange"' in q]
    assert len(staff) == 1, staff
    assert len(sql) == 11, sql  # three fewer than when each read its own head and staff test


def test_the_entry_chart_marks_the_entrys_staff_corrections(client, arena_world):
    """The corrections the entry page lists are the ones its chart marks (read once)."""
    entry = arena_world.entries[0]
    market = entry.positions.first().market
    head = Entry.objects.select_related("series_head").get(pk=entry.pk).series_head
    ResolutionChange.objects.create(
        market=market, source=Market.ResolvedBy.ADMIN, changed_at=head.last_ts,
        from_status=market.status, to_status=Market.Status.VOID, reason="bad question",
    )  # fmt: skip
    body = client.get(
        reverse("entry-detail", args=[entry.cohort_id, entry.competitor.slug])
    ).content.decode()
    assert "bad question" in body  # the corrections list
    assert '\\"kind\\":\\"correction\\"' in body or '"kind":"correction"' in body  # the chart


def test_a_decision_page_reads_no_submissions_unless_an_outside_agent_made_it(client, arena_world):
    decision = arena_world.decisions[0]
    assert decision.entry.competitor.kind != "outside"
    sql = queries(client, f"/decisions/{decision.pk}/")
    assert not [q for q in sql if "cohorts_agentsubmission" in q]
    # The API's audit record lists them, empty or not.
    api = queries(client, f"/api/decisions/{decision.pk}")
    assert [q for q in api if "cohorts_agentsubmission" in q]
    # The page also reads its trades' settlements and sales; the API, the submissions.
    assert len(api) == len(sql) - 2 + 1


def test_the_series_api_reads_the_heads_with_the_entries(client, arena_world):
    cohort = arena_world.cohort_main
    sql = queries(client, f"/api/cohorts/{cohort.pk}/series?range=ALL")
    assert not [q for q in sql if q.lstrip().startswith('SELECT "cohorts_serieshead"')]


@pytest.mark.parametrize(
    "name, args",
    [
        ("home", []),
        ("methodology", []),
        ("market-detail", [42]),
        ("market-detail", ["42"]),
        ("cohort-detail", [7]),
        ("competitor-detail", ["alpha-model"]),
        ("competitor-detail", ["007"]),
        ("competitor-detail", ["caf\u00e9"]),  # not a slug: reverse() decides
        ("entry-detail", [3, "beta_model"]),
        ("export", ["seals", "json"]),
        ("method-file", ["docs/verification.md"]),
    ],
)
def test_href_writes_the_links_reverse_writes(name, args):
    names = " ".join(f"a{i}" for i in range(len(args)))
    template = Template("{% load links %}{% href name " + names + " %}")
    context = Context({"name": name, **{f"a{i}": a for i, a in enumerate(args)}})
    try:
        expected = reverse(name, args=args)
    except NoReverseMatch:
        with pytest.raises(NoReverseMatch):  # refused by both
            template.render(context)
        return
    assert template.render(context) == expected


@pytest.mark.parametrize("name, args", [("market-detail", ["x1"]), ("entry-detail", ["a", "b"])])
def test_href_refuses_what_reverse_refuses(name, args):
    with pytest.raises(NoReverseMatch):
        reverse(name, args=args)
    template = Template("{% load links %}{% href name a0 a1 %}" if len(args) == 2 else
                        "{% load links %}{% href name a0 %}")  # fmt: skip
    with pytest.raises(NoReverseMatch):
        template.render(Context({"name": name, "a0": args[0], "a1": args[-1]}))


def test_competitor_entries_value_is_the_series_heads_latest_total(client, arena_world):
    entry = arena_world.entries[0]
    head = Entry.objects.select_related("series_head").get(pk=entry.pk).series_head
    body = client.get(f"/competitors/{entry.competitor.slug}/").content.decode()
    assert f"{head.last_total:,.2f}" in body


def test_the_competitor_page_reads_the_details_of_its_all_cohorts_row_only(client, arena_world):
    """A row's details are about a kilobyte of JSON; the per-cohort table shows columns only."""
    slug = arena_world.entries[0].competitor.slug
    rows = [
        q for q in queries(client, f"/competitors/{slug}/") if 'FROM "scoring_leaderboardrow"' in q
    ]
    assert len(rows) == 1, rows
    assert re.search(r'THEN "scoring_leaderboardrow"\."details"', rows[0])
    assert not re.search(r'(?<!THEN )"scoring_leaderboardrow"\."details"', rows[0]), rows[0]


def test_a_decisions_markets_are_read_without_their_upstream_payload(client, arena_world):
    """A market's upstream payload and rules weigh kilobytes; a decision's page and its audit
    record show neither, for any of the markets it forecast or traded."""
    decision = arena_world.decisions[0]
    for url in (f"/decisions/{decision.pk}/", f"/api/decisions/{decision.pk}"):
        joined = [q for q in queries(client, url) if 'JOIN "markets_market"' in q]
        assert len(joined) == 2, (url, joined)  # the forecasts' markets and the trades'
        for q in joined:
            assert '"markets_market"."raw"' not in q and '"markets_market"."description"' not in q
