"""Table rows computed in Python (web/rows.py) print what the templates printed: the same
links as a reversal, the same text, escaped when rendered."""

import pytest
from django.template import Context, Template
from django.urls import reverse

from web import rows
from web.chart_reads import correction_events


@pytest.mark.parametrize("pk", [1, 7, 10, 12345, 987654321])
def test_an_id_url_is_the_reversed_url(pk):
    assert rows.market_url(pk) == reverse("market-detail", args=[pk])
    assert rows.decision_url(pk) == reverse("decision-detail", args=[pk])


def test_a_universe_row_prints_its_prices_escaped():
    (row,) = rows.universe_rows(
        [{"question": "<b>Q</b>", "market_id": 3, "prices": {"Yes</script>": 0.4, "No": "0.6"}}]
    )
    assert row.href == reverse("market-detail", args=[3])
    html = Template("{{ m.question }}|{{ m.prices }}").render(Context({"m": row}))
    assert html == "&lt;b&gt;Q&lt;/b&gt;|Yes&lt;/script&gt; 0.4 · No 0.6"
    (bare,) = rows.universe_rows([{"question": "Q"}])
    assert bare.href is None and bare.prices == ""


@pytest.mark.django_db
def test_a_cohort_charts_corrections_from_the_page_are_the_queried_ones(world):
    """The cohort page hands its staff corrections to the chart's events: the same events as
    the chart reading them itself."""
    from markets.models import Market, ResolutionChange
    from web import selectors

    market = world.market()
    cohort = world.cohort()
    entry = world.entry(cohort, world.competitor("a-model"))
    world.decision(entry, market=market)
    ResolutionChange.objects.create(
        market=market,
        source=Market.ResolvedBy.ADMIN,
        from_status="resolved",
        from_outcome="Yes",
        to_status="resolved",
        to_outcome="No",
        reason="wrong source",
    )
    known = selectors.staff_corrections(cohort)
    assert len(known) == 1
    queried = correction_events([cohort])
    assert len(queried) == 1
    assert correction_events([cohort], None, known) == queried
    assert correction_events([cohort], None, []) == []
