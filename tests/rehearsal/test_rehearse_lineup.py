"""The rehearsal's catalog change without a running arena: the stand-in's catalog repriced, the
review's proposal approved by a staff member through the live admin (login form, attention page,
the proposal's form), and the end check failing when the approval is missing or the next cohort
runs the old release. The whole run, where the check passes, is tests/rehearsal/test_rehearse_run.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model

from agents.lineup_review import review_lineup
from agents.models import Competitor, LineupProposal, Release
from cohorts.models import Cohort
from cohorts.services import open_cohort
from core import clock
from simulations.rehearsal.lineup import APPROVE_AFTER, check_lineup, plan
from simulations.simllm import SimulatedLLMServer, ensure_simulated_competitors

pytestmark = pytest.mark.django_db(transaction=True)

SUNDAY = datetime(2026, 12, 6, tzinfo=UTC)
STAFF, PASSWORD = "rehearsal-staff", "a-password-for-the-test"


@pytest.fixture
def stage(settings, live_server):
    """One active simulated competitor, free as the stand-in lists it, and a staff account."""
    competitor = ensure_simulated_competitors()[0]
    Competitor.objects.filter(active=True).update(active=False)
    Competitor.objects.filter(pk=competitor.pk).update(active=True)
    competitor.refresh_from_db()
    get_user_model().objects.create_superuser(STAFF, "", PASSWORD)
    with SimulatedLLMServer(latency_scale=0) as server:
        settings.ARENA_LINEUP_CATALOGS = f"simulated={server.base_url}"
        settings.ARENA_LINEUP_TIMEOUT = 5
        run = SimpleNamespace(options=SimpleNamespace(weeks=2), first_sunday=SUNDAY, lineup={},
                              base_url=live_server.url, cohort_ids=[])  # fmt: skip
        change = plan(run, server, [competitor], STAFF)
        assert change is not None
        yield run, change, competitor


def _open(week_start: datetime, run) -> Cohort:
    cohort, _ = open_cohort(week_start, kind=Cohort.Kind.REHEARSAL, at=week_start)
    run.cohort_ids.append(cohort.pk)
    return cohort


def test_staff_approve_the_reviewed_price_change_through_the_admin(stage):
    run, change, competitor = stage
    with clock.running_on(clock.SimulatedClock(SUNDAY + timedelta(minutes=40))):
        _open(SUNDAY, run)
        summary = review_lineup()
    assert summary["simulated"]["changed"] == 1, summary
    proposal = LineupProposal.objects.get(competitor=competitor, kind="changed")
    assert proposal.status == LineupProposal.Status.PENDING

    # Not before the first week's cohort has run a day: its entries are pinned by then.
    change.tick(SUNDAY + APPROVE_AFTER - timedelta(minutes=1), run, STAFF, PASSWORD)
    assert "approved" not in run.lineup
    at = SUNDAY + APPROVE_AFTER
    with clock.running_on(clock.SimulatedClock(at)):
        change.tick(at, run, STAFF, PASSWORD)
    assert run.lineup["approved"] is True, run.lineup
    assert run.lineup["proposal"] == proposal.pk
    assert "success: Approved: release 2 of" in run.lineup["said"]
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by) == (LineupProposal.Status.APPROVED, STAFF)
    assert LogEntry.objects.filter(object_id=str(proposal.pk), user__username=STAFF).exists()
    new = Release.current(Competitor.objects.get(pk=competitor.pk))
    assert (new.number, new.price_in_per_m, new.price_out_per_m) == (
        2, Decimal("1.25"), Decimal("10"),
    )  # fmt: skip

    # The next cohort is on the new release: what the check fails on now is only that no
    # decision ran (nothing here decides), not the releases or the approval.
    _open(SUNDAY + timedelta(days=7), run)
    check = check_lineup(run)
    assert not check.ok
    assert "release 1 ($0.000000 / $0.000000 per M; decided weeks [])" in check.detail
    assert "release 2 ($1.250000 / $10.000000 per M; weeks [])" in check.detail
    assert "approved no" not in check.detail and "not a new release" not in check.detail
    assert "decisions called releases []" in check.detail
    assert "made no decision after the approval" in check.detail


def test_the_check_fails_when_staff_approved_nothing_and_the_next_cohort_kept_the_old_release(
    stage,
):
    run, change, competitor = stage
    with clock.running_on(clock.SimulatedClock(SUNDAY + timedelta(minutes=40))):
        _open(SUNDAY, run)
        review_lineup()
    # Past the approval window without a look at the admin: staff gave up.
    change.tick(SUNDAY + timedelta(days=6, hours=1), run, STAFF, PASSWORD)
    assert run.lineup["gave_up"] and "approved" not in run.lineup
    _open(SUNDAY + timedelta(days=7), run)
    check = check_lineup(run)
    assert not check.ok
    assert "staff approved no lineup proposal" in check.detail
    assert "the next cohort's entry is on release 1" in check.detail
