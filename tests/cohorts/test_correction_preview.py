"""A correction's preview (issue 43): a dry run of the chosen change that writes nothing, whose
figures (settlements, payouts, cash, P/L, ranks) are the ones the real change then produces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.apps import apps
from django.core.cache import cache
from django.core.serializers import serialize

from cohorts.correction_preview import SettlementPreview, SettlementSection
from cohorts.models import Cohort, Entry, Settlement, Snapshot
from cohorts.services import BetOrder, execute_orders
from cohorts.snapshots import take_snapshot
from core.versions import KEYS
from markets.corrections import preview_resolution, set_resolution
from markets.models import Market
from scoring.correction_preview import ScorePreview, ScoreSection
from scoring.models import LeaderboardRow, ScoreRun
from scoring.services import compute_scores
from tests.factories import make_cohort_with_entries, make_market

D = Decimal
WEEK = datetime(2026, 11, 15, tzinfo=UTC)
T0 = datetime(2026, 11, 16, 10, tzinfo=UTC)


def _world(kind: str = Cohort.Kind.LIVE) -> tuple[Market, list[Entry]]:
    """Three entries on one market: Yes, No and a bigger Yes; resolved Yes, settled, scored."""
    _, entries = make_cohort_with_entries(3, week_start=WEEK, kind=kind)
    m = make_market(prices={"Yes": "0.50", "No": "0.50"})
    other = make_market(prices={"Yes": "0.40", "No": "0.60"})
    a, b, c = entries
    execute_orders(a, [BetOrder(m.pk, "Yes", D("100"))], [], None, at=T0)
    execute_orders(b, [BetOrder(m.pk, "No", D("300"))], [], None, at=T0)
    execute_orders(c, [BetOrder(m.pk, "Yes", D("200")), BetOrder(other.pk, "No", D("60"))],
                   [], None, at=T0)  # fmt: skip
    take_snapshot(at=T0, cohorts=[entries[0].cohort])
    set_resolution(m, status="resolved", outcome="Yes", reason="upstream said Yes")
    compute_scores(kind)
    m.refresh_from_db()
    return m, entries


def _everything() -> dict[str, str]:
    """Every row of every table, serialised: a dry run must leave each exactly as it was."""
    return {
        model._meta.label: serialize("json", model.objects.order_by("pk"))
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
    }


def _preview(market: Market, status: str, outcome: str = ""):
    return preview_resolution(
        [market], status=status, outcome=outcome, readers=[SettlementPreview(), ScorePreview()],
        budget_s=30,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_preview_writes_nothing_and_moves_no_version():
    market, _ = _world()
    for key in KEYS:
        cache.set(key, f"token-{key}", None)
    rows_before = _everything()

    preview = _preview(market, "resolved", "No")

    assert preview.refused == {}
    settlements, scores = preview.sections
    assert len(settlements.reversed) == 3 and len(settlements.new) == 3  # it did work...
    assert scores.boards  # ...scored the corrected data...
    assert _everything() == rows_before  # ...and every row is as it was
    assert cache.get_many(KEYS) == {key: f"token-{key}" for key in KEYS}
    assert ScoreRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("status", "outcome"), [("resolved", "No"), ("void", ""), ("closed", "")]
)
def test_the_preview_figures_are_what_the_change_then_does(status, outcome):
    market, entries = _world()
    preview = _preview(market, status, outcome)
    settlements: SettlementSection = preview.sections[0]
    scores: ScoreSection = preview.sections[1]
    live_before = set(Settlement.objects.filter(reversed_at__isnull=True).values_list("pk", flat=True))

    set_resolution(market, status=status, outcome=outcome, reason="source misread")
    run = compute_scores("live")  # what the debounced rescore runs

    gone = Settlement.objects.filter(pk__in=live_before, reversed_at__isnull=False)
    new = Settlement.objects.filter(reversed_at__isnull=True).exclude(pk__in=live_before)
    assert sorted(s.payout for s in settlements.reversed) == sorted(s.payout for s in gone)
    assert sorted(s.payout for s in settlements.new) == sorted(s.payout for s in new)
    for line in settlements.entries:
        entry = Entry.objects.get(pk=line.entry_id)
        latest = Snapshot.objects.filter(entry=entry).order_by("-ts", "-pk").first()
        assert line.cash_after == entry.cash
        assert line.pnl_after == latest.total.quantize(D("0.01")) - entry.initial_balance
    assert any(line.moved for line in settlements.entries)
    (board,) = [b for b in scores.boards if b.group == "all cohorts"]
    stored = {
        r.competitor.display_name: (r.rank, r.pnl)
        for r in LeaderboardRow.objects.filter(run=run, cohort=None).select_related("competitor")
    }
    assert {line.competitor: (line.rank_after, line.pnl_after) for line in board.lines} == stored


@pytest.mark.django_db
def test_a_resolve_to_no_reverses_the_yes_payouts_and_pays_no():
    market, (a, b, c) = _world()
    preview = _preview(market, "resolved", "No")
    settlements = preview.sections[0]
    # Yes holders bought 200 and 400 shares at 0.50: $600 taken back; No: 600 shares paid.
    assert settlements.taken_back == D("600.00") and settlements.paid == D("600.00")
    by_entry = {line.entry_id: line for line in settlements.entries}
    assert by_entry[b.pk].cash_after - by_entry[b.pk].cash_before == D("600.00")
    assert by_entry[a.pk].cash_after - by_entry[a.pk].cash_before == D("-200.00")


@pytest.mark.django_db
def test_a_change_that_is_no_change_is_refused_in_the_preview_too():
    market, _ = _world()
    preview = _preview(market, "resolved", "Yes")
    assert preview.refused[market.pk] == "already resolved Yes"
    assert preview.sections[0].reversed == [] and preview.sections[0].new == []


@pytest.mark.django_db
def test_scores_step_aside_when_a_dry_run_would_not_fit_the_budget():
    market, _ = _world()
    ScoreRun.objects.filter(scope="live").update(
        finished_at=ScoreRun.objects.get(scope="live").started_at + (T0 - WEEK) / 100
    )  # the last run took ~2 h / 100 = 76 s
    preview = preview_resolution(
        [market], status="void", readers=[SettlementPreview(), ScorePreview()], budget_s=4
    )
    settlements, scores = preview.sections
    assert scores.boards == []
    assert scores.skipped and "would not finish within" in scores.skipped[0]
    assert len(settlements.reversed) == 3  # the settlements are still shown


@pytest.mark.django_db
def test_settled_at_follows_a_correction_and_the_change_keeps_both_clocks():
    market, entries = _world(Cohort.Kind.DEMO)
    first = market.settled_at
    take_snapshot(at=T0 + timedelta(days=2), cohorts=[entries[0].cohort])  # the demo's clock moves
    change = set_resolution(market, status="resolved", outcome="No", reason="source misread")
    market.refresh_from_db()
    # The demo's correction applies at its simulated clock; it was made on the wall clock.
    assert market.settled_at == change.changed_at != first
    assert change.made_at is not None and change.made_at > change.changed_at
