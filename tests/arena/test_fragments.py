"""With the page cache off, what a page shows is kept per version: what changes only with data
writes per data version, the values (charts, entry tables) per data and values version. A
snapshot tick renders the values again but reuses the rest; a data write renders everything."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Competitor
from cohorts.services import BetOrder, execute_orders, open_cohort
from cohorts.snapshots import take_snapshot
from core.versions import memo
from scoring.services import compute_scores
from tests.factories import make_market

pytestmark = pytest.mark.django_db(transaction=True)
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)


@pytest.fixture(autouse=True)
def page_cache_off(settings):
    settings.ARENA_PAGE_CACHE = False
    cache.clear()


def _tables_read(client, url: str) -> str:
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
    market = make_market(question="Will the fragment stay honest?")
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("100"))], [], None, at=SUNDAY)
    take_snapshot(at=SUNDAY, cohorts=[cohort])
    compute_scores("live", as_of=SUNDAY)
    return cohort


def test_a_tick_renders_values_again_but_not_the_leaderboard(client, cohort):
    _tables_read(client, "/")  # fills the fragments
    take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
    sql, page = _tables_read(client, "/")
    assert "scoring_leaderboardrow" not in sql  # the table came from its fragment
    assert "cohorts_scopeserieschunk" in sql  # the chart was read afresh
    assert charts_end(page) == "2026-11-15 00:10"
    compute_scores("live", as_of=SUNDAY + timedelta(minutes=10))  # a data write
    sql, page = _tables_read(client, "/")
    assert "scoring_leaderboardrow" in sql
    assert "00:10 UTC" in page  # the run's clock in the table's meta line


def test_a_cohort_page_keeps_decisions_and_universe_through_ticks(client, cohort):
    url = f"/cohorts/{cohort.pk}/"
    _tables_read(client, url)
    take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
    sql, page = _tables_read(client, url)
    assert "agents_decision" not in sql and "cohorts_universe" not in sql
    assert "cohorts_serieschunk" in sql and "$10,000.00" in page


def test_memo_computes_once_per_data_version():
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    assert memo("t", compute) == {"n": 1}
    assert memo("t", compute) == {"n": 1}
    Competitor.objects.create(slug="x", display_name="X", kind="baseline", strategy="cash")
    open_cohort(SUNDAY, at=SUNDAY)  # a service write: replaces the data token on commit
    assert memo("t", compute) == {"n": 2}


def charts_end(page: str) -> str:
    import json
    import re

    data = re.search(r'id="overview-data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(data.group(1))["x"][-1]


def test_a_second_read_with_nothing_written_runs_no_query(client, cohort):
    """Everything the home, cohort, entry, cohorts and competitor pages show is kept per
    version: with nothing written in between, reading them again is cache reads and a
    template, no SQL at all."""
    entry = cohort.entries.order_by("pk").first()
    entry_url = f"/cohorts/{cohort.pk}/entries/{entry.competitor.slug}/"
    pages = ("/", f"/cohorts/{cohort.pk}/", f"/cohorts/{cohort.pk}/?range=1D", entry_url,
             "/cohorts/", "/competitors/cash/", "/competitors/cash/?scope=live")  # fmt: skip
    for url in pages:
        first_sql, first = _tables_read(client, url)
        assert first_sql  # the first read computed what it keeps
        sql, again = _tables_read(client, url)
        assert sql == "" and again == first, url


def test_the_page_embeds_the_same_chart_json_the_api_serves(client, cohort):
    import json
    import re

    page = client.get(f"/cohorts/{cohort.pk}/?range=1D").content.decode()
    embedded = re.search(r'id="value-chart-data" type="application/json">(.*?)</script>', page)
    api = client.get(f"/api/cohorts/{cohort.pk}/series?range=1D")
    assert api["Content-Type"] == "application/json"
    assert api.content.decode() == embedded.group(1)
    data = json.loads(embedded.group(1))
    assert data["range"] == "1D" and data["entries"] and data["x"]


def test_a_transaction_reads_its_own_uncommitted_writes(client, cohort):
    """Tokens are replaced when a write commits; until then the writing transaction itself
    neither reads nor stores kept values, so it sees what it wrote."""
    from django.db import transaction

    url = f"/cohorts/{cohort.pk}/"
    client.get(url)  # kept under the current tokens
    with transaction.atomic():
        take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
        sql, _ = _tables_read(client, url)
        assert "cohorts_serieschunk" in sql  # computed afresh, not the kept chart
        assert memo("t", lambda: "fresh") == "fresh"
        assert memo("t", lambda: "again") == "again"  # and nothing was stored
        transaction.set_rollback(True)
    sql, _ = _tables_read(client, url)
    assert sql == ""  # the rolled-back write replaced nothing: the kept page stands


def test_a_tick_recomputes_the_competitor_page_and_a_data_write_the_cohort_list(client, cohort):
    for url in ("/competitors/cash/", "/cohorts/"):
        _tables_read(client, url)
    take_snapshot(at=SUNDAY + timedelta(minutes=10), cohorts=[cohort])
    sql, _ = _tables_read(client, "/competitors/cash/")
    assert "cohorts_entry" in sql  # its entries' values moved
    assert _tables_read(client, "/cohorts/")[0] == ""  # no values on it: still kept
    compute_scores("live", as_of=SUNDAY + timedelta(minutes=10))  # a data write
    assert "scoring_leaderboardrow" in _tables_read(client, "/cohorts/")[0]
