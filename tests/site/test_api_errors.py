"""Every /api/ error is JSON {"error": ...} with its status; the leaderboard's default scope."""

import pytest
from django.test import Client

from cohorts.models import Cohort
from tests.site.conftest import build_arena

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    "/api/cohorts/",
    "/api/cohorts/{cohort}",
    "/api/cohorts/{cohort}/series",
    "/api/decisions/{decision}",
    "/api/leaderboard",
    "/api/markets",
    "/api/markets/{market}",
]


def _error(response, status: int) -> str:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and body["error"] and "\n" not in body["error"]
    return body["error"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/api/cohorts/999999", "no cohort"),
        ("/api/cohorts/999999/series", "no cohort"),
        ("/api/decisions/999999", "no decision"),
        ("/api/markets/999999", "no market"),
        ("/api/leaderboard?cohort=999999", "no cohort 999999"),
        ("/api/nothing-here", "no such API endpoint: /api/nothing-here"),
        ("/api/cohorts/abc", "no such API endpoint"),
        ("/api/", "no such API endpoint"),
    ],
)
def test_not_found_is_json(client, path, says):
    assert says in _error(client.get(path), 404)


def test_not_found_is_json_with_debug_pages_on(client, settings):
    settings.DEBUG = True  # what `arena up` runs with: Django's own 404 page would be HTML
    assert "no such API endpoint" in _error(client.get("/api/nothing-here"), 404)
    assert "no cohort" in _error(client.get("/api/cohorts/999999"), 404)


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_other_methods_are_json_405_naming_get(arena_world, method):
    # A browser-like client: CSRF checks on, so a 403 from them would show here instead.
    client = Client(enforce_csrf_checks=True)
    ids = {
        "cohort": arena_world.cohort_main.pk,
        "decision": arena_world.decisions[0].pk,
        "market": arena_world.markets[0].pk,
    }
    for template in ENDPOINTS:
        response = getattr(client, method)(template.format(**ids))
        message = _error(response, 405)
        assert message == f"method {method.upper()} not allowed; use GET, HEAD"
        assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("query", ["scope=x", "cohort=abc"])
def test_bad_parameters_are_json_400(client, query):
    _error(client.get(f"/api/leaderboard?{query}"), 400)


def test_leaderboard_without_scope_shows_what_the_site_shows(client, world):
    build_arena(world, kind=Cohort.Kind.DEMO)
    world.score_run("demo")
    body = client.get("/api/leaderboard").json()
    assert body["scope"] == "demo" and body["rows"]
    assert body["scope_note"].startswith("no scope given: demo")
    home = client.get("/").content.decode()
    assert '<a href="?scope=demo" aria-current="page">' in home  # the site's default too
    live = client.get("/api/leaderboard?scope=live").json()
    assert live["scope"] == "live" and live["rows"] == [] and "scope_note" not in live
    # a live cohort takes over as the default, on the site and here alike
    build_arena(world, kind=Cohort.Kind.LIVE)
    assert client.get("/api/leaderboard").json()["scope"] == "live"
