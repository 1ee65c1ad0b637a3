"""A search is cached once per search, not once per spelling: an attacker varying whitespace and
case cannot fill the cache with copies of one page (800 spellings made 767 Redis entries)."""

import itertools

import pytest

from markets.models import Market

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def markets(page_cache):
    Market.objects.create(
        external_id="g1", question="Will the Giraffe escape the zoo?", outcomes=["Yes", "No"]
    )
    Market.objects.create(external_id="g2", question="Will the zebra stay?", outcomes=["Yes", "No"])


def _spellings(word: str, n: int):
    """n different ways to type `word`: case patterns and whitespace around and inside."""
    pads = ["", " ", "  ", "\u3000", " \u00a0"]
    cases = (
        "".join(c.upper() if (mask >> i) & 1 else c for i, c in enumerate(word))
        for mask in range(2 ** len(word))
    )
    for case, left, right in itertools.islice(itertools.product(cases, pads, pads), n):
        yield f"{left}{case}{right}"


@pytest.mark.parametrize("path", ["/markets/", "/api/markets"])
def test_every_spelling_of_a_search_is_one_cached_page(client, path):
    first = client.get(path, {"q": "the giraffe"})
    assert first["X-Cache"] == "miss" and b"Giraffe escape" in first.content
    assert b"zebra" not in first.content
    for q in ["The Giraffe", "  THE   giraffe ", "the\u00a0giraffe", "tHe \u3000 GiRaFfE"]:
        again = client.get(path, {"q": q})
        assert again["X-Cache"] == "hit", q
        assert again.content == first.content


def test_many_spellings_make_one_entry(client):
    states = [client.get("/markets/", {"q": q})["X-Cache"] for q in _spellings("giraffe", 200)]
    assert states.count("miss") == 1 and states.count("hit") == 199


def test_the_normalised_search_finds_what_the_typed_one_meant(client):
    page = client.get("/markets/", {"q": "  WILL   the  GIRAFFE "})
    assert b"Giraffe escape" in page.content and b"zebra" not in page.content
    form = client.get("/markets/", {"q": "ZEBRA"}).content.decode()
    assert 'value="zebra"' in form  # the page shows the search it ran


@pytest.mark.redis
def test_spellings_do_not_fill_redis(client, redis_cache):
    for q in _spellings("giraffe", 300):
        assert client.get("/markets/", {"q": q}).status_code == 200
    keys = redis_cache._cache.get_client().keys("*arena:page:*")
    assert len(keys) == 1, keys
