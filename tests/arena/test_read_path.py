"""The read path has one cache, the page cache. Without it every read renders from the rows
(what is expensive was stored on write: series, leaderboard rows), so what a page shows is
always what was committed; with it, a page is rendered once per version of what it shows: a
snapshot tick renders the pages with values again and leaves the others cached, a data write
renders everything again, a rolled-back write nothing."""

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from agents.models import Competitor
from cohorts.services import BetOrder, execute_orders, open_cohort
from cohorts.snapshots import take_snapshot
from scoring.services import compute_scores
from tests.factories import make_market

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("page_cache")]
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)


def _tables_read(client, url: str) -> tuple[str, str]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return " ".join(q["sql"] for q in ctx.captured_queries), response.content.decode()


@pytest.fixture
def cohort():
    for slug in ("cash", "market"):
        Competitor.objects.create(
            slug=slug, display_name=slug.title(), kind="baseline", strategy="cash"
        )
    cohort, _ = open_cohort(SUNDAY, at=SUNDAY)
    entry = cohort.entries.order_by("pk").first()
    market = make_market(question="Will the page stay honest?")
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("100"))], [], None, at=SUNDAY)
    take_snapshot(at=SUNDAY, cohorts=[cohort])
    compute_scores("live", as_of=SUNDAY)
    return cohort


