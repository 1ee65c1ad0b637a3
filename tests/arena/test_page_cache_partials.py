"""A page and its htmx partial are two pages: the cache, the view and browsers keep them apart.

The cache once compared the raw HX-Request header with "true" while django-htmx URL-decodes it
under `HX-Request-URI-AutoEncoded: true`, so a crafted request rendered the partial and stored
it under the full page's key: every later visitor got a bare fragment.
"""


import pytest
from django.core.cache import cache

from markets.models import Market

pytestmark = pytest.mark.django_db(transaction=True)

ENCODED = {"HX-Request": "%74rue", "HX-Request-URI-AutoEncoded": "true"}
PARTIALS = [("/", "leaderboard-table"), ("/markets/", "market-results")]


@pytest.fixture(autouse=True)
def market(page_cache):
    Market.objects.create(
        external_id="m1", question="Will partials stay apart?", outcomes=["Yes", "No"], volume=1
    )


def _whole(response) -> bool:
    return b"<html" in response.content


@pytest.mark.parametrize(("path", "target"), PARTIALS)
def test_an_encoded_hx_request_never_poisons_the_full_page(client, path, target):
    crafted = client.get(path, headers={**ENCODED, "HX-Target": target})
    assert crafted.status_code == 200 and crafted["X-Cache"] == "miss"
    assert not _whole(crafted)  # the view (through django-htmx) took it as a partial ...
    visitor = client.get(path)
    assert _whole(visitor), "the partial was stored under the full page's key"
    assert visitor["X-Cache"] == "miss"  # ... and so did the key: it is not the full page
    again = client.get(path, headers={**ENCODED, "HX-Target": target})
    assert again["X-Cache"] == "hit" and again.content == crafted.content
    assert _whole(client.get(path))


@pytest.mark.parametrize(("path", "target"), PARTIALS)
@pytest.mark.parametrize(
    "headers",
    [
        {"HX-Request": "true"},  # htmx, another target: the page
        {"HX-Request": "TRUE", "HX-Target": "{target}"},  # not what htmx sends
        {"HX-Request": "%74rue", "HX-Target": "{target}"},  # encoded but not declared so
        {"HX-Request": "true", "HX-Target": "{target}", "HX-History-Restore-Request": "true"},
        {**ENCODED, "HX-Target": "%6C{target}"},  # encoded target that does not decode to it
        {"HX-Request": "true", "HX-Target": "{target}"},
        {**ENCODED, "HX-Target": "{target}"},
    ],
)
def test_the_key_and_the_view_agree_on_every_header_combination(client, path, target, headers):
    sent = {name: value.format(target=target) for name, value in headers.items()}
    first = client.get(path, headers=sent)
    partial = not _whole(first)
    # A full page asked for first, then the same request: whatever the view rendered for these
    # headers, a plain visitor gets the whole page and the same request gets what it got.
    cache.clear()
    plain = client.get(path)
    second = client.get(path, headers=sent)
    assert second["X-Cache"] == ("miss" if partial else "hit")
    assert _whole(second) is not partial
    assert _whole(client.get(path))
    assert plain.status_code == 200


@pytest.mark.parametrize(("path", "target"), PARTIALS)
def test_page_and_partial_vary_on_the_htmx_headers_and_partials_are_not_kept(client, path, target):
    for _ in range(2):  # the miss and the hit
        full = client.get(path)
        partial = client.get(path, headers={"HX-Request": "true", "HX-Target": target})
        for response in (full, partial):
            vary = {v.strip().lower() for v in response["Vary"].split(",")}
            assert {"hx-request", "hx-target"} <= vary
        assert "no-store" in partial["Cache-Control"]
        assert "no-store" not in full.get("Cache-Control", "")
    assert partial["X-Cache"] == "hit"


def test_partials_are_not_kept_by_browsers_with_the_page_cache_off(client, settings):
    settings.ARENA_PAGE_CACHE = False
    partial = client.get("/markets/", headers={"HX-Request": "true", "HX-Target": "market-results"})
    assert not _whole(partial) and "no-store" in partial["Cache-Control"]
    assert "hx-request" in partial["Vary"].lower()


@pytest.mark.redis
def test_no_poisoning_through_redis(client, redis_cache):
    crafted = client.get("/", headers={**ENCODED, "HX-Target": "leaderboard-table"})
    assert not _whole(crafted)
    assert _whole(client.get("/")) and client.get("/")["X-Cache"] == "hit"
