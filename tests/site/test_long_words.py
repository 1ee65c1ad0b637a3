"""A 300-character unbroken word in market or model text never widens a page (it scrolled the
market page 7,158 px sideways) nor a key table: measured in a real browser at phone and desktop
width."""

from __future__ import annotations

import pytest

from cohorts.models import Decision
from markets.models import Market
from tests.site.conftest import World, build_arena
from tests.site.test_browser import Visitor

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
WORD = "Supercalifragilistic" * 15  # 300 characters, no break opportunity
# Outcome names and slugs are at most 200 characters in the schema (PostgreSQL enforces it).
SHORTER = WORD[:190]


@pytest.fixture
def long_words(transactional_db):
    world = World()
    world.market(
        f"Will {WORD} happen?",
        description=f"Resolves YES if {WORD}.",
        outcomes=[f"Yes{SHORTER}", "No"],
        last_prices={f"Yes{SHORTER}": "0.40", "No": "0.60"},
        event_title=WORD,
        slug=SHORTER.lower(),
    )
    world.market()
    world.competitor(WORD[:60].lower())
    cohort = build_arena(world, n_competitors=1, weeks=2)
    Decision.objects.update(
        reasoning=f"Because {WORD} and {WORD}.",
        hold_reason=WORD,
        error=WORD,
        user_prompt=f"Markets:\n{WORD}",
    )
    world.resolve(world.markets[1])
    world.score_run("live")
    market = Market.objects.get(question__startswith="Will Super")
    decision = Decision.objects.order_by("pk").first()
    return [
        "/",
        "/markets/",
        f"/markets/?q={WORD[:20]}",
        f"/markets/{market.pk}/",
        f"/decisions/{decision.pk}/",
        f"/cohorts/{cohort.pk}/",
        "/cohorts/",
        f"/cohorts/{cohort.pk}/entries/{world.competitors[0].slug}/",
        f"/competitors/{world.competitors[0].slug}/",
        "/competitors/",
    ]


@pytest.mark.parametrize("width", [390, 1400])
def test_no_page_is_widened_by_a_long_word(browser, live_server, long_words, width):
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 844})
    try:
        wider = {}
        for path in long_words:
            v.go(path)
            overflow = v.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if overflow > 0:
                wider[path] = overflow
            # The key tables fit too: no sideways scrolling to reach a figure.
            tables = v.page.evaluate(
                "Array.from(document.querySelectorAll('table.stack')).map("
                "t => t.scrollWidth - t.parentElement.clientWidth)"
            )
            if any(extra > 1 for extra in tables):
                wider[f"{path} table"] = max(tables)
        assert wider == {}, f"pages wider than the {width} px screen (px): {wider}"
    finally:
        v.close()
