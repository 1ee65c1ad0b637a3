"""The Celery tasks (run in-process here; a real worker is exercised in test_celery_worker.py)
and the staff admin pages."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone

from cohorts import tasks
from cohorts.models import Cohort, Entry, LedgerEntry, Position, Settlement, Snapshot, Trade
from cohorts.services import BetOrder, execute_orders, week_start_for
from cohorts.settlement import settle_market
from core.models import JobRun
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_competitor, make_market

pytestmark = pytest.mark.django_db


def test_open_cohort_task_is_idempotent_and_recorded():
    make_competitor()
    first = tasks.open_cohort.apply().get()
    second = tasks.open_cohort.apply().get()
    assert first == second
    cohort = Cohort.objects.get()
    assert cohort.week_start == week_start_for(timezone.now())
    runs = JobRun.objects.filter(job="open_cohort").order_by("pk")
    assert [r.summary["created"] for r in runs] == [True, False]
    assert tasks.open_cohort.apply(args=["2026-11-15"]).get() != first


def test_snapshot_task_settles_snapshots_and_advances():
    _, (entry,) = make_cohort_with_entries(1, week_start=week_start_for(timezone.now()))
    m = make_market()
    execute_orders(entry, [BetOrder(m.pk, "Yes", Decimal("60"))], [], None)
    Market.objects.filter(pk=m.pk).update(status="void")  # the resolve job missed it
    assert tasks.snapshot.apply().get() == 1
    run = JobRun.objects.get(job="snapshot")
    assert run.status == "ok" and run.summary["settle"]["settled"] == 1
    assert Snapshot.objects.get(entry=entry).total == Decimal("10000.00")


def test_settle_tasks():
    _, (entry,) = make_cohort_with_entries(1)
    m = make_market()
    execute_orders(entry, [BetOrder(m.pk, "Yes", Decimal("60"))], [], None)
    Market.objects.filter(pk=m.pk).update(status="resolved", resolved_outcome="Yes")
    assert tasks.settle.apply(args=[m.pk]).get()["settled"] == 1
    Market.objects.filter(pk=m.pk).update(resolved_outcome="No")
    assert tasks.settle_pending.apply().get()["reversed"] == 1


def test_tasks_retry_transient_database_errors():
    for task in (tasks.open_cohort, tasks.snapshot, tasks.settle_pending, tasks.settle):
        assert OperationalError in task.autoretry_for and task.retry_backoff


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("staff", "staff@example.com", "pw-for-tests")
    client.force_login(user)
    return client


def test_admin_pages_render_and_money_is_read_only(staff_client):
    cohort, (entry,) = make_cohort_with_entries(1, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    m = make_market()
    execute_orders(entry, [BetOrder(m.pk, "Yes", Decimal("60"))], [], None)
    Market.objects.filter(pk=m.pk).update(status="resolved", resolved_outcome="Yes")
    settle_market(m)
    objects = {
        Cohort: cohort,
        Entry: entry,
        Position: Position.objects.get(),
        Trade: Trade.objects.get(),
        LedgerEntry: LedgerEntry.objects.first(),
        Settlement: Settlement.objects.get(),
    }
    for model, obj in objects.items():
        name = model._meta.model_name
        assert staff_client.get(reverse(f"admin:cohorts_{name}_changelist")).status_code == 200
        assert (
            staff_client.get(reverse(f"admin:cohorts_{name}_change", args=[obj.pk])).status_code
            == 200
        )
    # Audit rows cannot be added or changed by hand; an entry's cash is not an editable field.
    assert staff_client.get(reverse("admin:cohorts_ledgerentry_add")).status_code == 403
    response = staff_client.post(
        reverse("admin:cohorts_entry_change", args=[entry.pk]), {"cash": "999999"}
    )
    entry.refresh_from_db()
    assert entry.cash == Decimal("10000.00") - 60 + 100
    assert response.status_code in (200, 302)
