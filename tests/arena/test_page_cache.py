"""The page cache serves anonymous readers fast and never shows data older than the last commit."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache

from agents.models import Competitor
from cohorts.services import BetOrder, execute_orders, open_cohort
from cohorts.settlement import settle_market
from markets.models import Market

pytestmark = pytest.mark.django_db(transaction=True)
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)


@pytest.fixture(autouse=True)
def page_cache_on(settings):
    settings.ARENA_PAGE_CACHE = True
    cache.clear()


def _market():
    return Market.objects.create(
        external_id="m1",
        question="Will the cache stay honest?",
        outcomes=["Yes", "No"],
        last_prices={"Yes": "0.5", "No": "0.5"},
        volume=1000,
    )


def test_second_anonymous_read_is_a_hit_and_identical(client):
    first = client.get("/markets/")
    second = client.get("/markets/")
    assert first["X-Cache"] == "miss" and second["X-Cache"] == "hit"
    assert first.content == second.content
    assert second["Content-Security-Policy"] == first["Content-Security-Policy"]
    assert not first.cookies  # public pages set no cookie (no CSRF token for anonymous readers)


def test_a_committed_write_is_visible_on_the_next_read(client):
    client.get("/markets/")
    assert client.get("/markets/")["X-Cache"] == "hit"
    _market()  # a raw ORM write does not invalidate (the TTL backstop covers such paths) ...
    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    open_cohort(SUNDAY, at=SUNDAY)  # ... but a service write does, once it commits
    resp = client.get("/markets/")
    assert resp["X-Cache"] == "miss"
    assert "Will the cache stay honest?" in resp.content.decode()


def test_settlement_invalidates_the_pages_that_show_money(client):
    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    cohort, _ = open_cohort(SUNDAY, at=SUNDAY)
    entry = cohort.entries.get()
    market = _market()
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("100"))], [], None, at=SUNDAY)
    url = f"/cohorts/{cohort.pk}/"
    before = client.get(url)
    assert client.get(url)["X-Cache"] == "hit"
    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="Yes")
    settle_market(market, at=SUNDAY)
    after = client.get(url)
    assert after["X-Cache"] == "miss"
    assert "$10,100.00" in after.content.decode() and "$10,100.00" not in before.content.decode()


def test_staff_and_writes_bypass_the_cache(client):
    user = get_user_model().objects.create_user("s", password="pw-s-12345", is_staff=True)
    client.get("/markets/")
    client.force_login(user)
    resp = client.get("/markets/")
    assert "X-Cache" not in resp  # a session means fresh pages
    assert "X-Cache" not in client.get("/healthz")
    assert "X-Cache" not in client.get("/exports/trades.csv")


def test_leaderboard_api_survives_snapshot_ticks_but_not_a_new_score_run(client):
    from cohorts.snapshots import take_snapshot
    from scoring.services import compute_scores

    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    open_cohort(SUNDAY, at=SUNDAY)
    client.get("/api/leaderboard?scope=live")
    take_snapshot(at=SUNDAY)  # values changed, scores did not
    assert client.get("/api/leaderboard?scope=live")["X-Cache"] == "hit"
    assert client.get("/")["X-Cache"] == "miss"  # the home page shows values: re-rendered
    before = client.get("/api/leaderboard?scope=live").json()
    compute_scores("live", as_of=SUNDAY)
    resp = client.get("/api/leaderboard?scope=live")
    assert resp["X-Cache"] == "miss"
    assert before["as_of"] is None and resp.json()["as_of"] is not None


def test_leaderboard_api_default_scope_follows_new_cohorts(client):
    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    open_cohort(SUNDAY, kind="demo", at=SUNDAY)
    assert client.get("/api/leaderboard").json()["scope"] == "demo"
    open_cohort(SUNDAY, at=SUNDAY)  # the first live cohort: the site now shows live, so must this
    resp = client.get("/api/leaderboard")
    assert resp["X-Cache"] == "miss" and resp.json()["scope"] == "live"


def test_while_one_request_renders_a_new_version_others_get_the_previous_page(client):
    from arena.cache import DATA_KEY, _page_id

    old = client.get("/markets/")
    cache.set(DATA_KEY, "a-newer-version")  # a write committed
    # Someone else is rendering the new version right now.
    request = client.get("/markets/").wsgi_request  # renders v2 and stores it ...
    cache.set(DATA_KEY, "newest")
    key = f"arena:page:newest:{_page_id(request)}"
    cache.add(f"arena:render:{key}", 1, 5)  # ... and a render of v3 is in flight
    resp = client.get("/markets/")
    assert resp["X-Cache"] == "stale"
    assert resp.content == old.content


@pytest.mark.parametrize("method", ["post", "put", "delete", "trace", "patch"])
def test_anonymous_writes_to_any_url_leave_the_cache_alone(client, method):
    # An anonymous POST loop used to empty the whole cache (10 POST/s: 1,294 -> 142 req/s).
    client.get("/markets/")
    assert client.get("/markets/")["X-Cache"] == "hit"
    for url in ("/", "/markets/", "/api/markets", "/admin/login/", "/no-such-page/"):
        response = getattr(client, method)(url)
        assert response.status_code < 500
        assert client.get("/markets/")["X-Cache"] == "hit", (method, url)


def test_public_views_refuse_writes_with_405(client):
    assert client.post("/api/markets").status_code == 405  # (the test client skips CSRF)
    assert client.generic("TRACE", "/markets/").status_code == 405
    assert client.generic("TRACE", "/api/markets").status_code == 405
    assert client.head("/api/markets").status_code == 200


def test_a_staff_write_through_the_admin_invalidates(client):
    user = get_user_model().objects.create_superuser("s", password="pw-s-12345")
    client.get("/markets/")
    assert client.get("/markets/")["X-Cache"] == "hit"
    staff = type(client)()
    staff.force_login(user)
    # Any POST by signed-in staff may have changed what pages show.
    staff.post("/admin/agents/competitor/add/", {"slug": "x"})
    assert client.get("/markets/")["X-Cache"] == "miss"
