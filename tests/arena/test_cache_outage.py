"""Fault: the cache's Redis goes away (stopped, or hung) and comes back.

A real redis-server on a private port is stopped or frozen (SIGSTOP) under the running site.
Before: every page, the API and the admin login answered 500. Proves: everything renders,
uncached, while Redis is away; the cache resumes when it is back; and a write made while it was
away is visible at once afterwards (pages cached before the outage are not served again).
"""

from __future__ import annotations

import signal

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches

from core.versions import data_changed
from markets.models import Market
from tests.faults.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = ["/", "/markets/", "/cohorts/", "/competitors/", "/methodology/", "/api/markets",
         "/api/cohorts/", "/api/leaderboard", "/admin/login/"]  # fmt: skip


@pytest.fixture
def redis_cache(settings, redis_server):
    settings.CACHES = {
        "default": {
            "BACKEND": "arena.cache_backend.ResilientRedisCache",
            "LOCATION": redis_server.url,
            "OPTIONS": {"socket_connect_timeout": 0.3, "socket_timeout": 0.3,
                        "breaker_seconds": 0.2},
        }
    }  # fmt: skip
    settings.ARENA_PAGE_CACHE = True
    return redis_server


def _write_market(question: str) -> None:
    Market.objects.create(external_id=question, question=question, outcomes=["Yes", "No"],
                          last_prices={"Yes": "0.5", "No": "0.5"}, volume=10**9)  # fmt: skip
    data_changed()  # what every service write path does


def test_with_redis_stopped_pages_api_and_login_render_uncached(client, redis_cache):
    get_user_model().objects.create_user("ops", password="correct horse", is_staff=True)
    client.get("/markets/")
    assert client.get("/markets/")["X-Cache"] == "hit"

    redis_cache.stop()
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.get("X-Cache") != "hit", url
    _write_market("Written while the cache was down?")
    assert "Written while the cache was down?" in client.get("/markets/").content.decode()
    login = {"username": "ops", "password": "wrong"}
    assert client.post("/admin/login/", login).status_code == 200  # the form, with its error
    login["password"] = "correct horse"
    assert client.post("/admin/login/?next=/admin/", login).status_code == 302

    redis_cache.start()  # back, empty
    client.logout()
    wait_until(lambda: client.get("/markets/").get("X-Cache") == "hit", 10, "caching again")
    assert "Written while the cache was down?" in client.get("/markets/").content.decode()


def test_a_write_while_redis_hangs_is_visible_when_it_returns(client, redis_cache):
    client.get("/markets/")
    assert client.get("/markets/")["X-Cache"] == "hit"  # cached without the market below
    redis_cache.proc.send_signal(signal.SIGSTOP)  # alive but silent: keeps its data
    caches["default"].breaker_seconds = 3.0  # long enough that the write below is not sent
    try:
        assert client.get("/markets/").status_code == 200  # times out once: Redis is skipped
        _write_market("Written while the cache hung?")  # so its version bump never reaches it
        assert "Written while the cache hung?" in client.get("/markets/").content.decode()
    finally:
        redis_cache.proc.send_signal(signal.SIGCONT)

    def fresh_and_cached() -> bool:
        response = client.get("/markets/")
        # Never the page cached before the write (it is still in Redis, under the old token).
        assert "Written while the cache hung?" in response.content.decode()
        return response.get("X-Cache") == "hit"

    wait_until(fresh_and_cached, 10, "caching again")


@pytest.fixture
def broker_down():
    """Point the site's Celery app at a port nobody listens on (a broker that is down)."""
    from arena.celery import app

    saved = app.conf.broker_url, app._pool, app.amqp._producer_pool
    app.conf.broker_url, app._pool, app.amqp._producer_pool = "redis://127.0.0.1:9/0", None, None
    yield
    app.conf.broker_url, app._pool, app.amqp._producer_pool = saved


def test_a_staff_action_that_needs_the_broker_says_it_is_down(client, broker_down):
    from scoring.models import ScoreRun

    user = get_user_model().objects.create_superuser("boss", password="pw-boss-123")
    client.force_login(user)
    run = ScoreRun.objects.create(scope="live", as_of="2026-11-01T00:00Z",
                                  started_at="2026-11-01T00:00Z", methodology_version="1",
                                  methodology_hash="h", engine_version="1")  # fmt: skip
    response = client.post(
        "/admin/scoring/scorerun/",
        {"action": "rescore", "_selected_action": [run.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "the task broker is unreachable" in response.content.decode()
