"""The competitor page reads right: no number wider than 15 digits, P/L parts in their own rows,
the other measures labelled and explained, the paired tests under display names with tiny
p-values as "< 0.0001", a borderline edge label said to be borderline."""

import re

import pytest

from cohorts.models import Cohort
from scoring.models import LeaderboardRow
from tests.site.conftest import build_arena, save_details
from web.templatetags.arena import num, p_value, pct, signed


def _text(body: str) -> str:
    """What a reader sees: tags and chart data (script blocks) removed."""
    body = re.sub(r"<script\b.*?</script>", " ", body, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def test_huge_numbers_read_as_powers_of_ten_and_tiny_p_as_a_bound():
    assert num(1.4275776377860587e81) == "1.43 × 10⁸¹"
    assert signed(-3e20, 2) == "\u2212\u20603.00 × 10²⁰"
    assert pct(2.5e16) == "2.50 × 10¹⁶%"
    assert num(999_999_999_999_999) == "999,999,999,999,999.000"  # still fits: plain digits
    assert p_value(2.8e-12) == "< 0.0001" and p_value(0.0) == "< 0.0001"
    assert p_value(0.00028) == "0.0003" and p_value(None) == "—"


@pytest.mark.django_db
def test_competitor_page_numbers_labels_and_pairs(client, world):
    build_arena(world, kind=Cohort.Kind.LIVE, n_competitors=3)
    run = world.score_run("live")
    first, second = world.competitors[0], world.competitors[1]
    details = run.details
    details["dm"]["all"]["brier"][0]["p"] = 2.8e-12
    run.details = details
    save_details(run)
    row = LeaderboardRow.objects.get(run=run, competitor=first)
    d = row.details
    d["tournament"]["take"] = 1.4275776377860587e81  # exp(184.9) x coverage, as the issue saw
    d["clv"] |= {"p_holm": 0.031, "borderline": True, "label": "WEAK_EDGE"}
    d |= {"bets_won": 54, "bets_lost": 3, "settled_won": 39, "settled_lost": 2, "rps": None}
    row.details = d
    row.realized_pnl, row.unrealized_pnl = 70, 20
    row.save()

    body = client.get(f"/competitors/{first.slug}/?scope=live").content.decode()
    text = _text(body)
    # No run of more than 15 digits anywhere on the page (separators and decimals included).
    assert not re.search(r"\d(?:[\d,.]*\d){15,}", text.replace("\u2060", ""))
    # The take spans hundreds of powers of ten: it reads on a log scale, never as 1.43 × 10⁸¹.
    assert "Take, log scale 186.87" in text and "× 10" not in text
    # P/L parts are rows of their own, not figures in the interval column.
    assert re.search(r"P/L realized \(settled and sold\) \$70\.00", text)
    assert re.search(r"P/L unrealized \(open positions at their last price\) \$20\.00", text)
    # Other measures: labelled, with what each counts; bets and positions told apart.
    assert "Bets won / lost 54 / 3" in text and "Positions won / lost 39 / 2" in text
    assert "fewer positions than bets" in text
    assert "Ranked probability score n/a" in text and "Rps" not in text
    # The paired tests: other competitors by display name, a tiny p as a bound.
    dm = body[body.index('id="dm-h"') : body.index('id="clv-h"')]
    assert second.display_name in dm and f">{second.slug}<" not in dm
    assert "&lt; 0.0001" in dm and "0.0000" not in dm
    # The edge label says it is borderline.
    clv = _text(body[body.index('id="clv-h"') : body.index('id="tournament-h"')])
    assert "WEAK_EDGE borderline" in clv and "Holm-adjusted p 0.0310" in clv
