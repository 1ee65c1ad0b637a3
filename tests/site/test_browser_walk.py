"""Issue 27's walk: every page type, public and staff, at 1,400 and 390 px on the demo and a
small replay (the `site` data of test_browser_pages.py), with what a machine can check:

- no number printed wider than 15 digits (an 80-digit "take" was);
- the market page bounded in height even for the demo's most forecast market;
- no page wider than a 390 px screen;
- no two chart labels on top of each other (events at one instant share one label);
- the admin index links the attention page, and the resolution-changes list shows from / to /
  reason without sideways scrolling at 1,400 px.

Screenshots: test-artifacts/walk-<page>-<width>.png.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.test import Client

from cohorts.models import Decision
from markets.models import Market
from tests.site.test_browser import Visitor
from tests.site.test_browser_pages import _check_charts, _check_layout, site  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

WIDTHS = (1400, 390)
MAX_DIGITS = 15
# A market page with a page of forecasts, the largest holders, the chart and the rules.
MARKET_PAGE_MAX_PX = {1400: 6000, 390: 14000}
# Digits of one number: runs of digits with their thousands separators and decimal point.
NUMBER = re.compile(r"\d(?:[\d,.\u2009\u202f]*\d)?")

VISIBLE_TEXT = """() => {
  const skip = new Set(['CODE', 'PRE', 'SCRIPT', 'STYLE', 'KBD', 'SAMP']);
  const out = [];
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { out.push(node.textContent); return; }
    if (node.nodeType !== Node.ELEMENT_NODE || skip.has(node.tagName)) { return; }
    if (node.closest('details:not([open]) > :not(summary)')) { return; }
    node.childNodes.forEach(walk);
  };
  walk(document.body);
  return out.join(' ');
}"""


def widest_number(text: str) -> tuple[int, str]:
    widest = (0, "")
    for match in NUMBER.finditer(text):
        digits = sum(ch.isdigit() for ch in match.group())
        if digits > widest[0]:
            widest = (digits, match.group())
    return widest


def test_widest_number_reads_digits_not_separators():
    assert widest_number("Take 1,234,567.89 and 12 and 2026-11-11") == (9, "1,234,567.89")
    assert widest_number("x" + "7" * 80)[0] == 80


@pytest.fixture
def staff_cookie(live_server):
    user = get_user_model().objects.create_user(
        "walker", password="pw-walk-123", is_staff=True, is_superuser=True
    )
    client = Client()
    client.force_login(user)
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}


def _pages(site) -> dict[str, str]:  # noqa: F811
    busiest = (
        Market.objects.filter(source=Market.Source.DEMO)
        .annotate(n=Count("forecasts"))
        .order_by("-n", "pk")
        .first()
    )
    assert busiest is not None and busiest.n > 20, "the demo should have a much forecast market"
    multi = Market.objects.filter(source=Market.Source.DEMO, kind=Market.Kind.MULTI).first()
    pages = dict(site)
    pages["market-busiest"] = f"/markets/{busiest.pk}/"
    if multi is not None:
        pages["market-multi"] = f"/markets/{multi.pk}/"
    return pages


def _staff_pages() -> dict[str, str]:
    market = Market.objects.filter(resolution_changes__source="admin").first()
    assert market is not None
    decision = Decision.objects.order_by("pk").first()
    return {
        "admin-index": "/admin/",
        "admin-attention": "/admin/attention/",
        "admin-market": f"/admin/markets/market/{market.pk}/change/",
        "admin-correct": f"/admin/markets/market/{market.pk}/correct/resolve_to_outcome/",
        "admin-resolution-changes": "/admin/markets/resolutionchange/",
        "admin-decision": f"/admin/cohorts/decision/{decision.pk}/change/",
    }


# Chart labels (cohort events, corrections) whose boxes overlap: a pile-up a reader cannot read.
OVERLAPPING_LABELS = """() => {
  let piled = 0;
  document.querySelectorAll('.chart').forEach((chart) => {
    const boxes = Array.from(chart.querySelectorAll('g.annotation'))
      .map((a) => a.getBoundingClientRect()).filter((r) => r.width > 0);
    boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => {
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 2 && h > 2) { piled += 1; }
    }));
  });
  return piled;
}"""


def _check_labels(v: Visitor, name: str) -> None:
    _check_charts(v, name)  # waits until every chart with data is drawn
    assert v.page.evaluate(OVERLAPPING_LABELS) == 0, f"{name}: chart labels overlap"


def _check_numbers(v: Visitor, name: str) -> None:
    text = v.page.evaluate(VISIBLE_TEXT)
    digits, number = widest_number(text)
    # The words around it say which field printed it (a rare failure was seen without them).
    at = text.find(number)
    around = " ".join(text[max(at - 160, 0) : at + len(number) + 80].split())
    assert digits <= MAX_DIGITS, (
        f"{name}: a number {digits} digits wide: {number[:40]} in «{around}»"
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_walk_every_page_type(browser, live_server, site, staff_cookie, width):  # noqa: F811
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 900})
    try:
        for name, path in _pages(site).items():
            v.go(path)
            _check_numbers(v, name)
            _check_layout(v, name, width)
            _check_labels(v, name)
            if name.startswith("market-"):
                height = v.page.evaluate("document.documentElement.scrollHeight")
                assert height <= MARKET_PAGE_MAX_PX[width], f"{name} is {height}px tall"
            v.shot(f"walk-{name}-{width}")
            assert v.errors == [], (name, v.errors)

        v.context.add_cookies([staff_cookie])
        # The admin's pages name no icon, so the browser asks for /favicon.ico: not our page.
        v.context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        for name, path in _staff_pages().items():
            page = v.go(path)
            _check_numbers(v, name)
            v.shot(f"walk-{name}-{width}")
            if name == "admin-index":
                link = page.locator("#attention-summary a[href='/admin/attention/']")
                assert link.count() == 1 and "Needs attention" in link.inner_text()
            if name == "admin-market":
                assert page.locator("a.correction-link").count() == 3
                assert page.locator("a.deletelink").count() == 0
            if name == "admin-correct":
                assert "Impact:" in page.locator("#content").inner_text()
            if name == "admin-resolution-changes" and width == 1400:
                overflow = page.evaluate(
                    "(() => { const t = document.querySelector('#result_list');"
                    " return t ? t.scrollWidth - t.parentElement.clientWidth : 0; })()"
                )
                assert overflow <= 1, f"resolution changes scroll sideways by {overflow}px"
                headers = page.locator("#result_list thead").inner_text().lower()
                assert "from → to" in headers and "reason" in headers
        assert v.errors == [], v.errors
    finally:
        v.close()
