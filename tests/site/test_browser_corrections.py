"""Issue 43's done-when, in a browser on the demo: staff correct a settled market to its other
outcome, back again, then void it. Each time the preview (a dry run, fetched by htmx as the
choice changes) states the settlements, payouts, each entry's P/L and the ranks after; once
confirmed, the state (settlement rows, entry P/L, the rescore's ranks) is checked against those
figures, and the result page shows both clocks.

Screenshots: test-artifacts/correction-<step>.png."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import expect

from cohorts.models import Cohort, Entry, Settlement, Snapshot
from markets.models import Market
from scoring.models import LeaderboardRow
from scoring.services import compute_scores
from tests import demo_snapshot
from tests.site.test_browser import DEMO_NOW, Visitor

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


def _money(text: str) -> Decimal:
    return Decimal(text.strip().replace("$", "").replace(",", ""))


@pytest.fixture
def demo(transactional_db, settings):
    settings.ARENA_LLM_API_KEY = ""  # LLM entries are skipped (no key)
    # A loaded two-core test machine: the dry run of the demo's scores must not be cut short.
    settings.ARENA_CORRECTION_PREVIEW_S = 60
    demo_snapshot.demo(weeks=2, n_markets=40, now=DEMO_NOW)
    won = (
        Settlement.objects.filter(
            kind=Settlement.Kind.WON,
            reversed_at__isnull=True,
            position__entry__cohort__kind=Cohort.Kind.DEMO,
        )
        .order_by("pk")
        .first()
    )
    assert won is not None, "the demo should settle a winning position"
    return Market.objects.get(pk=won.market_id)


@pytest.fixture
def staff(live_server, browser):
    user = get_user_model().objects.create_user(
        "corrector", password="pw-corr-123", is_staff=True, is_superuser=True
    )
    client = Client()
    client.force_login(user)
    v = Visitor(browser, live_server.url)
    v.context.route("**/favicon.ico", lambda route: route.fulfill(status=204))  # admin has none
    v.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    yield v
    v.context.close()


def _read_preview(page) -> dict:
    box = page.locator("#correction-preview")
    expect(box.locator(".preview-settlements")).to_be_visible(timeout=60000)
    expect(box.locator(".preview-scores")).to_be_visible()
    assert box.locator(".scores-skipped").count() == 0, box.inner_text()
    new = sorted(_money(t) for t in box.locator("tr.new td.payout").all_inner_texts())
    gone = sorted(-_money(t) for t in box.locator("tr.reversed td.payout").all_inner_texts())
    pnl = {
        int(row.get_attribute("data-entry")): _money(row.locator(".pnl-after").inner_text())
        for row in box.locator("tr.entry-line").all()
    }
    board = box.locator('table.rank-lines[data-group="all cohorts"]')
    ranks = {
        row.locator(".competitor").inner_text(): row.locator(".rank-after").inner_text()
        for row in board.locator("tr.rank-line").all()
    }
    return {"new": new, "gone": gone, "pnl": pnl, "ranks": ranks, "text": box.inner_text()}


def _correct(v: Visitor, market: Market, action: str, outcome: str, step: str) -> dict:
    page = v.go(f"/admin/markets/market/{market.pk}/correct/{action}/")
    if action == "resolve_to_outcome":
        assert page.locator("#id_outcome").input_value() == ""  # the dropdown starts empty
        expect(page.locator(".preview-empty")).to_be_visible()
        page.locator("#id_outcome").select_option(outcome)  # htmx fetches this choice's preview
    seen = _read_preview(page)
    live_before = set(
        Settlement.objects.filter(market=market, reversed_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    v.shot(f"correction-{step}-preview")
    previews: list[str] = []
    page.on("request", lambda r: previews.append(r.url) if "/correct/preview/" in r.url else None)
    page.locator("#id_reason").fill(f"browser test: {step}")
    page.locator("#correction-form input[type=submit]").click()
    expect(page.locator("h1")).to_have_text("Correction applied")
    assert previews == []  # typing the reason and confirming ask for no new dry run
    v.shot(f"correction-{step}-result")
    # The result repeats the preview's figures, read from what was written.
    result = page.locator(".preview-settlements").inner_text()
    for line in seen["text"].splitlines():
        if line.startswith("Reverses "):
            assert line in result
    # Both clocks, labelled: made on the wall clock, applies at the demo's simulated time.
    assert "Made at (wall clock, UTC)" in page.content()
    made = page.locator("td.made-at").inner_text()
    applies = page.locator("td.applies-at").inner_text()
    assert applies.endswith("(simulated)") and made[:16] != applies[:16]
    expect(page.locator(".score-run-pending")).to_be_visible()
    landed = page.locator("#score-run").get_attribute("hx-get")
    # The live server shares this test's in-memory database connection: the page's polling
    # must stop before the test reads the database itself.
    page.goto("about:blank")

    # The state after confirming is what the preview said.
    settlements = Settlement.objects.filter(market=market)
    gone = settlements.filter(pk__in=live_before, reversed_at__isnull=False)
    new = settlements.filter(reversed_at__isnull=True).exclude(pk__in=live_before)
    assert sorted(s.payout for s in gone) == seen["gone"]
    assert sorted(s.payout for s in new) == seen["new"]
    for entry_id, pnl in seen["pnl"].items():
        entry = Entry.objects.get(pk=entry_id)
        total = Snapshot.objects.filter(entry=entry).order_by("-ts", "-pk").first().total
        assert total.quantize(Decimal("0.01")) - entry.initial_balance == pnl, entry
    run = compute_scores("demo")  # what the debounced rescore runs
    stored = {
        r.competitor.display_name: "—" if r.rank is None else str(r.rank)
        for r in LeaderboardRow.objects.filter(run=run, cohort=None).select_related("competitor")
    }
    assert seen["ranks"] == stored
    # The result page's poll links the rescore once it has landed.
    v.go(landed)
    expect(page.locator(".score-run-landed a")).to_have_text(f"demo score run #{run.pk}")
    return seen


def test_corrections_both_ways_and_a_void_preview_what_they_then_do(demo, staff):
    market = demo
    first = market.resolved_outcome
    other = next(o for o in market.outcomes if o != first)
    there = _correct(staff, market, "resolve_to_outcome", other, "flip")
    assert there["new"] and there["gone"]  # it moved money both ways
    market.refresh_from_db()
    assert market.resolved_outcome == other
    back = _correct(staff, market, "resolve_to_outcome", first, "back")
    assert back["gone"] == there["new"]  # back again takes exactly those payouts back
    _correct(staff, market, "void_markets", "", "void")
    market.refresh_from_db()
    assert market.status == Market.Status.VOID
    assert staff.errors == []
