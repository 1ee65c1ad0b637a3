"""The admin refuses, as form errors with the reason, the edits that would break a running
cohort: its status by hand (back or forth) and its decision weeks once week 1 has begun."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cohorts.models import Cohort, Universe
from cohorts.services import week_start_for
from tests.factories import make_cohort_with_entries

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("staff", "staff@example.com", "pw-for-tests")
    client.force_login(user)
    return client


def _url(cohort: Cohort) -> str:
    return reverse("admin:cohorts_cohort_change", args=[cohort.pk])


def _form_data(client, cohort: Cohort) -> dict:
    """What the change page would post back unchanged (its form and inline management forms)."""
    page = client.get(_url(cohort))
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        data.update({management.add_prefix(n): management[n].value() for n in management.fields})
        for sub in formset.forms:
            data.update({sub.add_prefix(n): sub[n].value() for n in sub.fields})
    return {k: "" if v is None else v for k, v in data.items()}


def _post(client, cohort: Cohort, **changes):
    data = {**_form_data(client, cohort), **changes}
    return client.post(_url(cohort), data)


def _running() -> Cohort:
    cohort, _ = make_cohort_with_entries(2, week_start=week_start_for(timezone.now()))
    return cohort


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (Cohort.Status.ACTIVE, Cohort.Status.TRACKING),
        (Cohort.Status.TRACKING, Cohort.Status.ACTIVE),
        (Cohort.Status.COMPLETED, Cohort.Status.ACTIVE),
        (Cohort.Status.ACTIVE, Cohort.Status.COMPLETED),
    ],
)
def test_the_status_of_a_running_cohort_is_refused_with_the_reason(staff_client, before, after):
    cohort = _running()
    Cohort.objects.filter(pk=cohort.pk).update(status=before)
    cohort.refresh_from_db()
    response = _post(staff_client, cohort, status=after)
    assert response.status_code == 200  # the form again, not a redirect and not a 500
    errors = response.context["adminform"].form.errors
    assert "set by the snapshot job" in " ".join(errors["status"])
    cohort.refresh_from_db()
    assert cohort.status == before


def test_decision_weeks_of_a_started_cohort_are_refused(staff_client):
    cohort = _running()
    response = _post(staff_client, cohort, decision_weeks=cohort.decision_weeks + 3)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["decision_weeks"]
    assert "cannot change once the cohort has started" in error
    assert Cohort.objects.get(pk=cohort.pk).decision_weeks == cohort.decision_weeks


def test_harmless_edits_of_a_running_cohort_are_saved(staff_client):
    cohort = _running()
    response = _post(staff_client, cohort, label="Week of the test", notes="checked")
    assert response.status_code == 302
    cohort.refresh_from_db()
    assert (cohort.label, cohort.notes) == ("Week of the test", "checked")


def test_a_cohort_that_has_not_started_can_still_be_set_up(staff_client):
    future = week_start_for(timezone.now()) + timedelta(weeks=2)
    cohort, _ = make_cohort_with_entries(1, week_start=future)
    assert _post(staff_client, cohort, decision_weeks=8).status_code == 302
    assert Cohort.objects.get(pk=cohort.pk).decision_weeks == 8


def test_a_simulated_cohort_runs_from_its_first_universe(staff_client):
    # A demo's week_start is on its own clock; what says it runs is its first frozen week.
    future = week_start_for(timezone.now()) + timedelta(weeks=5)
    cohort, _ = make_cohort_with_entries(1, week_start=future, kind=Cohort.Kind.DEMO)
    assert _post(staff_client, cohort, decision_weeks=6).status_code == 302
    Universe.objects.create(
        cohort=cohort, week=1, frozen_at=future, content_hash="ab" * 32, markets=[]
    )
    cohort.refresh_from_db()
    assert _post(staff_client, cohort, decision_weeks=7).status_code == 200
    assert Cohort.objects.get(pk=cohort.pk).decision_weeks == 6


@pytest.mark.parametrize("weeks", ["0", "-1", "99999", "abc"])
def test_impossible_decision_weeks_are_form_errors(staff_client, weeks):
    future = week_start_for(timezone.now()) + timedelta(weeks=2)
    cohort, _ = make_cohort_with_entries(1, week_start=future)
    response = _post(staff_client, cohort, decision_weeks=weeks)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["decision_weeks"]


def test_running_cohorts_cannot_be_added_or_deleted_here(staff_client):
    cohort = _running()
    assert staff_client.get(reverse("admin:cohorts_cohort_add")).status_code == 403
    delete = reverse("admin:cohorts_cohort_delete", args=[cohort.pk])
    assert staff_client.get(delete).status_code == 403
    assert staff_client.post(delete, {"post": "yes"}).status_code == 403
    changelist = staff_client.post(
        reverse("admin:cohorts_cohort_changelist"),
        {"action": "delete_selected", "_selected_action": [cohort.pk], "post": "yes"},
    )
    assert changelist.status_code in (200, 302)
    assert Cohort.objects.filter(pk=cohort.pk).exists()
