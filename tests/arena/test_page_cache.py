"""The page cache serves anonymous readers fast and never shows data older than the last commit."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.http import HttpResponse
from django.urls import path

from agents.models import Competitor
from cohorts.services import BetOrder, execute_orders, open_cohort
from cohorts.settlement import settle_market
from core.versions import DATA_KEY, SCORES_KEY, VALUES_KEY
from markets.models import Market

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("page_cache")]
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)


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
    from web.cache import DATA_KEY, render_lock

    old = client.get("/markets/")
    cache.set(DATA_KEY, "newest")  # a write committed ...
    cache.add(render_lock(("newest",), "GET:/markets/?"), 1, 5)  # ... and a render is in flight
    resp = client.get("/markets/")
    assert resp["X-Cache"] == "stale"
    assert resp.content == old.content
    cache.delete(render_lock(("newest",), "GET:/markets/?"))  # the renderer died
    assert client.get("/markets/")["X-Cache"] == "miss"
    assert client.get("/markets/")["X-Cache"] == "hit"


def test_unknown_parameters_share_the_page_and_never_reach_the_view(client):
    from django.core.cache import cache as django_cache

    first = client.get("/markets/?utm_source=a")
    size = len(django_cache._cache)
    for n in range(5):
        resp = client.get(f"/markets/?utm_source=mail-{n}&bust={n}")
        assert resp["X-Cache"] == "hit" and resp.content == first.content
        assert dict(resp.wsgi_request.GET) == {}  # the view saw none of them
    assert len(django_cache._cache) == size  # and they made no new entries


def test_declared_parameters_are_normalised_and_bad_values_are_not_stored(client):
    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    cohort, _ = open_cohort(SUNDAY, at=SUNDAY)
    assert client.get(f"/cohorts/{cohort.pk}/?range=1w")["X-Cache"] == "miss"
    assert client.get(f"/cohorts/{cohort.pk}/?range=1W&utm=x")["X-Cache"] == "hit"
    assert client.get(f"/cohorts/{cohort.pk}/?range=ALL")["X-Cache"] == "miss"
    for _ in range(2):  # a value the page refuses: its one-line 400, never stored
        resp = client.get(f"/cohorts/{cohort.pk}/?range=nonsense")
        assert resp.status_code == 400 and "X-Cache" not in resp
        assert resp.content.decode() == "range must be one of 10M, 1H, 1D, 1W, 1M, 3M, ALL\n"
    api = client.get(f"/api/cohorts/{cohort.pk}/series?range=5Y&entry=abc")
    assert api.status_code == 400 and "error" in api.json() and "X-Cache" not in api


def test_a_hit_is_one_cache_round_trip(client, monkeypatch):
    from django.core.cache import cache as django_cache

    client.get("/methodology/")
    calls, depth = [], [0]

    def spy(name, real):
        def call(*args, **kwargs):
            if not depth[0]:  # locmem's get_many calls get() itself; Redis sends one MGET
                calls.append(name)
            depth[0] += 1
            try:
                return real(*args, **kwargs)
            finally:
                depth[0] -= 1

        return call

    for name in ("get", "get_many", "set", "set_many", "add", "delete", "incr"):
        monkeypatch.setattr(django_cache, name, spy(name, getattr(django_cache, name)))
    assert client.get("/methodology/")["X-Cache"] == "hit"
    assert calls == ["get_many"]


@pytest.mark.parametrize(
    ("url", "tokens"),
    [
        ("/methodology/", {DATA_KEY}),  # no portfolio values on it
        ("/", {DATA_KEY, VALUES_KEY}),
        ("/api/leaderboard?scope=live", {SCORES_KEY}),
    ],
)
def test_a_hit_reads_the_page_and_only_the_tokens_it_depends_on(client, monkeypatch, url, tokens):
    # On the file cache every key is a file opened per request: a token the page does not
    # depend on is a read for nothing.
    from django.core.cache import cache as django_cache

    client.get(url)
    asked = []
    real = django_cache.get_many

    def get_many(keys, *args, **kwargs):
        asked.append(list(keys))
        return real(keys, *args, **kwargs)

    monkeypatch.setattr(django_cache, "get_many", get_many)
    assert client.get(url)["X-Cache"] == "hit"
    [keys] = asked
    pages = [k for k in keys if k.startswith("arena:page:")]
    assert len(pages) == 1 and set(keys) - set(pages) == tokens


def test_a_snapshot_tick_keeps_pages_without_values_cached(client):
    from cohorts.snapshots import take_snapshot

    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    cohort, _ = open_cohort(SUNDAY, at=SUNDAY)
    pages = ["/markets/", "/methodology/", f"/cohorts/{cohort.pk}/", "/"]
    for url in pages:
        client.get(url)
    take_snapshot(at=SUNDAY, cohorts=[cohort])
    states = {url: client.get(url)["X-Cache"] for url in pages}
    assert states == {
        "/markets/": "hit",
        "/methodology/": "hit",
        f"/cohorts/{cohort.pk}/": "miss",  # shows values: rendered again
        "/": "miss",
    }


def test_the_htmx_partial_is_its_own_page(client):
    full = client.get("/markets/")
    partial = client.get("/markets/", headers={"HX-Request": "true", "HX-Target": "market-results"})
    assert partial["X-Cache"] == "miss" and len(partial.content) < len(full.content)
    other = client.get("/markets/", headers={"HX-Request": "true", "HX-Target": "anything"})
    assert other["X-Cache"] == "hit" and other.content == full.content


@pytest.mark.redis
def test_the_redis_backend_reuses_one_client_and_serves_hits(client, redis_cache):
    redis_cache.set_many({"a": 1, "b": b"two"})
    assert redis_cache.get_many(["a", "b", "c"]) == {"a": 1, "b": b"two"}
    assert redis_cache._cache.get_client() is redis_cache._cache.get_client(write=True)
    assert client.get("/methodology/")["X-Cache"] == "miss"
    assert client.get("/methodology/?utm_source=x")["X-Cache"] == "hit"


def test_every_cached_view_declares_each_parameter_it_reads():
    """The key is made of the declared parameters and the view sees only those: a view that
    reads another one would be keyed wrong (and would never see it). Read the views' source for
    request.GET lookups, including helpers they call in the same module."""
    import inspect
    import re

    from django.urls import get_resolver

    lookup = re.compile(
        r"""(?:request\.GET(?:\.get|\.getlist)?[\(\[]|params\.\w+\(request,)\s*["']([\w-]+)["']"""
    )
    helper_call = re.compile(r"\b(_\w+)\(request")
    checked = 0
    for pattern in get_resolver().url_patterns[-1].url_patterns:  # web.urls
        view = pattern.callback
        spec = getattr(view, "page_spec", None)
        if spec is None:
            continue
        func = inspect.unwrap(view)
        module = inspect.getmodule(func)
        source = inspect.getsource(func)
        for name in set(helper_call.findall(source)):
            if hasattr(module, name):
                source += inspect.getsource(getattr(module, name))
        read = set(lookup.findall(source))
        declared = {name for name, _ in spec.params}
        assert read <= declared, f"{pattern.name} reads {read - declared} without declaring it"
        checked += 1
    assert checked >= 15


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


def test_only_a_committed_staff_write_through_the_admin_invalidates(client):
    from cohorts.models import Decision
    from core import clock
    from tests.factories import make_cohort_with_entries

    _, (entry,) = make_cohort_with_entries(1, week_start=SUNDAY)
    failed = Decision.objects.create(
        entry=entry, week=1, status="failed", claimed_at=clock.now(), error="x"
    )
    user = get_user_model().objects.create_superuser("s", password="pw-s-12345")
    nobody = get_user_model().objects.create_user("n", password="pw-n-12345", is_staff=True)
    client.get("/markets/")
    assert client.get("/markets/")["X-Cache"] == "hit"
    staff, powerless, no_token = type(client)(), type(client)(), type(client)(True)
    staff.force_login(user)
    powerless.force_login(nobody)
    no_token.force_login(user)
    rerun = {"action": "rerun", "_selected_action": [failed.pk]}
    # Refused: a form with errors, no permission, no CSRF token. Nothing was written.
    assert staff.post("/admin/agents/competitor/add/", {"slug": "x"}).status_code == 200
    assert powerless.post("/admin/cohorts/decision/", rerun).status_code == 403
    assert no_token.post("/admin/cohorts/decision/", rerun).status_code == 403
    assert client.get("/markets/")["X-Cache"] == "hit"
    # Committed: the re-run marks the decision retryable, and pages may show it.
    assert staff.post("/admin/cohorts/decision/", rerun).status_code == 302
    assert client.get("/markets/")["X-Cache"] == "miss"


def test_a_cookie_naming_no_live_session_is_served_the_cached_page_and_cleared(client):
    user = get_user_model().objects.create_user("s", password="pw-s-12345", is_staff=True)
    client.get("/markets/")
    junk = type(client)()
    for value in ("junk", "x" * 32, "a" * 5000):
        junk.cookies["sessionid"] = value
        response = junk.get("/markets/")
        assert response["X-Cache"] == "hit", value
        assert response.cookies["sessionid"].value == "" and response.cookies["sessionid"]["expires"]
    staff = type(client)()
    staff.force_login(user)
    assert "X-Cache" not in staff.get("/markets/")  # a live session still means fresh pages
    staff.post("/admin/logout/")
    assert staff.get("/markets/")["X-Cache"] == "hit"  # and once it is over, the cache again


@pytest.mark.parametrize(
    "path",
    [
        "/?range=5Y", "/?sort=evil", "/?scope=moon", "/cohorts/?kind=nope", "/markets/?page=abc",
        "/markets/?q=%00", "/cohorts/1/?range=x", "/cohorts/1/entries/a/?replicate=0",
        "/api/markets?limit=abc", "/api/markets?offset=-1", "/api/overview?scope=moon",
        "/api/cohorts/1/series?entry=%D9%A3", "/api/seals?cohort=abc",
        "/api/leaderboard?cohort=abc", "/api/leaderboard?scope=moon", "/api/cohorts/?kind=x",
    ],
)  # fmt: skip
def test_a_refused_value_is_the_same_400_with_the_cache_on_or_off(client, settings, path):
    """The page cache parses a declared parameter as the view does (web/params.py): the same
    one-line 400 either way, and never an entry."""
    on = client.get(path)
    settings.ARENA_PAGE_CACHE = False
    off = client.get(path)
    assert on.status_code == off.status_code == 400, path
    assert on.content == off.content and "X-Cache" not in on


def _plain_home(request):
    return HttpResponse("not a cached page")


# ROOT_URLCONF for the test below: `/` served by a view that declares no page.
urlpatterns = [path("", _plain_home)]


def test_which_view_declares_a_page_is_remembered_per_url_map(client, settings):
    # The middleware remembers each path's page declaration (resolving is a fifth of a hit),
    # keyed on the URL map in force: a swapped map is read afresh, not served from memory.
    client.get("/")
    assert client.get("/")["X-Cache"] == "hit"
    settings.ROOT_URLCONF = __name__
    plain = client.get("/")
    assert plain.content == b"not a cached page" and "X-Cache" not in plain


def test_long_paths_are_resolved_but_never_kept(client):
    # A crawler's long paths (up to nginx's 8 kB) would otherwise sit in every worker's memory.
    from web.cache import REMEMBERED_PATH_LENGTH, _spec_of

    _spec_of.cache_clear()
    client.get("/markets/")
    kept = _spec_of.cache_info().currsize
    long_path = "/competitors/" + "a" * REMEMBERED_PATH_LENGTH + "/"
    assert client.get(long_path).status_code == 404
    assert _spec_of.cache_info().currsize == kept
    client.get("/methodology/")
    assert _spec_of.cache_info().currsize == kept + 1
