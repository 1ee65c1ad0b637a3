"""A rehearsal's results are labelled "Rehearsal" and never mixed with live ones: a rehearsed
week (run through the live path under ARENA_SCOPE=rehearsal) is absent from every live page, API
answer and export, and shown, labelled, under scope=rehearsal."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client

from cohorts.models import Cohort
from core.clock import SimulatedClock, running_on
from markets.models import Market
from scoring.models import ScoreRun
from scoring.tasks import score_all
from tests.factories import make_cohort_with_entries, make_competitor
from tests.rehearsal.test_rehearsal_scope import START, _rehearse_one_week, world

__all__ = ["world"]  # the scope tests' world, which world_server (tests/fixtures.py) serves

pytestmark = pytest.mark.django_db

REHEARSED = ("rehearsed-", "Rehearsed ")  # the rehearsal's competitors' slugs and names


@pytest.fixture
def both(settings, world_clock, world_server, private_cache):
    settings.ARENA_SCOPE = "rehearsal"
    rehearsal = _rehearse_one_week(world_clock, world_server)
    settings.ARENA_SCOPE = "live"
    live, _ = make_cohort_with_entries(
        1, kind=Cohort.Kind.LIVE, competitors=[make_competitor("live-one")], week_start=START
    )
    with running_on(SimulatedClock(START + timedelta(days=1))):
        score_all()  # a live site scores live (and never the rehearsal)
    assert sorted(ScoreRun.objects.values_list("scope", flat=True)) == ["live", "rehearsal"]
    return rehearsal, live


@pytest.fixture
def private_cache(settings, request):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"rehearsal-test-{request.node.nodeid}",
        }
    }


LIVE_URLS = (
    "/",
    "/?scope=live",
    "/cohorts/?kind=live",
    "/competitors/live-one/",
    "/api/leaderboard",
    "/api/leaderboard?scope=live",
    "/api/overview?scope=live",
    "/exports/scores.json?scope=live&since=2026-01-01",
    "/exports/decisions.json?scope=live&since=2026-01-01",
    "/exports/snapshots.csv?scope=live&since=2026-01-01",
    "/exports/forecasts.csv?scope=live&since=2026-01-01",
)


def test_rehearsal_rows_never_reach_a_live_page_api_or_export(both):
    client = Client()
    for url in LIVE_URLS:
        resp = client.get(url)
        assert resp.status_code == 200, url
        body = b"".join(resp.streaming_content) if resp.streaming else resp.content
        text = body.decode()
        for mark in REHEARSED:
            assert mark not in text, (url, mark)
        assert "badge-rehearsal" not in text, url
    lb = client.get("/api/leaderboard").json()
    assert lb["scope"] == "live" and [r["competitor"] for r in lb["rows"]] == ["live-one"]


def test_rehearsal_rows_are_shown_labelled_under_its_scope(both):
    rehearsal, _ = both
    client = Client()
    home = client.get("/?scope=rehearsal").content.decode()
    assert "badge-rehearsal" in home and "Rehearsed Favorite" in home
    assert "accelerated clock" in home and "live-one" not in home

    lb = client.get("/api/leaderboard?scope=rehearsal").json()
    assert lb["scope"] == "rehearsal"
    assert {r["competitor"] for r in lb["rows"]} == {
        "rehearsed-favorite", "rehearsed-longshot-fader", "rehearsed-market"
    }  # fmt: skip
    cohort_lb = client.get(f"/api/leaderboard?cohort={rehearsal.pk}").json()
    assert cohort_lb["scope"] == "rehearsal"

    resp = client.get("/exports/scores.json?scope=rehearsal")
    export = json.loads(b"".join(resp.streaming_content))
    assert export["scope"] == "rehearsal" and "own clock" in export["window"]
    assert export["rows"] and {r["cohort_kind"] for r in export["rows"]} == {"rehearsal"}

    cohort_page = client.get(f"/cohorts/{rehearsal.pk}/").content.decode()
    assert "badge-rehearsal" in cohort_page
    market = Market.objects.filter(source=Market.Source.REHEARSAL).first()
    assert "badge-rehearsal" in client.get(f"/markets/{market.pk}/").content.decode()
    listing = client.get("/cohorts/?kind=rehearsal").content.decode()
    assert "badge-rehearsal" in listing or "Rehearsal" in listing
