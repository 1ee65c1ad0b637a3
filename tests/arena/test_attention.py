from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.models import Competitor
from cohorts.models import Cohort, Decision, Entry
from markets.models import Market


@pytest.fixture
def staff_client(client, db):
    user = get_user_model().objects.create_user(
        "staff", password="pw-staff-123", is_staff=True, is_superuser=True
    )
    client.force_login(user)
    return client


def test_attention_page_is_staff_only(client, db):
    resp = client.get("/admin/attention/")
    assert resp.status_code == 302 and "/admin/login/" in resp["Location"]


def test_attention_page_lists_what_needs_a_human(staff_client):
    now = timezone.now()
    comp = Competitor.objects.create(slug="gpt", display_name="GPT", kind="llm", model_id="x/y")
    cohort = Cohort.objects.create(week_start=datetime(2026, 11, 15, tzinfo=UTC))
    # Cash that disagrees with the (empty) ledger is a violation doctor must report.
    entry = Entry.objects.create(cohort=cohort, competitor=comp, cash=Decimal("10000"))
    Decision.objects.create(
        entry=entry,
        week=1,
        status="failed",
        claimed_at=now,
        error="every LLM call failed: 401 No auth credentials found",
    )
    Market.objects.create(
        external_id="1",
        question="Stuck <b>market</b>?",
        status="closed",
        closed_time=now - timedelta(days=5),
        outcomes=["Yes", "No"],
    )
    Market.objects.create(
        external_id="2",
        question="Gone upstream?",
        needs_attention=True,
        upstream_missing=True,
        attention_reason="404 from Gamma",
        outcomes=["Yes", "No"],
    )
    Market.objects.create(
        external_id="3",
        question="Fresh close?",
        status="closed",
        closed_time=now - timedelta(hours=2),
        outcomes=["Yes", "No"],
    )

    html = staff_client.get("/admin/attention/").content.decode()

    assert "every LLM call failed" in html
    assert "Stuck &lt;b&gt;market&lt;/b&gt;?" in html  # escaped, as all market text
    assert "Gone upstream?" in html and "404 from Gamma" in html
    assert "Fresh close?" not in html  # closed two hours ago is normal, not stuck
    assert f"entry {entry.pk}: cash 10000.00 != ledger sum 0.00" in html


def test_attention_page_says_so_when_all_is_well(staff_client):
    html = staff_client.get("/admin/attention/").content.decode()
    assert "Nothing needs attention right now." in html


def test_attention_page_needs_view_permissions_not_just_staff(client, db):
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("intern", password="pw-intern-1", is_staff=True)
    client.force_login(user)
    assert client.get("/admin/attention/").status_code == 403  # staff with no permissions
    for codename in ("view_market", "view_decision", "view_jobrun"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(get_user_model().objects.get(pk=user.pk))  # fresh permission cache
    assert client.get("/admin/attention/").status_code == 200


def test_a_running_job_whose_process_is_gone_is_reaped_by_the_next_job(db):
    import subprocess
    import sys

    from core.jobs import job_run
    from core.models import JobRun

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    import socket

    orphan = JobRun.objects.create(job="sync", started_at=timezone.now(),
                                   owner=f"{socket.gethostname()}:{dead.stdout.strip()}:1")  # fmt: skip
    alive = JobRun.objects.create(job="sync", started_at=timezone.now(), owner="other-host:1:1")
    with job_run("snapshot"):
        pass
    orphan.refresh_from_db()
    alive.refresh_from_db()
    assert orphan.status == JobRun.Status.FAILED and "is gone" in orphan.error
    assert alive.status == JobRun.Status.RUNNING  # another host's, young: left alone


def test_decisions_waiting_out_an_outage_are_listed_but_need_no_human(staff_client):
    comp = Competitor.objects.create(slug="gpt", display_name="GPT", kind="llm", model_id="x/y")
    # A cohort not yet deciding, so no refused week is listed either.
    cohort = Cohort.objects.create(week_start=datetime(2030, 1, 6, tzinfo=UTC))
    # No cash and no ledger rows: nothing else on the page needs a human.
    entry = Entry.objects.create(cohort=cohort, competitor=comp, cash=Decimal("0"))
    other = Entry.objects.create(cohort=cohort, competitor=comp, replicate=2, cash=Decimal("0"))
    retry_at = datetime(2030, 1, 6, 0, 25, tzinfo=UTC)
    Decision.objects.create(
        entry=entry, week=1, status="retryable", retry_rounds=2, retry_after=retry_at,
        claimed_at=retry_at, error="HTTP 503: <i>upstream</i> overloaded",
    )  # fmt: skip
    # A database error's retryable row is reclaimed at once: no outage to show.
    Decision.objects.create(
        entry=other, week=1, status="retryable", claimed_at=retry_at, error="transient database"
    )

    page = staff_client.get("/admin/attention/").content.decode()

    section = page.split("Decisions waiting out a provider outage (1)")[1].split("<h2>")[0]
    assert "GPT" in section and "2030-01-06 00:25" in section and "<td>2</td>" in section
    assert "HTTP 503: &lt;i&gt;upstream&lt;/i&gt; overloaded" in section  # escaped
    assert "transient database" not in page
    # The catch-up retries them on its own: they are not counted as needing a human.
    assert "Nothing needs attention right now." in page


def test_outside_agents_yet_to_submit_are_listed_as_information(staff_client):
    from tests.cohorts.agent_helpers import outside_agents

    waiting, decided = outside_agents(slugs=("slow-agent", "quick-agent"), frozen_ago=20)
    waiting.competitor.team = "<b>Team</b>"
    waiting.competitor.save()
    body = decided.body(decided.valid_answer())
    answer = staff_client.generic("POST", "/api/agent/v1/decision", body,
                                  content_type="application/json", **decided.headers(body))  # fmt: skip
    assert answer.status_code == 201
    bad = waiting.body({"action": "HOLD"})
    assert staff_client.generic("POST", "/api/agent/v1/decision", bad,
                                content_type="application/json",
                                **waiting.headers(bad)).status_code == 422  # fmt: skip
    page = staff_client.get("/admin/attention/").content.decode()
    section = page.split("Outside agents yet to submit this week (1)")[1].split("<h2>")[0]
    assert "Slow Agent" in section and "Quick Agent" not in section
    assert "&lt;b&gt;Team&lt;/b&gt;" in section and "<b>Team</b>" not in section
    assert "<td>9</td>" in section  # whole minutes left of the 30-minute window
    assert "HTTP 422 invalid" in section
    assert "Nothing needs attention right now." in page  # information, not counted


def test_an_outside_week_past_its_deadline_is_no_longer_awaited(staff_client):
    from tests.cohorts.agent_helpers import outside_agent

    outside_agent(frozen_ago=31)
    page = staff_client.get("/admin/attention/").content.decode()
    assert "Outside agents yet to submit this week (0)" in page