def charts_end(page: str) -> str:
    data = re.search(r'id="overview-data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(data.group(1))["x"][-1]


def test_a_tick_renders_values_again_and_a_score_run_the_leaderboard(client, cohort):
    _tables_read(client, "/")
    _tables_read(client, "/markets/")
    take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
    assert _tables_read(client, "/markets/")[0] == ""  # no values on it: still cached
    sql, page = _tables_read(client, "/")
    # The chart was read afresh: as the tick stored it with the series (cohorts/series/chart.py).
    assert "cohorts_scopeserieshead" in sql
    assert charts_end(page) == "2026-11-15 00:10"
    compute_scores("live", as_of=SUNDAY + timedelta(minutes=10))  # a data write
    sql, page = _tables_read(client, "/")
    assert "scoring_leaderboardrow" in sql
    assert "00:10 UTC" in page  # the run's clock in the table's meta line


def test_without_the_page_cache_every_read_renders_what_was_committed(client, cohort, settings):
    settings.ARENA_PAGE_CACHE = False
    url = f"/cohorts/{cohort.pk}/"
    _tables_read(client, url)
    take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
    sql, page = _tables_read(client, url)
    assert "cohorts_serieschunk" in sql and "$10,000.00" in page
    again, _ = _tables_read(client, url)
    assert "agents_decision" in again and "cohorts_universe" in again  # nothing kept between


def test_a_page_renders_once_per_version_of_what_it_shows(client, cohort):
    url = f"/cohorts/{cohort.pk}/"
    first_sql, first = _tables_read(client, url)
    assert first_sql
    sql, again = _tables_read(client, url)
    assert sql == "" and again == first
    compute_scores("live", as_of=SUNDAY + timedelta(minutes=10))  # a data write, committed
    assert _tables_read(client, url)[0]


def test_a_second_read_with_nothing_written_runs_no_query(client, cohort):
    """Everything the home, cohort, entry, cohorts and competitor pages show is a page-cache hit
    when nothing was written in between: one cache read, no SQL at all."""
    entry = cohort.entries.order_by("pk").first()
    entry_url = f"/cohorts/{cohort.pk}/entries/{entry.competitor.slug}/"
    pages = ("/", f"/cohorts/{cohort.pk}/", f"/cohorts/{cohort.pk}/?range=1D", entry_url,
             "/cohorts/", "/competitors/cash/", "/competitors/cash/?scope=live")  # fmt: skip
    for url in pages:
        first_sql, first = _tables_read(client, url)
        assert first_sql  # the first read rendered it
        sql, again = _tables_read(client, url)
        assert sql == "" and again == first, url


def test_the_page_embeds_the_same_chart_json_the_api_serves(client, cohort):
    page = client.get(f"/cohorts/{cohort.pk}/?range=1D").content.decode()
    embedded = re.search(r'id="value-chart-data" type="application/json">(.*?)</script>', page)
    api = client.get(f"/api/cohorts/{cohort.pk}/series?range=1D")
    assert api["Content-Type"] == "application/json"
    assert api.content.decode() == embedded.group(1)
    data = json.loads(embedded.group(1))
    assert data["range"] == "1D" and data["entries"] and data["x"]


def test_a_transaction_reads_its_own_uncommitted_writes(client, cohort, settings):
    """Tokens are replaced when a write commits. Rendered pages read the rows, so a transaction
    sees what it wrote; a rolled-back write replaces nothing, so the cached page stands."""
    url = f"/cohorts/{cohort.pk}/"
    client.get(url)  # cached under the current tokens
    with transaction.atomic():
        take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
        settings.ARENA_PAGE_CACHE = False
        sql, _ = _tables_read(client, url)
        assert "cohorts_serieschunk" in sql  # computed afresh, from this transaction's rows
        settings.ARENA_PAGE_CACHE = True
        transaction.set_rollback(True)
    sql, _ = _tables_read(client, url)
    assert sql == ""  # the rolled-back write replaced nothing: the cached page stands


def test_a_tick_renders_the_competitor_page_again_and_a_data_write_the_cohort_list(client, cohort):
    for url in ("/competitors/cash/", "/cohorts/"):
        _tables_read(client, url)
    take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
    sql, _ = _tables_read(client, "/competitors/cash/")
    assert "cohorts_entry" in sql  # its entries' values moved
    assert _tables_read(client, "/cohorts/")[0] == ""  # no values on it: still cached
    compute_scores("live", as_of=SUNDAY + timedelta(minutes=10))  # a data write
    assert "scoring_leaderboardrow" in _tables_read(client, "/cohorts/")[0]


@pytest.mark.parametrize("cached", [True, False])
def test_page_parameters_are_parsed_once_and_handed_to_the_view(client, settings, cached):
    """`@page` declares each parameter once: the middleware parses it (for the key and the
    400), the view receives the parsed value as a keyword argument, and nothing parses it
    again, with the page cache on or off."""
    from web import pages

    settings.ARENA_PAGE_CACHE = cached
    calls = []
    spec = pages.market_list.page_spec
    original = dict(spec.params)

    def spy(name, param):
        def read(n, raw):
            calls.append(n)
            return param.read(n, raw)

        return type(param)(read, param.default, param.arg)

    object.__setattr__(spec, "params", tuple((n, spy(n, p)) for n, p in original.items()))
    try:
        response = client.get("/markets/?q=honest&status=open&page=1&utm_source=x")
    finally:
        object.__setattr__(spec, "params", tuple(original.items()))
    assert response.status_code == 200
    assert sorted(calls) == ["page", "q", "status"]  # each once
    context = response.context
    assert (context["q"], context["status"], context["page"].number) == ("honest", "open", 1)


def test_a_view_called_without_the_middleware_parses_its_parameters(db):
    from web import pages
    from web.params import BadParameter

    request = RequestFactory().get("/markets/?status=open&page=1")
    request.htmx = False
    response = pages.market_list(request)
    assert response.status_code == 200
    with pytest.raises(BadParameter, match="status must be one of"):
        pages.market_list(RequestFactory().get("/markets/?status=nope"))


def test_a_parameter_at_its_default_is_the_same_page(client, cohort):
    assert client.get("/markets/")["X-Cache"] == "miss"
    assert client.get("/markets/?page=1&status=&q=")["X-Cache"] == "hit"
    assert client.get(f"/cohorts/{cohort.pk}/")["X-Cache"] == "miss"
    assert client.get(f"/cohorts/{cohort.pk}/?range=all")["X-Cache"] == "hit"
    assert client.get("/api/markets?limit=50&offset=0")["X-Cache"] == "miss"
    assert client.get("/api/markets")["X-Cache"] == "hit"
