"""Fuzz: hostile Gamma market objects through the real client and the fake Gamma server.

Each drawn page holds five good markets (fresh prices every time) and ten hostile objects
(tests/fakes/hostile.py: NUL, huge strings, wrong types, missing fields, duplicate ids, newlines,
bidi controls, surrogates, out-of-range numbers, objects that are not objects); 60 pages, 600
hostile objects. Every sync must store every good market with its new price, store nothing
PostgreSQL or a page could choke on, and the public market pages must answer below 500. A peer
trickling one byte per 100 ms is unavailable within the client's total timeouts, and the sync
task meeting one records a failed run and keeps every price.
"""

from __future__ import annotations

import re
import time
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.models import JobRun
from markets import tasks
from markets.gamma import GammaClient, GammaUnavailable
from markets.models import Market
from markets.services import sync_markets
from tests.fakes.gamma_server import make_market
from tests.fakes.hostile import GAMMA_KINDS, GammaRecipe, gamma_object, gamma_recipes

pytestmark = pytest.mark.django_db

PAGES = 60

GOOD, HOSTILE = 5, 10
UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def test_every_good_market_of_a_hostile_page_is_stored(gamma, client, gamma_settings):
    gamma_client = GammaClient(gamma.url, timeout=5, retries=0, sleep=lambda s: None)
    seen_kinds: set[str] = set()
    hostile_sent = [0]

    @settings(max_examples=PAGES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        recipes=st.lists(gamma_recipes(), min_size=HOSTILE, max_size=HOSTILE),
        price=st.integers(min_value=1, max_value=99),
    )
    def page(recipes: list[GammaRecipe], price: int) -> None:
        Market.objects.all().delete()
        yes = f"0.{price:02d}"
        no = f"0.{100 - price:02d}"
        good = [make_market(str(100 + i), prices=(yes, no), volume=10_000 - i) for i in range(GOOD)]
        hostile = [
            gamma_object(recipe, make_market(str(900 + j), volume=100), good[j % GOOD]["id"])
            for j, recipe in enumerate(recipes)
        ]
        gamma.markets = good  # what lookups by id or condition id find
        gamma.verbatim_page = good + hostile  # the top page, as it is
        hostile_sent[0] += len(hostile)
        seen_kinds.update(r.kind for r in recipes)

        report = sync_markets(100, client=gamma_client)

        stored = {m.external_id: m for m in Market.objects.all()}
        for market in good:
            prices = {k: Decimal(v) for k, v in stored[market["id"]].last_prices.items()}
            assert prices == {"Yes": Decimal(yes), "No": Decimal(no)}, report.summary()
            assert stored[market["id"]].question == market["question"]
        for market in stored.values():
            texts = [market.question, market.description, market.event_title, *market.outcomes]
            assert not any(UNSAFE.search(t) for t in texts), market.external_id
            assert len(market.question) <= 1000 and "\n" not in market.question
        assert report.fetched == GOOD + HOSTILE

    page()
    good_ids = [m.external_id for m in Market.objects.all()]
    assert hostile_sent[0] >= 500
    assert seen_kinds == set(GAMMA_KINDS)

    # A peer answering one byte per 100 ms: the sync fails within its timeouts, keeping what
    # it has, where a per-read timeout alone once let one request run for a minute.
    slow_client = GammaClient(gamma.url, timeout=1, retries=1, sleep=lambda s: None)
    gamma.fail("trickle", path="/markets", delay=0.1, times=2)
    started = time.monotonic()
    with pytest.raises(GammaUnavailable):
        slow_client.get_market(good_ids[0])
    assert time.monotonic() - started < 2 * (1 + 1)
    # The same peer under the beat's sync task: it ends within one short timeout, its run is
    # recorded as failed with the reason, and every market keeps its price.
    prices = dict(Market.objects.values_list("external_id", "last_prices"))
    gamma_settings.ARENA_HTTP_TIMEOUT = 0.5
    gamma.fail("trickle", path="/markets", delay=0.1, times=1)
    started = time.monotonic()
    with pytest.raises(GammaUnavailable):
        tasks.sync_markets(100)
    assert time.monotonic() - started < 0.5 + 1
    run = JobRun.objects.filter(job="sync").latest("started_at")
    assert run.status == JobRun.Status.FAILED and "GammaUnavailable" in run.error
    assert dict(Market.objects.values_list("external_id", "last_prices")) == prices

    markets = list(Market.objects.values_list("pk", flat=True))
    urls = ["/markets/", "/api/markets", "/markets/?q=%00", "/"]
    urls += [f"/markets/{pk}/" for pk in markets] + [f"/api/markets/{pk}" for pk in markets]
    statuses = {url: client.get(url).status_code for url in urls}
    assert not {url: s for url, s in statuses.items() if s >= 500}
