"""No page does N+1: query counts are bounded and do not grow with the number of rows."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from cohorts.models import Settlement
from scoring.models import ScoreRun

pytestmark = pytest.mark.django_db

MAX_QUERIES = 15


def urls(world) -> dict[str, str]:
    cohort = world.cohort_main
    entry = world.entries[0]
    market = world.markets[1]
    return {
        "home": "/",
        "home-sorted": "/?sort=return",
        "cohorts": "/cohorts/",
        "cohort": f"/cohorts/{cohort.pk}/",
        "entry": reverse("entry-detail", args=[cohort.pk, entry.competitor.slug]),
        "competitors": "/competitors/",
        "competitor": f"/competitors/{entry.competitor.slug}/",
        "markets": "/markets/",
        "market": f"/markets/{market.pk}/",
        "decision": f"/decisions/{world.decisions[0].pk}/",
        "methodology": "/methodology/",
        "api-cohorts": "/api/cohorts/",
        "api-cohort": f"/api/cohorts/{cohort.pk}",
        "api-series": f"/api/cohorts/{cohort.pk}/series?range=ALL",
        "api-decision": f"/api/decisions/{world.decisions[0].pk}",
        "api-markets": "/api/markets",
        "api-market": f"/api/markets/{market.pk}",
    }


def count(client, url: str) -> int:
    # Cold, as the first request after a write: nothing from an earlier request in the cache.
    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


def grow(world) -> None:
    """More of everything: competitors and entries, decisions, positions, forecasts, snapshots,
    markets, settlements, LLM calls, and a newer score run with more rows."""
    cohort = world.cohort_main
    extra_markets = [world.market(f"Extra market {i}") for i in range(4)]
    for i in range(4):
        comp = world.competitor(f"extra-model-{i}")
        entry = world.entry(cohort, comp)
        for week, market in enumerate(extra_markets[:2], start=1):
            world.decision(entry, week=week, market=market)
        world.snapshots(entry, n=30)
    first = world.entries[0]
    for week, market in enumerate(extra_markets[2:], start=4):
        world.decision(first, week=week, market=market, settle=Settlement.Kind.LOST)
    d = world.decisions[0]
    d.llm_calls.create(attempt=2, phase="repair", raw_response="{}", started_at=d.claimed_at)
    world.score_run("live")


def test_query_counts_do_not_grow_with_rows(client, arena_world):
    before = {name: count(client, url) for name, url in urls(arena_world).items()}
    grow(arena_world)
    after = {name: count(client, url) for name, url in urls(arena_world).items()}
    assert after == before
    assert max(after.values()) <= MAX_QUERIES, after


def test_home_query_budget(client, arena_world, django_assert_max_num_queries):
    with django_assert_max_num_queries(10):
        client.get("/")


def test_home_reads_its_run_and_the_runs_rows_in_one_query(client, arena_world):
    """The latest run, its all-cohorts rows in the order asked for and the page's existence
    tests come back together: a cold `/` spends about as much of Django's time per query as
    the database's, whatever the query reads; one of the rows also brings what the board reads
    of the run's details (test_boards_never_read_a_runs_whole_details)."""
    for url in ("/", "/?sort=return&dir=asc"):
        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            body = client.get(url).content.decode()
        scoring = [q["sql"] for q in ctx.captured_queries if "scoring_" in q["sql"]]
        assert len(scoring) == 1, scoring
        assert '<table class="leaderboard' in body


WHOLE_DETAILS = re.compile(r'(.)"scoring_scorerun"\."details"')


def test_boards_never_read_a_runs_whole_details(client, arena_world):
    """A run's details hold every group's paired tests (hundreds of kB for twenty cohorts).
    Read with each leaderboard row, they were parsed once per row: a cold `/` took 157-201 ms
    in bench/pages.py against 13-18 ms. A board reads its group's BoardSlice, stored when the
    run was scored (the list pages and the scores export every board's in one query); only the
    API's edge tables are sliced out of the details, inside a JSON path function, never the
    column itself."""
    cohort = arena_world.cohort_main
    run = ScoreRun.objects.filter(scope="live").latest("pk")
    assert run.details["dm"]["all"]["brier"]  # the fixture's run has tests to read
    slug = arena_world.entries[0].competitor.slug
    pages = (  # (url, paths sliced out of the details, board slices read)
        ("/", 0, 1),
        (f"/cohorts/{cohort.pk}/", 0, 1),
        (f"/competitors/{slug}/", 0, 1),
        ("/api/leaderboard?scope=live", 3, 0),  # the headline, the group's tests, tournament
        ("/cohorts/", 0, 1),  # every cohort's board, in one query
        ("/competitors/", 0, 1),  # each scope's all-cohorts board, in one query
        ("/exports/scores.csv?since=2026-01-01&until=2026-12-31", 0, 1),  # the ranks pages show
    )
    for url, paths, boards in pages:
        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
            assert response.status_code == 200
            if response.streaming:
                assert b"".join(response.streaming_content)  # its queries run as it streams
        sliced = 0
        for q in ctx.captured_queries:
            for before in WHOLE_DETAILS.findall(q["sql"]):
                assert before == "(", (url, q["sql"])  # only as a JSON function's argument
                sliced += 1
        assert sliced == paths, url
        read = sum('FROM "scoring_boardslice"' in q["sql"] for q in ctx.captured_queries)
        assert read == boards, url
