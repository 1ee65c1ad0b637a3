"""Browser tests: Playwright (python) driving chromium against the live test server.

The browser is Debian's chromium, or Playwright's own download where there is none (the
`browser` fixture in conftest.py finds it; `./run test` installs one of them).

The data is the offline demo (`simulations.demo.run_demo`), the same thing `arena demo` builds.
Each test loads pages, interacts like a visitor (sort, range buttons, <details>) and fails on
any console error (CSP violations included). With ARENA_TEST_SCREENSHOTS=1 the browser tests save
a full-page screenshot of each page they check under test-artifacts/, for a person reviewing the
layouts; without it they take none: full-page captures of long pages are half of Chromium's
CPU in these tests (the walk: 25.8 CPU-s with them, 13.1 without).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cohorts.models import Cohort, Decision, Entry
from markets.models import Market
from tests import demo_snapshot

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCREENSHOTS = os.environ.get("ARENA_TEST_SCREENSHOTS") == "1"
# A Wednesday noon: the demo clock stops here, so the current week has 2.5 days of snapshots.
DEMO_NOW = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

# Playwright's sync API runs an event loop in this thread; the ORM calls made by fixtures here
# are ordinary synchronous calls, so Django's async-safety guard does not apply.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def demo_data(transactional_db):
    demo_snapshot.demo(weeks=2, n_markets=40, now=DEMO_NOW)
    return Cohort.objects.filter(kind=Cohort.Kind.DEMO).order_by("week_start")


def screenshot(page, name: str) -> None:
    """test-artifacts/<name>.png, the whole page, when ARENA_TEST_SCREENSHOTS=1."""
    if SCREENSHOTS:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


class Visitor:
    """A browser page that records console errors and takes named screenshots."""

    def __init__(self, browser, base_url: str, viewport=None):
        self.context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.base = base_url
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "response",
            lambda r: self.errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None,
        )

    def go(self, path: str):
        response = self.page.goto(self.base + path)
        assert response is not None and response.status == 200, path
        return self.page

    def shot(self, name: str) -> None:
        screenshot(self.page, name)

    def wait_drawn(self, selector: str, times: int = 1) -> None:
        self.page.wait_for_function(
            "([sel, n]) => { const el = document.querySelector(sel);"
            " return el && Number(el.dataset.drawn || 0) >= n && el.querySelector('.main-svg'); }",
            arg=[selector, times],
            timeout=15000,
        )

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visitor(browser, live_server):
    v = Visitor(browser, live_server.url)
    yield v
    v.close()


def test_leaderboard_chart_and_sorting(visitor, demo_data):
    page = visitor.go("/?scope=demo")
    assert page.locator("h1 .badge-demo").is_visible()
    visitor.wait_drawn("#overview-plot")
    first_before = page.locator("table.leaderboard tbody tr th a").first.inner_text()
    visitor.shot("leaderboard")

    # Sort by return, best first; htmx swaps only the table and pushes the URL.
    page.locator("th a.sort", has_text="Return").click()
    page.wait_for_url("**sort=return**")
    page.wait_for_selector('th[aria-sort="descending"] >> text=Return')
    returns = page.locator("table.leaderboard tbody tr td:nth-child(6)").all_inner_texts()
    values = [
        float(t.split("%")[0].replace(",", "").replace("\u2212", "-").replace("\u2060", ""))
        for t in returns
        if t.strip()[0] != "—"
    ]
    assert values == sorted(values, reverse=True)
    # Clicking again flips the order.
    page.locator("th a.sort", has_text="Return").click()
    page.wait_for_selector('th[aria-sort="ascending"] >> text=Return')
    assert (
        page.locator("#overview-plot .main-svg").count() >= 1
    )  # the chart was not re-rendered away
    visitor.shot("leaderboard-sorted")
    assert first_before
    assert visitor.errors == []


def test_cohort_chart_range_buttons(visitor, demo_data):
    cohort = demo_data.last()
    page = visitor.go(f"/cohorts/{cohort.pk}/")
    assert page.locator("h1 .badge-demo").is_visible()
    visitor.wait_drawn("#value-chart-plot")
    all_points = int(page.locator("#value-chart-plot").get_attribute("data-points"))
    visitor.shot("cohort-all")

    page.locator('.range-btn[data-range="1H"]').click()
    visitor.wait_drawn("#value-chart-plot", times=2)
    plot = page.locator("#value-chart-plot")
    assert plot.get_attribute("data-range") == "1H"
    assert int(plot.get_attribute("data-points")) < all_points
    assert page.locator('.range-btn[data-range="1H"]').get_attribute("aria-current") == "true"
    assert page.locator('.range-btn[data-range="ALL"]').get_attribute("aria-current") is None
    visitor.shot("cohort-1h")

    page.locator('.range-btn[data-range="1D"]').focus()
    page.keyboard.press("Enter")  # keyboard-usable
    visitor.wait_drawn("#value-chart-plot", times=3)
    assert plot.get_attribute("data-range") == "1D"
    assert visitor.errors == []


def test_entry_competitor_market_pages(visitor, demo_data):
    entry = Entry.objects.filter(cohort__in=demo_data).select_related("competitor").first()
    page = visitor.go(f"/cohorts/{entry.cohort_id}/entries/{entry.competitor.slug}/")
    visitor.wait_drawn("#equity-chart-plot")
    page.locator('.range-btn[data-range="1W"]').click()
    visitor.wait_drawn("#equity-chart-plot", times=2)
    visitor.shot("entry")

    page = visitor.go(f"/competitors/{entry.competitor.slug}/?scope=demo")
    assert page.locator("h1").inner_text().startswith(entry.competitor.display_name)
    if page.locator("#reliability-plot").count():
        visitor.wait_drawn("#reliability-plot")
    visitor.shot("competitor")

    visitor.go("/markets/")
    page.fill("#market-q", "zzzz-no-such-market")
    page.wait_for_selector("#market-results >> text=No market matches")
    visitor.shot("markets-search")

    market = Market.objects.filter(prices__isnull=False).first()
    visitor.go(f"/markets/{market.pk}/")
    visitor.wait_drawn("#price-plot")
    visitor.shot("market")

    for path in ("/cohorts/", "/competitors/", "/methodology/"):
        visitor.go(path)
    assert visitor.errors == []


def test_exports_page_from_the_footer_downloads_the_demo(visitor, demo_data):
    page = visitor.go("/")
    page.locator("footer a", has_text="Exports").click()
    page.wait_for_url("**/exports/")
    assert page.locator("h1").inner_text() == "Exports"
    visitor.shot("exports")
    item = page.locator("section[aria-labelledby=export-trades-h]")
    link = item.locator("li", has_text="demo only").locator("a", has_text="JSON")
    with page.expect_download() as download:
        link.click()
    doc = json.loads(Path(download.value.path()).read_text())
    assert doc["scope"] == "demo" and doc["rows"] and "note" not in doc
    assert {row["cohort_kind"] for row in doc["rows"]} == {"demo"}
    assert visitor.errors == []


def test_decision_raw_response_opens(visitor, demo_data):
    decision = Decision.objects.filter(llm_calls__isnull=False).first()
    assert decision is not None, "the demo should record model calls"
    page = visitor.go(f"/decisions/{decision.pk}/")
    raw = page.locator("details.raw-response").first
    assert raw.get_attribute("open") is None
    assert not raw.locator("pre").is_visible()
    raw.locator("summary").click()
    assert raw.get_attribute("open") is not None
    assert raw.locator("pre").is_visible()
    visitor.shot("decision")
    assert visitor.errors == []


def test_pages_read_without_javascript_on_a_phone(browser, live_server, demo_data):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844})
    page = context.new_page()
    cohort = demo_data.last()
    page.goto(f"{live_server.url}/?scope=demo&sort=brier")
    assert page.locator("table.leaderboard tbody tr").count() > 0
    page.goto(f"{live_server.url}/cohorts/{cohort.pk}/")
    page.locator('.range-btn[data-range="1D"]').click()  # a plain link without JS
    page.wait_for_url("**range=1D**")
    assert page.locator('.range-btn[data-range="1D"]').get_attribute("aria-current") == "true"
    screenshot(page, "cohort-phone-nojs")
    context.close()
