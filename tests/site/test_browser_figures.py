"""Issue 38's figures in a real browser, at 1,400 and 390 px, on a small demo:

- the home chart draws chain-linked growth on a log scale and says so on its axis; the table
  beside it holds the chart's own end values (not the leaderboard's pooled return); hiding a
  line by its legend entry is said in words under the chart;
- every leaderboard row shows its coverage, and the common-question view states its
  imputation rule;
- a competitor page shows an untested closing-line series as "not tested (n trades < 10)",
  next to its skill and return intervals, and a tested label with the adjusted p it used.

Screenshots: test-artifacts/figures-<page>-<width>.png.
"""

from __future__ import annotations

import pytest

from scoring.models import LeaderboardRow
from scoring.selectors import latest_run
from tests import demo_snapshot
from tests.site.test_browser import DEMO_NOW, Visitor

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

WIDTHS = (1400, 390)


@pytest.fixture
def demo(transactional_db, settings):
    settings.ARENA_LLM_API_KEY = ""
    demo_snapshot.demo(weeks=2, n_markets=40, now=DEMO_NOW, latency_scale=0)
    run = latest_run("demo")
    rows = LeaderboardRow.objects.filter(run=run, cohort__isnull=True).select_related("competitor")
    untested = next(r for r in rows if r.details.get("edge_label") == "NOT_TESTED")
    tested = next((r for r in rows if (r.details.get("clv") or {}).get("p_holm") is not None), None)
    return {"untested": untested, "tested": tested, "rows": rows}


CHART_STATE = """() => {
  const el = document.getElementById('overview-plot');
  const ends = [...document.querySelectorAll('[data-chart-ends="overview-plot"] tbody tr')];
  return {
    type: el.layout.yaxis.type,
    title: el.layout.yaxis.title.text,
    traces: el.data.map(t => ({name: t.name, last: t.customdata.filter(v => v !== null).at(-1)})),
    ends: ends.map(tr => [tr.querySelector('th').textContent.trim(),
                          tr.querySelector('td').textContent.trim()]),
    wide: document.documentElement.scrollWidth,
  };
}"""


# A function, not a string: the site's CSP refuses eval, which a string expression needs.
HIDDEN = "(n) => document.getElementById('overview-plot').dataset.hidden === n"


def _signed(value: float) -> str:
    # Signed by the figure shown: +0.04 and -0.04 both read 0.0%.
    text = f"{abs(value):.1f}%"
    if text == "0.0%":
        return text
    return ("+" if value > 0 else "\u2212") + text


@pytest.mark.parametrize("width", WIDTHS)
def test_home_chart_table_and_rows_say_what_they_show(browser, live_server, demo, width):
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 900})
    try:
        page = v.go("/?scope=demo")
        v.wait_drawn("#overview-plot")
        state = page.evaluate(CHART_STATE)
        assert state["type"] == "log" and "log scale" in state["title"]
        # The table beside the chart: the chart's own last values, highest first.
        by_value = sorted(state["traces"], key=lambda t: -t["last"])
        assert [e[0] for e in state["ends"]] == [t["name"] for t in by_value]
        assert [e[1] for e in state["ends"]] == [_signed(t["last"]) for t in by_value]
        assert state["wide"] <= width + 1
        # Hiding a line says so, and showing it again clears the note.
        note = page.locator('[data-chart-hidden="overview-plot"]')
        assert note.text_content().strip() == ""
        page.locator("#overview-plot .legendtoggle").first.click()
        page.wait_for_function(HIDDEN, arg="1")
        first = state["traces"][0]["name"]
        assert f"1 of {len(state['traces'])} lines hidden: {first}" in note.text_content()
        page.locator("#overview-plot .legendtoggle").first.click()
        page.wait_for_function(HIDDEN, arg="0")
        assert note.text_content().strip() == ""
        # Coverage on every ranked row; the common view states its rule.
        cells = page.locator('#leaderboard-table td[data-label="Scored, coverage"]')
        texts = cells.all_text_contents()
        assert texts and all("coverage " in c and " / " in c for c in texts)
        # The table fits: its last column is inside the page at 1,400 px.
        if width == 1400:
            wrap = page.locator("#leaderboard-table .table-wrap")
            sizes = wrap.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
            assert sizes[0] <= sizes[1] + 1, sizes
        common = page.locator("#common-h").locator("xpath=..").text_content()
        assert "imputed as the price the week's market list showed" in common
        assert "does not rank" in common
        assert page.locator("text=Pooled return").count() >= 1
        v.shot(f"figures-home-{width}")
    finally:
        v.close()
    assert not v.errors, v.errors


@pytest.mark.parametrize("width", WIDTHS)
def test_competitor_pages_label_closing_line_value_only(browser, live_server, demo, width):
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 900})
    try:
        untested = demo["untested"]
        page = v.go(f"/competitors/{untested.competitor.slug}/?scope=demo")
        metrics = page.locator("table.metrics").text_content()
        n = untested.details["clv"]["n"]
        assert "Closing-line edge (a test of closing-line value only" in metrics
        if untested.details["clv"]["flag"] == "too_few":
            assert f"not tested (n trades {n} < 10)" in " ".join(metrics.split())
        assert "NO_EDGE" not in metrics
        assert "Mean-zero test p" not in page.content()
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        v.shot(f"figures-untested-{width}")
        tested = demo["tested"]
        if tested is not None:
            page = v.go(f"/competitors/{tested.competitor.slug}/?scope=demo")
            metrics = " ".join(page.locator("table.metrics").text_content().split())
            assert tested.details["edge_label"] in metrics
            assert "Holm-adjusted p" in metrics and "the p the label used" in metrics
    finally:
        v.close()
    assert not v.errors, v.errors
