"""Staff work in one place (issue 27, items 12-14): the admin index points at what needs a
human, a correction starts from the market's own page and says what it will do and what it
did, a failed decision is re-run with one button and the public page says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from cohorts.models import Decision, LLMCall
from cohorts.services import BetOrder, execute_orders
from cohorts.settlement import settle_market
from markets.corrections import set_resolution
from markets.models import Market, ResolutionChange
from tests.factories import make_cohort_with_entries, make_market

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 16, 10, tzinfo=UTC)


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user(
        "ada", password="pw-staff-123", is_staff=True, is_superuser=True
    )
    client.force_login(user)
    return client


def test_admin_index_counts_and_links_the_attention_page(staff):
    Market.objects.create(
        external_id="f1", question="Flagged?", outcomes=["Yes", "No"], needs_attention=True
    )
    page = staff.get(reverse("admin:index")).content.decode()
    assert reverse("admin-attention") in page
    assert "Needs attention: 1" in page and "1 flagged markets" in page


def test_admin_index_for_staff_without_the_attention_permissions_leaves_it_out(client):
    user = get_user_model().objects.create_user("bob", password="pw-b-123", is_staff=True)
    client.force_login(user)
    page = client.get(reverse("admin:index"))
    assert page.status_code == 200 and reverse("admin-attention") not in page.content.decode()


@pytest.fixture
def settled_market():
    """A market resolved Yes and settled: one winner, one loser."""
    _, (a, b) = make_cohort_with_entries(2, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    m = make_market(prices={"Yes": "0.50", "No": "0.50"})
    execute_orders(a, [BetOrder(m.pk, "Yes", Decimal("100"))], [], None, at=T0)
    execute_orders(b, [BetOrder(m.pk, "No", Decimal("50"))], [], None, at=T0)
    set_resolution(m, status="resolved", outcome="Yes", reason="upstream said Yes")
    settle_market(m, at=T0)
    return m


def test_market_change_page_links_the_corrections_and_hides_delete(staff, settled_market):
    url = reverse("admin:markets_market_change", args=[settled_market.pk])
    page = staff.get(url).content.decode()
    for action in ("resolve_to_outcome", "void_markets", "reopen_markets"):
        assert reverse("admin:markets_market_correct", args=[settled_market.pk, action]) in page
    assert reverse("admin:markets_market_delete", args=[settled_market.pk]) not in page


def test_correction_from_the_market_page_previews_its_choice_and_states_its_result(
    staff, settled_market
):
    url = reverse("admin:markets_market_correct", args=[settled_market.pk, "resolve_to_outcome"])
    confirm = staff.get(url).content.decode()
    # The outcome starts empty, and the preview is fetched for the choice (htmx).
    assert '<option value="" selected>— choose —</option>' in confirm
    preview_url = reverse("admin:markets_market_correct_preview", args=["resolve_to_outcome"])
    assert f'hx-get="{preview_url}"' in confirm
    ids = {"_selected_action": settled_market.pk}
    empty = staff.get(preview_url, ids).content.decode()
    assert "Choose an outcome to see what it changes." in empty
    # The winner bought 200 shares at 0.50: $200.00 paid out, which the correction takes back;
    # the No side (100 shares at 0.50) is paid $100.00.
    no = staff.get(preview_url, {**ids, "outcome": "No"}).content.decode()
    assert "Reverses 2 settlements, taking back $200.00" in no
    assert "settles 2 positions, paying $100.00" in no
    assert ResolutionChange.objects.filter(market=settled_market).count() == 1  # a dry run
    same = staff.get(preview_url, {**ids, "outcome": "Yes"}).content.decode()
    assert "would not change: already resolved Yes" in same

    done = staff.post(url, {"apply": "1", "outcome": "No", "reason": "source misread"})
    text = done.content.decode()
    assert done.status_code == 200 and "Correction applied" in text
    assert "Resolved 1 market(s)." in text
    assert "reversed 2 settlements, took back $200.00" in text
    # The result repeats the preview's figures, from what was written.
    assert "Reverses 2 settlements, taking back $200.00" in text
    assert "settles 2 positions, paying $100.00" in text
    assert "Made at (wall clock, UTC)" in text and "(live: the wall clock)" in text
    settled_market.refresh_from_db()
    assert settled_market.resolved_outcome == "No"


def test_the_preview_refuses_bad_input_with_a_4xx(staff, settled_market):
    preview_url = reverse("admin:markets_market_correct_preview", args=["resolve_to_outcome"])
    assert staff.get(preview_url).status_code == 400
    assert staff.get(preview_url, {"_selected_action": "x"}).status_code == 400
    bad = reverse("admin:markets_market_correct_preview", args=["reopen_markets"])
    got = staff.get(bad, {"_selected_action": settled_market.pk, "status": "resolved"})
    assert got.status_code == 400
    nosuch = reverse("admin:markets_market_correct_preview", args=["drop_tables"])
    assert staff.get(nosuch, {"_selected_action": settled_market.pk}).status_code == 400


def test_the_preview_needs_the_permission_to_change_markets(client, settled_market):
    user = get_user_model().objects.create_user("viewer", password="pw-v-123", is_staff=True)
    client.force_login(user)
    preview_url = reverse("admin:markets_market_correct_preview", args=["void_markets"])
    assert client.get(preview_url, {"_selected_action": settled_market.pk}).status_code == 403


def test_unknown_correction_is_refused_not_a_500(staff, settled_market):
    url = reverse("admin:markets_market_correct", args=[settled_market.pk, "delete_everything"])
    assert staff.get(url).status_code == 403


def test_resolution_changes_read_as_words(staff, settled_market):
    change = ResolutionChange.objects.filter(market=settled_market).first()
    assert "object (" not in str(change)
    assert f"Market {settled_market.pk}: " in str(change) and "→ resolved Yes" in str(change)
    listing = staff.get(reverse("admin:markets_resolutionchange_changelist")).content.decode()
    assert "→ resolved Yes" in listing and "upstream said Yes" in listing


# --- re-running a failed decision ---------------------------------------------------------


@pytest.fixture
def eager_celery():
    from arena.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True  # the enqueued re-run runs in this process
    yield
    app.conf.task_always_eager = eager


@pytest.mark.model_server(retries=0)
def test_rerun_button_runs_a_failed_decision_again_and_the_public_page_says_so(
    staff, client, model_server, eager_celery, django_capture_on_commit_callbacks
):
    from cohorts.decisions.run import run_decision
    from cohorts.universe import freeze_universe
    from tests.agents.helpers import AT, answer, llm_competitor, make_cohort, make_markets
    from tests.fakes.openai_server import success, unauthorized

    make_markets(4)
    competitor = llm_competitor(model_server)
    cohort = make_cohort([competitor])
    universe = freeze_universe(cohort, 1, AT)
    entry = cohort.entries.get()
    model_server.enqueue(unauthorized())
    decision = run_decision(entry.pk, 1, AT)
    assert decision.status == Decision.Status.FAILED

    change_url = reverse("admin:cohorts_decision_change", args=[decision.pk])
    rerun_url = reverse("admin:cohorts_decision_rerun", args=[decision.pk])
    assert rerun_url in staff.get(change_url).content.decode()
    assert staff.get(rerun_url).status_code == 405  # a button, never a link

    # The operator fixed the key and moved the competitor to another model id meanwhile: a new
    # release, for cohorts opened after it; the re-run keeps the entry's release.
    competitor.model_id = "openai/gpt-test-2"
    competitor.save()
    model_server.enqueue(success(answer(universe)))
    with django_capture_on_commit_callbacks(execute=True):
        done = staff.post(rerun_url, follow=True)
    assert "sent to a worker to run again" in done.content.decode()
    decision.refresh_from_db()
    assert decision.status == Decision.Status.DONE
    assert list(LLMCall.objects.filter(decision=decision).values_list("attempt", flat=True)) == [
        1,
        2,
    ]
    assert rerun_url not in staff.get(change_url).content.decode()  # done: nothing to re-run

    public = client.get(reverse("decision-detail", args=[decision.pk])).content.decode()
    assert "Attempt 1" in public and "earlier run" in public
    assert "Attempt 2" in public and "re-run by staff" in public
    # Before releases the re-run called the competitor's new model id and the page said "model
    # id changed from openai/gpt-test to openai/gpt-test-2"; now it calls the entry's release.
    assert [c.request["model"] for c in LLMCall.objects.filter(decision=decision)] == [
        "openai/gpt-test",
        "openai/gpt-test",
    ]
    assert "model id changed" not in public and "release 1 of" in public


def test_rerun_of_a_finished_decision_changes_nothing(staff, settled_market):
    _, (entry,) = make_cohort_with_entries(1, week_start=datetime(2026, 11, 22, tzinfo=UTC))
    decision = Decision.objects.create(
        entry=entry, week=1, status=Decision.Status.DONE, claimed_at=T0 + timedelta(days=7)
    )
    done = staff.post(reverse("admin:cohorts_decision_rerun", args=[decision.pk]), follow=True)
    assert "only a failed or skipped decision can be re-run" in done.content.decode()
    decision.refresh_from_db()
    assert decision.status == Decision.Status.DONE


def test_the_bulk_rerun_says_per_decision_what_it_did_or_why_not(staff):
    _, (entry,) = make_cohort_with_entries(1, week_start=datetime(2026, 11, 22, tzinfo=UTC))
    at = T0 + timedelta(days=7)
    failed, done, running = (
        Decision.objects.create(entry=entry, week=week, status=status, claimed_at=at)
        for week, status in ((1, "failed"), (2, "done"), (3, "claimed"))
    )
    page = staff.post(
        reverse("admin:cohorts_decision_changelist"),
        {"action": "rerun", "_selected_action": [failed.pk, done.pk, running.pk]},
        follow=True,
    ).content.decode()
    assert f"1 decision(s) marked retryable, run again on the next `arena decide`: #{failed.pk}." in page
    assert f"1 not re-run (#{done.pk}): a done decision is never re-run" in page
    assert f"1 not re-run (#{running.pk}): running now" in page
    statuses = dict(Decision.objects.values_list("pk", "status"))
    assert statuses == {failed.pk: "retryable", done.pk: "done", running.pk: "claimed"}
