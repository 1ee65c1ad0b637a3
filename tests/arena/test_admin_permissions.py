"""Every staff path checks the permission its change needs.

The walk takes every action of every registered ModelAdmin and every custom admin view
(whatever `get_urls` adds, and the attention page) and sends each, GET and POST, with data that
would apply it, as a view-only staff user and as a staff user without permissions. Each must be
refused with no side effect: no row changed (a re-run marks a decision retryable and the next
catch-up calls the model again), no admin log, and no page-cache token moved. A superuser doing
the same changes rows, so the comparison can fail.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from axes.models import AccessAttempt
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from agents.models import LineupProposal, LineupReview
from cohorts.models import Decision
from cohorts.services import BetOrder, execute_orders
from core import clock
from core.versions import DATA_KEY, SCORES_KEY, VALUES_KEY
from markets.admin import CORRECTIONS
from tests.factories import make_cohort_with_entries, make_market

pytestmark = pytest.mark.django_db(transaction=True)
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)
STANDARD_VIEWS = ("_changelist", "_add", "_history", "_delete", "_change")
# What the POSTs carry, so a missing check would really apply the change.
FORM = {"post": "yes", "apply": "1", "outcome": "Yes", "reason": "walk", "status": "open"}


@pytest.fixture
def world(settings):
    settings.ARENA_PAGE_CACHE = True
    cache.clear()
    cohort, (entry,) = make_cohort_with_entries(1, week_start=SUNDAY)
    market = make_market()
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("60"))], [], None)
    decision = Decision.objects.create(
        entry=entry, week=1, status=Decision.Status.FAILED, claimed_at=clock.now(), error="x"
    )
    AccessAttempt.objects.create(
        username="someone", ip_address="10.0.0.1", user_agent="t", get_data="", post_data="",
        http_accept="", path_info="/admin/login/", failures_since_start=9,
    )  # fmt: skip
    review = LineupReview.objects.create(week_start=SUNDAY.date(), started_at=SUNDAY)
    proposal = LineupProposal.objects.create(
        review=review, kind=LineupProposal.Kind.NEW_MODEL, catalog="openrouter",
        model_id="vendor/new-model", name="New model", context_length=128_000,
        proposed_at=SUNDAY,
    )  # fmt: skip
    Client().get("/markets/")  # the page cache holds a page and its tokens
    return {"decision_id": decision.pk, "market_id": market.pk, "proposal_id": proposal.pk}


def _staff(username: str, *, view_only: bool) -> Client:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username, password="pw-walk-123", is_staff=True)
    if view_only:
        user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.force_login(user)
    return client


def _state() -> dict:
    """Every row of every model (sessions aside: logging in writes one), and the cache tokens."""
    rows = {
        model._meta.label: sorted(repr(sorted(r.items())) for r in model.objects.values())
        for model in apps.get_models()
        if model._meta.label != "sessions.Session"
    }
    return {"rows": rows, "tokens": cache.get_many([DATA_KEY, VALUES_KEY, SCORES_KEY])}


def _actions() -> list[tuple[str, str, list[int]]]:
    """(changelist URL, action name, every pk) for every action of every registered admin."""
    walked = []
    for model, model_admin in admin.site._registry.items():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        pks = list(model.objects.values_list("pk", flat=True))
        for _func, name, _label in model_admin._get_base_actions():
            walked.append((url, name, pks))
    return walked


def _custom_views(world: dict) -> list[str]:
    """Every URL a ModelAdmin adds beyond Django's own, filled in with this world's rows."""
    urls = [reverse("admin-attention")]
    for model_admin in admin.site._registry.values():
        for pattern in model_admin.get_urls():
            name = pattern.name or ""
            if not name or name.endswith(STANDARD_VIEWS):
                continue
            params = set(pattern.pattern.converters)
            variants = [{}]
            if "action" in params:
                variants = [{"action": action} for action, _ in CORRECTIONS]
            for variant in variants:
                kwargs = {p: world[p] for p in params if p != "action"} | variant
                urls.append(reverse(f"admin:{name}", kwargs=kwargs))
    return urls


def _post_action(client: Client, url: str, name: str, pks: list[int]):
    return client.post(url, {"action": name, "_selected_action": pks, **FORM})


def test_the_walk_reaches_every_change_the_admin_offers(world):
    names = {name for _, name, _ in _actions()}
    assert {"rerun", "resolve_to_outcome", "void_markets", "reopen_markets", "unlock"} <= names
    assert "delete_selected" in names
    views = _custom_views(world)
    assert any("/rerun/" in v for v in views) and any("/lineupproposal/" in v for v in views)
    # Each correction (resolve, void, reopen) has its page and its preview, and the result
    # page polls for the score run that follows.
    assert sum("/correct/" in v for v in views) == 7


@pytest.mark.parametrize("view_only", [True, False], ids=["view-only", "no-permission"])
def test_staff_without_the_change_permission_change_nothing(world, view_only):
    client = _staff("walker", view_only=view_only)
    before = _state()
    for url, name, pks in _actions():
        response = _post_action(client, url, name, pks)
        assert response.status_code in (200, 302, 403), (name, response.status_code)
        assert _state() == before, f"action {name} at {url} changed something"
    for url in _custom_views(world):
        for method in (client.get, client.post):
            response = method(url, FORM)
            # A read-only page stays readable to view-only staff; a POST-only view refuses a
            # GET before any check (405).
            expected = {200} if view_only and url.endswith("/attention/") else {403, 405}
            assert response.status_code in expected, (method, url, response.status_code)
            assert _state() == before, f"{url} changed something"


def test_a_superuser_does_change_what_the_walk_protects(world):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("root", password="pw-walk-123")
    client = Client()
    client.force_login(user)
    before = _state()
    url = reverse("admin:cohorts_decision_changelist")
    _post_action(client, url, "rerun", [world["decision_id"]])
    after = _state()
    assert Decision.objects.get(pk=world["decision_id"]).status == Decision.Status.RETRYABLE
    assert after["rows"] != before["rows"] and after["tokens"] != before["tokens"]


def test_a_post_refused_for_its_csrf_token_leaves_the_cache(world):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("root", password="pw-walk-123")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    before = _state()
    url = reverse("admin:cohorts_decision_changelist")
    response = _post_action(client, url, "rerun", [world["decision_id"]])
    assert response.status_code == 403
    assert _state() == before
