"""The rehearsal's outside agent (simulations/rehearsal/agent.py): staff enter it through the
admin's forms (its public key, its token read once from the page), the reference agent then runs
as its own process with --follow and decides the open week, signed; and the rehearsal's check
fails a week recorded as HOLD "no submission" or without a submission that decided it."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model

from agents import tokens
from agents.models import AgentToken, Competitor
from cohorts.decisions.outside import NO_SUBMISSION, WINDOW, window
from cohorts.decisions.run import run_decision
from cohorts.models import AgentSubmission, Cohort, Decision
from cohorts.services import open_cohort, week_start_for
from cohorts.universe import freeze_universe
from core import clock
from simulations.rehearsal.agent import SLUG, OutsideAgent, check_outside_agent
from simulations.rehearsal.http import StaffSession
from simulations.rehearsal.procs import wait_for
from tests.agents.helpers import make_markets

pytestmark = pytest.mark.django_db(transaction=True)


def _staff(live_server) -> StaffSession:
    user = get_user_model().objects.create(username="staff", is_staff=True, is_superuser=True)
    user.set_password("a-long-test-password")
    user.save()
    staff = StaffSession(live_server.url, "staff", "a-long-test-password")
    staff.login()
    return staff


def _week(competitor: Competitor, frozen_ago: timedelta) -> Cohort:
    now = clock.now()
    make_markets(6)
    cohort, _ = open_cohort(week_start_for(now), kind=Cohort.Kind.LIVE, competitors=[competitor],
                            at=week_start_for(now))  # fmt: skip
    freeze_universe(cohort, 1, now - frozen_ago)
    return cohort


def test_staff_enter_the_agent_in_the_admin_and_it_decides_the_open_week(live_server, tmp_path):
    agent = OutsideAgent(live_server.url, tmp_path, rate=1.0)
    token = agent.enter(_staff(live_server))
    competitor = Competitor.objects.get(slug=SLUG)
    assert competitor.kind == Competitor.Kind.OUTSIDE and competitor.active
    assert len(base64.b64decode(competitor.public_key)) == 32
    row = tokens.authenticate(token)
    assert row.competitor == competitor and token.startswith(agent.token_prefix + "_")
    assert (tmp_path / "outside-agent-key.pem").stat().st_mode & 0o077 == 0  # the team's alone

    cohort = _week(competitor, frozen_ago=timedelta(minutes=1))
    agent.start(token)
    assert agent.child is not None
    log = agent.child.log_path
    try:
        # Its log, not the database: the test server's in-memory SQLite takes one at a time.
        wait_for(lambda: re.search(r"^decision \d+: ", log.read_text(), re.M), 60, "the agent's decision",
                 interval=0.2, children=(agent.child,))  # fmt: skip
    finally:
        agent.stop()
    decision = Decision.objects.get(entry__cohort=cohort, week=1, status=Decision.Status.DONE)
    assert decision.hold_reason != NO_SUBMISSION
    # The test server's in-memory SQLite answers a request 500 now and then (a table locked by
    # another of its threads): the agent retries, so there may be more than one row.
    subs = list(AgentSubmission.objects.filter(decision=decision))
    assert subs and all(s.signature and s.signature_verified is True for s in subs)
    assert {s.token_prefix for s in subs} == {agent.token_prefix}
    said = log.read_text()
    assert f"decision {decision.pk}: " in said and token not in said
    assert not AgentToken.objects.filter(competitor=competitor, revoked_at__isnull=True).exists()
    assert agent.record()["minutes_after_freeze"][0] >= 1  # frozen a minute before it started


def test_a_week_without_a_submission_fails_the_check(live_server):
    competitor = Competitor.objects.create(slug=SLUG, display_name="Outside", team="Team",
                                           kind=Competitor.Kind.OUTSIDE)  # fmt: skip
    cohort = _week(competitor, frozen_ago=WINDOW + timedelta(minutes=1))
    held = run_decision(cohort.entries.get().pk, 1)  # the weekly run, after the deadline
    assert (held.action, held.hold_reason) == ("HOLD", NO_SUBMISSION)
    run = SimpleNamespace(cohort_ids=[cohort.pk], end=clock.now(), base_url=live_server.url)
    check = check_outside_agent(run)
    assert not check.ok
    assert f"cohort {cohort.pk} week 1: HOLD {NO_SUBMISSION} (decision {held.pk})" in check.detail


@pytest.mark.parametrize(
    ("outcome", "decides"),
    [(AgentSubmission.Outcome.FINAL_INVALID, True), (AgentSubmission.Outcome.ACCEPTED, True),
     (AgentSubmission.Outcome.REFUSED, False), (AgentSubmission.Outcome.RECEIVED, False)],
)  # fmt: skip
def test_the_check_needs_a_submission_that_decided_the_week(live_server, outcome, decides):
    """Accepted, or invalid twice and held (late bets can meet stale quotes): the agent's own
    decision. A refusal alone ("already final") or a row left "received" is not."""
    competitor = Competitor.objects.create(slug=SLUG, display_name="Outside", team="Team",
                                           kind=Competitor.Kind.OUTSIDE)  # fmt: skip
    cohort = _week(competitor, frozen_ago=WINDOW + timedelta(minutes=1))
    decision = run_decision(cohort.entries.get().pk, 1)
    Decision.objects.filter(pk=decision.pk).update(hold_reason="invalid decision after one more try")
    AgentSubmission.objects.create(
        competitor=competitor, entry=decision.entry, week=1, decision=decision,
        received_at=clock.now(), token_prefix="arena_x", body=b"{}", body_bytes=2,
        signature="c2ln", signature_verified=True, outcome=outcome,
    )  # fmt: skip
    run = SimpleNamespace(cohort_ids=[cohort.pk], end=clock.now(), base_url=live_server.url)
    detail = check_outside_agent(run).detail
    missing = f"submission on decision {decision.pk}'s record"  # the check's complaint
    assert (missing not in detail) is decides, detail


def test_the_rehearsal_window_is_refused_outside_rehearsal_scope(tmp_path):
    env = {**os.environ, "ARENA_SCOPE": "live", "ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES": "240",
           "ARENA_VAR_DIR": str(tmp_path)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0
    assert "ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES is for ARENA_SCOPE=rehearsal only" in (
        done.stderr
    )


def test_the_rehearsal_window_applies_in_rehearsal_scope_only(settings):
    settings.ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES = 240
    settings.ARENA_SCOPE = "live"  # settings refuse this; the window refuses it as well
    assert window() == WINDOW == timedelta(minutes=30)
    settings.ARENA_SCOPE = "rehearsal"
    assert window() == timedelta(minutes=240)
