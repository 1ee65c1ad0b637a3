"""The market admin: filters, search, and the audited resolve / void / reopen actions,
driven through the Django test client like a staff member would."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from markets.models import Market, ResolutionChange

pytestmark = pytest.mark.django_db
CHANGELIST = reverse("admin:markets_market_changelist")


def make_staff(username: str, *codenames: str):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="markets", codename__in=codenames)
    )
    return user


@pytest.fixture
def staff_client(client):
    user = make_staff("grace", "view_market", "change_market", "view_resolutionchange")
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def markets():
    return {
        "fed": Market.objects.create(
            external_id="516706",
            question="Fed rate hike in 2025?",
            slug="fed-rate-hike-in-2025",
            condition_id="0x4319",
            outcomes=["Yes", "No"],
            status="closed",
            volume=1000,
        ),
        "btc": Market.objects.create(
            external_id="800001",
            question="Bitcoin Up or Down?",
            outcomes=["Up", "Down"],
            status="closed",
            needs_attention=True,
            attention_reason="not found upstream (404)",
            volume=500,
        ),
    }


def run_action(client, action: str, markets: list[Market], **form):
    data = {"action": action, "_selected_action": [m.pk for m in markets], **form}
    return client.post(CHANGELIST, data, follow=bool(form.get("apply")))


def test_changelist_filters_and_search(staff_client, markets):
    page = staff_client.get(CHANGELIST, {"needs_attention__exact": "1"})
    assert page.status_code == 200
    assert "Bitcoin Up or Down?" in page.text and "Fed rate hike" not in page.text
    page = staff_client.get(CHANGELIST, {"q": "0x4319"})  # condition id search
    assert "Fed rate hike" in page.text and "Bitcoin" not in page.text
    page = staff_client.get(CHANGELIST, {"status__exact": "closed", "kind__exact": "binary"})
    assert "Fed rate hike" in page.text and "Bitcoin" in page.text


def test_resolve_action_asks_for_outcome_and_reason_first(staff_client, markets):
    page = run_action(staff_client, "resolve_to_outcome", [markets["fed"]])
    assert page.status_code == 200
    assert 'name="reason"' in page.text and 'name="outcome"' in page.text
    assert '<option value="Yes">' in page.text and '<option value="No">' in page.text
    assert 'name="apply"' in page.text
    assert not ResolutionChange.objects.exists()
    assert Market.objects.get(pk=markets["fed"].pk).status == "closed"


def test_resolve_action_records_change_visible_on_market(staff_client, markets):
    fed = markets["fed"]
    page = run_action(
        staff_client, "resolve_to_outcome", [fed], apply="1", outcome="No", reason="FOMC statement"
    )
    assert page.status_code == 200 and "Resolved 1 market(s)." in page.text

    fed.refresh_from_db()
    assert (fed.status, fed.resolved_outcome, fed.resolved_by) == ("resolved", "No", "admin")
    change = ResolutionChange.objects.get(market=fed)
    assert change.changed_by == staff_client.user and change.reason == "FOMC statement"
    assert (change.from_status, change.to_status, change.to_outcome) == ("closed", "resolved", "No")

    detail = staff_client.get(reverse("admin:markets_market_change", args=[fed.pk]))
    assert detail.status_code == 200
    assert "FOMC statement" in detail.text and "Resolved" in detail.text and "grace" in detail.text


def test_reason_is_required(staff_client, markets):
    page = run_action(staff_client, "void_markets", [markets["fed"]], apply="1", reason="   ")
    assert page.status_code == 200 and "required" in page.text
    assert not ResolutionChange.objects.exists()
    assert Market.objects.get(pk=markets["fed"].pk).status == "closed"


def test_void_action_on_several_markets(staff_client, markets):
    page = run_action(
        staff_client, "void_markets", list(markets.values()), apply="1", reason="event cancelled"
    )
    assert "Voided 2 market(s)." in page.text
    assert set(Market.objects.values_list("status", flat=True)) == {"void"}
    assert ResolutionChange.objects.filter(to_status="void", reason="event cancelled").count() == 2
    # Fixing the resolution also clears the attention flag it was raised for.
    assert not Market.objects.get(pk=markets["btc"].pk).needs_attention


def test_resolve_to_an_outcome_some_markets_lack(staff_client, markets):
    page = run_action(
        staff_client,
        "resolve_to_outcome",
        [markets["fed"], markets["btc"]],
        apply="1",
        outcome="Yes",
        reason="checked",
    )
    assert "Resolved 1 market(s)." in page.text and "1 market(s) not changed" in page.text
    assert Market.objects.get(pk=markets["fed"].pk).resolved_outcome == "Yes"
    assert Market.objects.get(pk=markets["btc"].pk).status == "closed"


def test_reopen_action(staff_client, markets):
    fed = markets["fed"]
    run_action(staff_client, "resolve_to_outcome", [fed], apply="1", outcome="Yes", reason="r1")
    page = run_action(
        staff_client, "reopen_markets", [fed], apply="1", status="closed", reason="wrong"
    )
    assert "Reopened 1 market(s)." in page.text
    fed.refresh_from_db()
    assert (fed.status, fed.resolved_outcome, fed.resolved_by) == ("closed", "", "")
    last = ResolutionChange.objects.filter(market=fed).first()  # newest first
    assert (last.from_status, last.from_outcome, last.to_status, last.reason) == (
        "resolved",
        "Yes",
        "closed",
        "wrong",
    )


def test_view_only_staff_cannot_run_actions(client, markets):
    client.force_login(make_staff("viewer", "view_market"))
    data = {
        "action": "void_markets",
        "_selected_action": [markets["fed"].pk],
        "apply": "1",
        "reason": "x",
    }
    client.post(CHANGELIST, data)
    assert not ResolutionChange.objects.exists()
    assert Market.objects.get(pk=markets["fed"].pk).status == "closed"


def test_resolution_change_admin_is_read_only(staff_client, markets):
    run_action(staff_client, "void_markets", [markets["fed"]], apply="1", reason="why not")
    page = staff_client.get(reverse("admin:markets_resolutionchange_changelist"))
    assert page.status_code == 200 and "why not" in page.text
    assert staff_client.get(reverse("admin:markets_resolutionchange_add")).status_code == 403
