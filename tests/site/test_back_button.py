"""Back after an htmx swap that pushed its URL shows the whole page, never the bare partial.

With the back/forward cache off (as when a page cannot be kept there), Chromium takes the
pushed URL's entry from its HTTP cache, where the last response for that URL is the partial
the swap fetched; only `Vary` on the htmx headers (and `no-store` on the partial) keep it out.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from tests.site.conftest import CHROMIUM_ARGS, World, build_arena, chromium_executable

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def scored_arena(transactional_db):
    world = World()
    world.competitor("alpha-model")
    world.competitor("beta-model")
    build_arena(world, n_competitors=2)
    world.score_run("live")
    return world


def test_back_after_a_pushed_swap_shows_the_whole_page(live_server, scored_arena):
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_executable(),
            args=[*CHROMIUM_ARGS, "--disable-features=BackForwardCache"],
        )
        try:
            page = browser.new_page()
            page.goto(live_server.url + "/")
            page.locator("th a.sort", has_text="Brier").click()
            page.wait_for_url("**sort=brier**")
            page.wait_for_selector("th[aria-sort] >> text=Brier")
            page.goto(live_server.url + "/methodology/")
            page.go_back()
            page.wait_for_url("**sort=brier**")
            assert page.locator("header.site-header").count() == 1, page.content()[:300]
            assert page.locator("link[rel=stylesheet]").count() >= 1
            assert page.locator("table.leaderboard").count() == 1
        finally:
            browser.close()
