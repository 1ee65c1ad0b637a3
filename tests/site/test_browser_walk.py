"""Issue 27's walk: every page type, public and staff, at 1,400 and 390 px on the demo and a
small replay (the `site` data of test_browser_pages.py), with what a machine can check:

- no number printed wider than 15 digits (an 80-digit "take" was);
- the market page bounded in height even for the demo's most forecast market;
- no page wider than a 390 px screen;
- no two chart labels on top of each other (events at one instant share one label);
- the admin index links the attention page, and the resolution-changes list shows from / to /
  reason without sideways scrolling at 1,400 px.

Issue 38's part of the walk, on the same pages and more:

- no figure in scientific notation and no negative zero a visitor reads;
- no word broken inside itself in a label, a header or a badge, and no caption one word wide;
- a decision followed to its score: each question's outcome, Brier and the market's Brier, each
  trade's settlement, payout and P/L, with links decision -> market -> its trades -> decision
  and entry; a simulated competitor's release names the in-process simulated endpoint, and is
  dated no later than the first cohort that ran it;
- forced and chosen HOLDs told apart, and links that name the decision (never a bare "Done");
- the demo's fixed anchor on its home page; the phone cards keep the glossary links;
- the live page saying why markets are missing while the sync fails;
- the admin lists printing costs as the site does (never "0.0000000000").

Screenshots (with ARENA_TEST_SCREENSHOTS=1): test-artifacts/walk-<page>-<width>.png.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.test import Client
from playwright.sync_api import expect

from cohorts.models import Decision, Settlement, Trade
from core import clock
from core.models import JobRun
from markets.models import Market
from tests.site.test_browser import Visitor
from tests.site.test_browser_pages import _check_charts, _check_layout, site  # noqa: F401  (the fixture)
from web.visitor_reads import TRADES_PER_PAGE

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
    scored = _scored_decision()
    pages["decision-scored"] = f"/decisions/{scored.pk}/"
    pages["competitor-simulated"] = f"/competitors/{scored.entry.competitor.slug}/?scope=demo"
    pages["home-live"] = "/?scope=live"
    for kind, decision in _holds().items():
        pages[f"decision-{kind}-hold"] = f"/decisions/{decision.pk}/"
    return pages


def _scored_decision() -> Decision:
    """A simulated competitor's decision with a forecast on a resolved market and a buy whose
    position has settled."""
    settled = Settlement.objects.filter(
        reversed_at__isnull=True, position__entry__competitor__simulated=True
    ).values("position_id")
    decision = (
        Decision.objects.filter(
            trades__position_id__in=settled,
            forecasts__market__status=Market.Status.RESOLVED,
        )
        .select_related("entry__competitor")
        .order_by("pk")
        .first()
    )
    assert decision is not None, "the demo should settle a simulated competitor's trade"
    return decision


def _holds() -> dict[str, Decision]:
    """A forced HOLD (the answer could not be used) and a chosen one, when the demo has them."""
    holds = Decision.objects.filter(action=Decision.Action.HOLD).order_by("pk")
    found = {
        "forced": holds.exclude(hold_reason="").first(),
        "chosen": holds.filter(hold_reason="").first(),
    }
    assert any(found.values()), "the demo should hold at least once"
    return {kind: d for kind, d in found.items() if d is not None}


def _staff_pages() -> dict[str, str]:
    market = Market.objects.filter(resolution_changes__source="admin").first()
    assert market is not None
    decision = Decision.objects.order_by("pk").first()
    return {
        "admin-decisions": "/admin/cohorts/decision/",
        "admin-calls": "/admin/cohorts/llmcall/",
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


# A figure in scientific notation (1.43 × 10⁸¹, 5e-05) or a negative zero (−0.000, −$0.00).
SCIENTIFIC = re.compile(r"\d\s?×\s?10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]|\d[eE][+-]?\d")
NEGATIVE_ZERO = re.compile(r"(?<![\w.])[-\u2212]\u2060?\$?0(?:\.0+)?(?![\d.,])")


def _check_number_forms(v: Visitor, name: str) -> None:
    text = v.page.evaluate(VISIBLE_TEXT)
    checks = [(SCIENTIFIC, "scientific notation"), (NEGATIVE_ZERO, "negative zero")]
    if name == "methodology":
        # It quotes the frozen, hashed methodology text, constants as written (1e-13): a
        # specification, not a figure of the arena's.
        checks = checks[1:]
    for pattern, what in checks:
        found = pattern.search(text)
        around = text[max(found.start() - 80, 0) : found.end() + 40] if found else ""
        assert found is None, f"{name}: {what} «{' '.join(around.split())}»"


# Words split across two lines inside a label, a header, a badge or a caption ("Recor d hash"),
# and captions squeezed to one word per line.
BROKEN_WORDS = r"""() => {
  const broken = [];
  const sel = 'dt, thead th, table.seal th, .badge, caption, figcaption';
  document.querySelectorAll(sel).forEach((el) => {
    if (!el.getClientRects().length || el.closest('.sr-only')) { return; }
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode())) {
      const re = /[^\s-]+/g;  // a hyphenated word may break after its hyphen
      let m;
      while ((m = re.exec(node.textContent))) {
        const r = document.createRange();
        r.setStart(node, m.index);
        r.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(r.getClientRects()).filter((x) => x.width > 0)
          .map((x) => Math.round(x.top)));
        if (tops.size > 1) { broken.push(m[0]); }
      }
    }
    if (el.matches('.badge') && new Set(Array.from(el.getClientRects())
        .map((x) => Math.round(x.top))).size > 1) { broken.push('badge: ' + el.textContent); }
    if (el.matches('caption, figcaption') && el.textContent.trim().split(/\s+/).length > 4
        && el.getBoundingClientRect().width < 160) { broken.push('narrow caption: ' + el.textContent); }
  });
  return broken;
}"""


def _check_words(v: Visitor, name: str, width: int) -> None:
    broken = v.page.evaluate(BROKEN_WORDS)
    assert broken == [], f"{name} at {width}px breaks inside: {broken[:5]}"


def _check_decision_to_score(v: Visitor, width: int) -> None:
    """The scored decision's page, then its market, then back through the market's trades."""
    page = v.page
    decision = _scored_decision()

    def cells(table: str, label: str) -> list[str]:
        found = page.locator(f'{table} tbody td[data-label="{label}"]')
        return [" ".join(found.nth(i).inner_text().split()) for i in range(found.count())]

    # A resolved question: its outcome, its Brier and the market's, at three places.
    pairs = list(
        zip(cells("#decision-forecasts", "Brier"), cells("#decision-forecasts", "Market's Brier"))
    )
    assert any(re.fullmatch(r"\d\.\d{3}", a) and re.fullmatch(r"\d\.\d{3}", b) for a, b in pairs)
    assert any(o not in ("", "not yet") for o in cells("#decision-forecasts", "Resolved"))
    # A settled trade: its settlement, its payout and its P/L in dollars and cents.
    settled = [
        (kind, pay, pnl)
        for kind, pay, pnl in zip(
            cells("#decision-trades", "Settlement"),
            cells("#decision-trades", "Payout"),
            cells("#decision-trades", "P/L"),
        )
        if re.match(r"(Won|Lost|Void)", kind)
    ]
    assert settled
    money = r"[\u2212]?\u2060?\$[\d,]+\.\d\d"
    assert any(re.match(money, pay) and re.match(money, pnl) for _, pay, pnl in settled), settled
    release = page.locator("dt:text-is('Release') + dd").inner_text()
    assert "simulated endpoint" in release and "openrouter" not in release.lower(), release
    # decision -> market -> the market's trades (on the page that holds this decision's) ->
    # back to the decision and its entry
    v.shot(f"walk-decision-scored-page-{width}")
    link = page.locator("#decision-trades tbody tr a[href^='/markets/']").first
    href = link.get_attribute("href") or ""
    link.click()
    page.wait_for_load_state()
    assert page.url.split("#")[0].endswith(href) and page.locator("#market-trades").count() == 1
    trade = decision.trades.order_by("pk").first()
    assert trade is not None
    newer = Trade.objects.filter(position__market_id=trade.position.market_id).filter(
        Q(executed_at__gt=trade.executed_at) | Q(executed_at=trade.executed_at, pk__gt=trade.pk)
    )
    v.go(f"{href}?trades={newer.count() // TRADES_PER_PAGE + 1}#trades-h")
    assert page.locator(f"#market-trades a[href='/decisions/{decision.pk}/']").count() >= 1
    entry = f"/cohorts/{decision.entry.cohort_id}/entries/{decision.entry.competitor.slug}/"
    assert page.locator(f"#market-trades a[href^='{entry}']").count() >= 1
    assert page.locator("#forecasts-h ~ div a[href*='/entries/']").count() >= 1


def _check_page(v: Visitor, name: str, width: int) -> None:
    """What issue 38 asks of a page beyond the numbers and layout every page gets."""
    page = v.page
    text = " ".join(page.locator("main").inner_text().split())
    if name == "home-demo":
        anchor = page.locator("#demo-anchor")
        assert anchor.count() == 1 and "fixed anchor" in anchor.inner_text()
        if width == 390:  # the cards have no header row: the glossary links sit below them
            terms = page.locator("#leaderboard-terms a[href*='/methodology/#']")
            assert terms.count() >= 3 and page.locator("#leaderboard-terms").is_visible()
    if name == "home-live":
        status = page.locator("#sync-status").inner_text()
        assert "failed 2 times" in status and "HTTP 503 from gamma" in status, status
    if name == "decision-scored":
        _check_decision_to_score(v, width)
    if name == "competitor-simulated":
        first = page.locator("#releases-h ~ div tbody tr").first
        since = first.locator("td[data-label='Since']").inner_text()[:10]
        cohorts = [a.inner_text() for a in first.locator("td[data-label='Cohorts'] a").all()]
        assert cohorts and since <= min(cohorts), (since, cohorts)
        assert "simulated endpoint" in first.inner_text()
    if name == "decision-forced-hold":
        assert page.locator("#forced-hold").count() == 1 and "forced HOLD" in text
    if name == "decision-chosen-hold":
        assert page.locator("#chosen-hold").count() == 1 and "chosen HOLD" in text
    if name.startswith("cohort-"):
        links = [a.inner_text() for a in page.locator("a[href^='/decisions/']").all()]
        assert links and not any(t.strip() in ("Done", "Failed", "Skipped") for t in links)
        assert all(t.startswith("week ") for t in links), links[:5]


def _failing_sync() -> None:
    """Two failed market syncs since the last success: what the live page must explain."""
    now = clock.now()
    for minutes in (30, 15):
        JobRun.objects.create(
            job="sync",
            status=JobRun.Status.FAILED,
            started_at=now,
            finished_at=now,
            error=f"HTTP 503 from gamma-api ({minutes} minutes ago)",
        )


@pytest.mark.parametrize("width", WIDTHS)
def test_walk_every_page_type(browser, live_server, site, staff_cookie, width):  # noqa: F811
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 900})
    _failing_sync()
    try:
        for name, path in _pages(site).items():
            v.go(path)
            _check_numbers(v, name)
            _check_number_forms(v, name)
            _check_layout(v, name, width)
            _check_words(v, name, width)
            _check_labels(v, name)
            _check_page(v, name, width)
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
            if name in ("admin-decisions", "admin-calls"):
                listed = page.locator("#result_list").inner_text()
                assert "0.0000000000" not in listed and "$0.00" in listed, name
            if name == "admin-index":
                link = page.locator("#attention-summary a[href='/admin/attention/']")
                assert link.count() == 1 and "Needs attention" in link.inner_text()
            if name == "admin-market":
                assert page.locator("a.correction-link").count() == 3
                assert page.locator("a.deletelink").count() == 0
            if name == "admin-correct":
                # The preview waits for a choice (the outcome starts empty), then shows what
                # the correction changes (tests/site/test_browser_corrections.py follows it).
                # The preview is loaded after the page: wait for it, not for a screenshot's time.
                expect(page.locator(".preview-empty")).to_be_visible()
                content = page.locator("#content").inner_text()
                assert "What this changes" in content and "Choose an outcome" in content
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
