"""Every page type in a real browser at desktop (1400 px) and phone (390 px) width.

Data: the offline demo, a ForecastBench replay of the small fixture sets (sparse snapshots, a
market quoted once: the charts that used to come out blank) and a staff correction (a demo
market reopened in the admin's service). On every page: no console error, no page wider than
the screen, the key tables readable without sideways scrolling, every chart whose data (the
JSON API) has values actually drawn with lines; with ARENA_TEST_SCREENSHOTS=1, a screenshot in
test-artifacts/ named <page>-<width>.png for review.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from agents.models import Competitor
from agents.services import ensure_default_lineup
from cohorts.models import Cohort, Decision, Entry, Settlement
from markets.models import Market
from markets.services import set_resolution
from tests import demo_snapshot
from tests.site.test_browser import DEMO_NOW, Visitor

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

REPLAY_FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures"
WIDTHS = (1400, 390)


@pytest.fixture
def site(transactional_db, settings):
    """Demo + replay + one staff correction; returns the ids the pages need."""
    from simulations.replay import replay

    settings.ARENA_LLM_API_KEY = ""  # LLM entries are skipped (no key): they stay unscored
    demo_snapshot.demo(weeks=2, n_markets=40, now=DEMO_NOW)
    ensure_default_lineup()
    replay(str(REPLAY_FIXTURES), [date(2026, 1, 4)])
    won = (
        Settlement.objects.filter(
            kind=Settlement.Kind.WON,
            reversed_at__isnull=True,
            position__entry__cohort__kind=Cohort.Kind.DEMO,
        )
        .select_related("market", "position__entry")
        .order_by("pk")
        .first()
    )
    assert won is not None, "the demo should settle a winning position"
    set_resolution(won.market, status=Market.Status.OPEN, reason="Disputed <b>source</b>")
    demo_cohort = won.position.entry.cohort
    replay_cohort = Cohort.objects.get(kind=Cohort.Kind.REPLAY)
    replay_market = (
        Market.objects.filter(source=Market.Source.FORECASTBENCH, prices__isnull=False)
        .distinct()
        .order_by("pk")
        .first()
    )
    baseline = Decision.objects.filter(
        entry__competitor__kind=Competitor.Kind.BASELINE, entry__cohort=demo_cohort
    ).first()
    skipped = Decision.objects.filter(
        entry__competitor__kind=Competitor.Kind.LLM, entry__cohort=replay_cohort
    ).first()
    entry = Entry.objects.select_related("competitor").get(pk=won.position.entry_id)
    return {
        "home-demo": "/?scope=demo",
        "home-replay": "/?scope=replay",
        "cohorts": "/cohorts/",
        "cohort-demo": f"/cohorts/{demo_cohort.pk}/",
        "cohort-replay": f"/cohorts/{replay_cohort.pk}/",
        "entry": f"/cohorts/{demo_cohort.pk}/entries/{entry.competitor.slug}/",
        "competitors": "/competitors/",
        "competitor": f"/competitors/{entry.competitor.slug}/?scope=demo",
        "markets": "/markets/",
        "market-corrected": f"/markets/{won.market_id}/",
        "market-replay": f"/markets/{replay_market.pk}/",
        "decision-baseline": f"/decisions/{baseline.pk}/",
        "decision-skipped": f"/decisions/{skipped.pk}/" if skipped else "/methodology/",
        "methodology": "/methodology/",
        "about": "/about/",
    }


# The JSON each chart is drawn from, to know whether the chart must show lines.
CHART_SOURCES = {
    "#overview-plot": lambda page: page.locator("#overview-data"),
    "#value-chart-plot": lambda page: page.locator("#value-chart-data"),
    "#equity-chart-plot": lambda page: page.locator("#equity-chart-data"),
    "#price-plot": lambda page: page.locator("#price-data"),
}


def _values_in(data: dict) -> int:
    lines = data.get("entries") or data.get("series") or data.get("lines") or []
    return sum(1 for line in lines for y in line.get("y", []) if y is not None)


def _check_charts(v: Visitor, name: str) -> int:
    page = v.page
    drawn = 0
    for selector, source in CHART_SOURCES.items():
        if not page.locator(selector).count():
            continue
        data = json.loads(source(page).text_content())
        api = page.locator(selector).get_attribute("data-series-url")
        if api:  # the API the range buttons use says the same
            sep = "&" if "?" in api else "?"
            fetched = page.request.get(v.base + api + sep + "range=" + data.get("range", "ALL"))
            assert fetched.ok, api
            assert _values_in(fetched.json()) == _values_in(data), (name, api)
        if _values_in(data) == 0:
            continue
        v.wait_drawn(selector)
        # Drawn = a line that spans some width. Not the length of its path text: a flat line is
        # "M0,150L356,150", under 20 characters at phone width, and a replay whose seeded
        # baselines (seeds follow the database's ids) happen not to move draws only flat lines.
        widths = page.locator(f"{selector} .scatterlayer path.js-line").evaluate_all(
            "paths => paths.map(p => p.getBBox().width)"
        )
        assert any(w > 10 for w in widths), (
            f"{name}: {selector} has data but drew no line (line widths {widths})"
        )
        assert int(page.locator(selector).get_attribute("data-points")) > 0
        drawn += 1
    return drawn


def _check_layout(v: Visitor, name: str, width: int) -> None:
    page = v.page
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name} at {width}px is {overflow}px wider than the screen"
    # Key tables (class stack) fit: no sideways scrolling to reach a figure.
    wide = page.evaluate(
        "Array.from(document.querySelectorAll('table.stack')).filter("
        "t => t.scrollWidth > t.parentElement.clientWidth + 1).length"
    )
    assert wide == 0, f"{name} at {width}px: a key table scrolls sideways"


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_type(browser, live_server, site, width):
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 900})
    try:
        charts = {}
        for name, path in site.items():
            v.go(path)
            charts[name] = _check_charts(v, name)
            _check_layout(v, name, width)
            v.shot(f"{name}-{width}")
            assert v.errors == [], (name, v.errors)
        for name in ("home-demo", "home-replay", "cohort-demo", "cohort-replay", "entry"):
            assert charts[name] == 1, name
        assert charts["market-replay"] == 1  # a market quoted once still draws its price
    finally:
        v.close()


def test_pages_state_what_they_mean(browser, live_server, site):
    """What the pages say, read in the browser: tiers, unscored apart, the simulated clock,
    the glossary links, the correction on the chart and in the list, no model on a baseline."""
    v = Visitor(browser, live_server.url, viewport={"width": 1400, "height": 900})
    try:
        page = v.go(site["home-replay"])
        assert "simulated clock" in page.locator("p.meta").inner_text()
        unscored = page.locator(".unscored-list li")
        assert unscored.count() >= 1  # the LLMs without a key
        ranked = page.locator("table.leaderboard tbody tr")
        assert "—" not in page.locator("table.leaderboard td.rank").all_inner_texts()
        # Everyone entered in the replay is listed once, ranked or apart; a plain replay has
        # no simulated competitors (they answer only `replay-forecastbench --simulated`).
        entered = Competitor.objects.filter(entries__cohort__kind="replay").distinct()
        assert not entered.filter(simulated=True).exists()
        assert ranked.count() + unscored.count() == entered.count() >= 12
        # Every technical header links to its glossary entry, and the entry exists.
        href = page.locator("table.leaderboard th a.term").first.get_attribute("href")
        page = v.go(href)
        assert page.locator(href[href.index("#") :]).count() == 1

        page = v.go(site["cohort-demo"])
        v.wait_drawn("#value-chart-plot")
        assert page.locator(".corrections li").count() == 1
        assert "<b>" in page.locator(".corrections li").inner_text()  # shown as text
        assert page.locator("a.corrected").count() >= 1
        assert int(page.locator("#value-chart-plot").get_attribute("data-annotations")) >= 1
        assert page.locator("#value-chart-plot .annotation-text", has_text="staff").count() >= 1

        page = v.go(site["decision-baseline"])
        facts = page.locator("dl.facts").inner_text()
        assert "No model was called" in facts and "Latency" not in facts
        assert "vv" not in facts
        assert v.errors == []
    finally:
        v.close()
