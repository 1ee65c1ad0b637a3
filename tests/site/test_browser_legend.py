"""Issue 38, item 10, in a browser: a competitor's line can be found among many, and a HOLD the
arena forced is told from one the model chose.

- Hovering (or focusing) a legend entry leaves exactly that competitor's line at full strength
  and fades the others; leaving restores them all. The home and cohort charts carry each
  competitor's name at its line's last point, in its colour, without labels on top of each
  other; at 1,400 and at 390 px, where a long name is cut.
- An LLM competitor whose answer cannot be used twice (the fake model server answers prose,
  then prose again after the repair prompt) ends its decision as a forced HOLD: the decision
  page says so, and the cohort's list of decisions links it as "week 1: forced HOLD", never a
  bare "Done".

Screenshots: test-artifacts/legend-<page>.png.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from cohorts.decisions.run import run_decision
from cohorts.models import Decision
from cohorts.snapshots import SnapshotRow, store_snapshots
from cohorts.universe import freeze_universe
from tests.agents.helpers import (
    AT,
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import success
from tests.site.test_browser import Visitor
from web.decision_words import decision_link_text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# A name with markup in it: the direct label must show it as text.
GARBLED = "Garbled <b>model</b>"
BASELINES = ("market", "cash", "random", "favorite")


@pytest.fixture
def held(transactional_db, model_server):
    """A live cohort of an LLM competitor whose two answers are unusable (a forced HOLD) and
    four baselines, each entry with a day of snapshots that differ, so the charts have lines."""
    make_markets(6)
    llm = llm_competitor(model_server, slug="garbled-model", display_name=GARBLED)
    competitors = [llm] + [baseline_competitor(s) for s in BASELINES]
    cohort = make_cohort(competitors)
    freeze_universe(cohort, 1, AT)
    model_server.enqueue(success("I would rather not say."), success("still no JSON"))
    decision = run_decision(cohort.entries.get(competitor=llm).pk, 1, AT)
    assert (decision.action, decision.status) == (Decision.Action.HOLD, Decision.Status.DONE)
    assert decision.hold_reason, "two unusable answers should force the HOLD"
    rows = []
    for n, entry in enumerate(cohort.entries.order_by("pk")):
        for i in range(24):
            total = Decimal("10000") + Decimal(n * 40 + i * (n - 2) * 3)
            rows.append(
                SnapshotRow(
                    entry_id=entry.pk,
                    ts=cohort.week_start + timedelta(hours=i),
                    cash=entry.cash,
                    positions_value=total - entry.cash,
                    total=total,
                    realized_pnl=Decimal("0"),
                    unrealized_pnl=total - Decimal("10000"),
                )
            )
    store_snapshots(rows)
    return cohort, decision


# Each drawn line's opacity as the reader sees it (the trace group's computed style).
LINE_OPACITIES = """(sel) => Array.from(document.querySelectorAll(sel + ' .scatterlayer .trace'))
  .map((g) => Number(getComputedStyle(g).opacity))"""

# The direct labels' texts: the annotations after the chart's event labels.
LABELS = """(sel) => {
  const from = Number(document.querySelector(sel).dataset.directLabelsFrom);
  return Array.from(document.querySelectorAll(sel + ' g.annotation'))
    .filter((g) => Number(g.getAttribute('data-index')) >= from).map((g) => g.textContent);
}"""


def _check_legend_and_labels(v: Visitor, selector: str, names: list[str], width: int) -> None:
    page = v.page
    v.wait_drawn(selector)
    opacities = page.evaluate(LINE_OPACITIES, selector)
    assert len(opacities) == len(names) and all(o == 1 for o in opacities), opacities

    # Direct labels: one per line, each a competitor's name, shown as text; on a phone a long
    # name is cut to 13 characters to keep the plot wide (whole in the legend and on hover).
    label_of = {n: n if width >= 640 or len(n) <= 13 else n[:12] + "\u2026" for n in names}
    assert int(page.locator(selector).get_attribute("data-direct-labels")) == len(names)
    assert sorted(page.evaluate(LABELS, selector)) == sorted(label_of.values())
    assert page.locator(f"{selector} g.annotation b").count() == 0  # the markup stayed text
    boxes = page.locator(f"{selector} g.annotation").evaluate_all(
        "gs => gs.map(g => { const r = g.getBoundingClientRect(); return [r.top, r.bottom]; })"
    )
    boxes.sort()
    assert all(a[1] - b[0] <= 2 for a, b in zip(boxes, boxes[1:])), f"labels overlap: {boxes}"

    # Hover a legend entry: its line alone at full strength; move away: all restored.
    entries = page.locator(f"{selector} g.legend g.traces")
    assert entries.count() == len(names)
    for i in (1, entries.count() - 1):
        entries.nth(i).hover()
        opacities = page.evaluate(LINE_OPACITIES, selector)
        assert opacities.count(1) == 1 and all(o < 0.5 for o in opacities if o != 1), opacities
        shown = page.locator(selector).get_attribute("data-highlight")
        legend_name = entries.nth(i).text_content()
        label = page.locator(f"{selector} g.annotation").filter(has_text=label_of[legend_name])
        assert (
            shown
            and label.count() == 1
            and label.evaluate("g => getComputedStyle(g).opacity") in ("1", "")
        ), (shown, legend_name)
    v.shot(f"legend-{selector.strip('#')}-hover-{width}")
    page.mouse.move(2, 2)
    assert all(o == 1 for o in page.evaluate(LINE_OPACITIES, selector))

    # The keyboard reaches the same highlight.
    entries.nth(0).focus()
    assert page.evaluate(LINE_OPACITIES, selector).count(1) == 1
    entries.nth(0).evaluate("g => g.blur()")
    assert all(o == 1 for o in page.evaluate(LINE_OPACITIES, selector))


@pytest.mark.parametrize("width", (1400, 390))
def test_legend_highlight_and_direct_labels(browser, live_server, held, width):
    cohort, _ = held
    names = [e.competitor.display_name for e in cohort.entries.select_related("competitor")]
    v = Visitor(browser, live_server.url, viewport={"width": width, "height": 900})
    try:
        v.go(f"/cohorts/{cohort.pk}/")
        _check_legend_and_labels(v, "#value-chart-plot", names, width)
        v.go("/?scope=live")
        _check_legend_and_labels(v, "#overview-plot", names, width)
        assert v.errors == [], v.errors
    finally:
        v.close()


def test_forced_hold_is_named_on_the_decision_and_in_the_cohort(browser, live_server, held):
    cohort, decision = held
    v = Visitor(browser, live_server.url, viewport={"width": 1400, "height": 900})
    try:
        page = v.go(f"/cohorts/{cohort.pk}/")
        text = decision_link_text(1, decision.action, decision.hold_reason, decision.status)
        assert text == "week 1: forced HOLD"
        link = page.locator(f"a[href='/decisions/{decision.pk}/']")
        assert link.count() >= 1 and link.first.inner_text().strip() == text
        links = [a.inner_text().strip() for a in page.locator("a[href^='/decisions/']").all()]
        assert "Done" not in links, links
        v.shot("legend-cohort-forced-hold")

        link.first.click()
        page.wait_for_load_state()
        assert page.url.endswith(f"/decisions/{decision.pk}/")
        forced = page.locator("#forced-hold")
        assert forced.count() == 1 and "Forced HOLD" in forced.inner_text()
        assert decision.hold_reason in forced.inner_text()
        assert page.locator("#chosen-hold").count() == 0
        assert "forced HOLD" in " ".join(page.locator("main").inner_text().split())
        v.shot("legend-decision-forced-hold")
        assert v.errors == [], v.errors
    finally:
        v.close()
