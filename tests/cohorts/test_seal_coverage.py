"""What the scores rest on besides the decisions is covered too: market outcomes, payouts and
cash, competitor identities, cohort states, and the week seals themselves. Each edit is made the
way an operator with database access would (raw SQL, a queryset update) and `arena verify`
names it; the same change made through the application is logged and verifies."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction

from agents.models import Competitor
from cohorts.decisions.run import decide
from cohorts.models import Cohort, Entry, LedgerEntry, Settlement, Trade
from cohorts.seals import state as seal_state
from cohorts.seals.models import EventLogEntry, StateRecord, WeekSeal
from cohorts.seals.verify import verify_database
from cohorts.services import advance_cohorts
from markets.models import Market
from markets.resolution import record_resolution
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets

pytestmark = pytest.mark.django_db


@pytest.fixture
def week():
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "market")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    return cohort


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _problem(cohort_id=None) -> str:
    report = verify_database(cohort_id)
    assert report.problems, "verify passed but should have failed"
    return report.problems[0]


def _traded_market(cohort) -> Market:
    return Trade.objects.filter(entry__cohort=cohort).first().position.market


def test_a_sealed_week_logs_its_root_the_cohort_state_and_each_identity(week):
    kinds = list(EventLogEntry.objects.filter(scope="live").values_list("kind", flat=True))
    assert kinds.count("seal") == 1 and kinds.count("cohort_state") == 1
    assert kinds.count("identity") == week.entries.count()
    seal = WeekSeal.objects.get(cohort=week)
    logged = EventLogEntry.objects.get(kind="seal")
    record = json.loads(logged.record_bytes())
    assert logged.ref == seal.pk and record["root"] == seal.root and record["week"] == 1
    identity = json.loads(EventLogEntry.objects.filter(kind="identity").first().record_bytes())
    assert set(identity["state"]) == {"slug", "display_name", "model_id", "provider", "endpoint"}
    assert verify_database().ok


@pytest.mark.parametrize("how", ["sql", "orm"])
def test_an_outcome_changed_outside_the_resolution_service_is_caught(week, how):
    market = _traded_market(week)
    record_resolution(market, status="resolved", outcome="Yes", by="admin", reason="settles")
    assert verify_database().ok
    if how == "sql":
        _sql("UPDATE markets_market SET resolved_outcome = %s WHERE id = %s", ["No", market.pk])
    else:
        Market.objects.filter(pk=market.pk).update(resolved_outcome="No")
    problem = _problem()
    assert f"market {market.pk}" in problem and "outside the application" in problem


def test_a_market_resolved_with_no_resolution_record_is_caught(week):
    market = _traded_market(week)
    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="No")
    problem = _problem()
    assert f"market {market.pk} is resolved 'No' with no resolution" in problem


def test_a_correction_through_the_service_verifies(week, admin_user):
    market = _traded_market(week)
    record_resolution(market, status="resolved", outcome="Yes", by="admin", reason="a")
    record_resolution(market, status="resolved", outcome="No", by="admin", reason="b")
    assert verify_database().ok


def test_money_outside_the_settlements_is_caught(week):
    market = _traded_market(week)
    record_resolution(market, status="resolved", outcome="Yes", by="admin", reason="settles")
    entry = Entry.objects.filter(cohort=week).order_by("id").first()
    _sql("UPDATE cohorts_entry SET cash = cash + 5 WHERE id = %s", [entry.pk])
    assert f"entry {entry.pk}: cash" in _problem()
    _sql("UPDATE cohorts_entry SET cash = cash - 5 WHERE id = %s", [entry.pk])
    assert verify_database().ok
    # A payout with no settlement, its cash moved to match the ledger.
    LedgerEntry.objects.create(entry=entry, kind="payout", amount=5, created_at=AT)
    Entry.objects.filter(pk=entry.pk).update(cash=entry.cash + 5)
    Entry.objects.filter(pk=entry.pk).update(
        cash=sum(entry.ledger.values_list("amount", flat=True))
    )
    assert "belongs to no logged settlement" in _problem()


def test_a_rewritten_payout_is_caught(week):
    market = _traded_market(week)
    record_resolution(market, status="resolved", outcome="Yes", by="admin", reason="settles")
    settlement = Settlement.objects.first()
    Settlement.objects.filter(pk=settlement.pk).update(payout=settlement.payout + 1)
    problem = _problem()
    assert f"settlement {settlement.pk}" in problem and "payout" in problem


@pytest.mark.parametrize("field, value", [("display_name", "Another model"), ("model_id", "x/y")])
def test_an_identity_edited_outside_the_application_is_caught(week, field, value):
    competitor = week.entries.order_by("id").first().competitor
    _sql(f"UPDATE agents_competitor SET {field} = %s WHERE id = %s", [value, competitor.pk])
    problem = _problem()
    assert f"competitor {competitor.pk} ({competitor.slug})" in problem
    assert (
        field.replace("base_url", "endpoint") in problem and "without an identity event" in problem
    )


def test_an_identity_changed_through_the_application_is_an_event(week):
    competitor = week.entries.order_by("id").first().competitor
    before = EventLogEntry.objects.filter(kind="identity").count()
    competitor.display_name = "Renamed by staff"
    competitor.save()  # the admin's path: post_save records the new identity
    assert EventLogEntry.objects.filter(kind="identity").count() == before + 1
    latest = StateRecord.objects.filter(subject="competitor", subject_id=competitor.pk).last()
    assert latest.state["display_name"] == "Renamed by staff"
    assert verify_database().ok
    # The identity shown at decision time stays in the log.
    first = StateRecord.objects.filter(subject="competitor", subject_id=competitor.pk).first()
    assert first.state["display_name"] != "Renamed by staff"
    Competitor.objects.filter(pk=competitor.pk).update(provider="elsewhere")
    assert "provider" in _problem()


def test_a_cohort_state_edited_outside_the_application_is_caught(week):
    _sql("UPDATE cohorts_cohort SET decision_weeks = %s WHERE id = %s", [1, week.pk])
    problem = _problem()
    assert f"cohort {week.pk}: decision_weeks is 1 (logged 5)" in problem


def test_a_status_moved_by_the_application_verifies_and_one_moved_by_sql_fails(week):
    advance_cohorts(week.week_start + timedelta(weeks=week.decision_weeks + 1))
    week.refresh_from_db()
    assert week.status in ("tracking", "completed")
    assert verify_database().ok
    _sql("UPDATE cohorts_cohort SET status = %s WHERE id = %s", ["active", week.pk])
    assert 'status is "active"' in _problem()


def test_a_cohort_saved_through_the_orm_is_recorded(week):
    Cohort.objects.get(pk=week.pk)
    week.decision_weeks = 4
    week.save()
    assert verify_database().ok
    seal_state.cohorts_changed([week.pk])  # nothing new: no second record
    assert StateRecord.objects.filter(subject="cohort").count() == 2


def _drop_delete_guards() -> None:
    """What an operator with full database access can do first."""
    if connection.vendor == "postgresql":
        _sql("SET LOCAL session_replication_role = replica", [])  # no triggers fire
    else:
        _sql("UPDATE arena_seal_guard SET wiping = 1", [])


def test_the_database_refuses_deleting_a_sealed_week(week):
    for table in ("cohorts_weekseal", "cohorts_decisiondigest", "cohorts_eventlogentry"):
        with pytest.raises(DatabaseError, match="never deleted"), transaction.atomic():
            column = "scope" if table == "cohorts_eventlogentry" else "cohort_id"
            value = "live" if table == "cohorts_eventlogentry" else week.pk
            _sql(f"DELETE FROM {table} WHERE {column} = %s", [value])


def test_a_deleted_sealed_week_is_a_failure_not_a_note(week):
    _drop_delete_guards()
    seal = WeekSeal.objects.get(cohort=week)
    _sql("DELETE FROM cohorts_decisiondigest WHERE cohort_id = %s", [week.pk])
    _sql("DELETE FROM cohorts_weekseal WHERE cohort_id = %s", [week.pk])
    problems = verify_database().problems
    assert problems[0].startswith(f"cohort {week.pk} week 1: no seal, but")
    assert any(f"seal {seal.pk} (chain #" in p and "the row is missing" in p for p in problems)


def test_a_week_erased_with_its_whole_log_is_still_a_failure_once_a_market_settled(week):
    record_resolution(
        _traded_market(week), status="resolved", outcome="Yes", by="admin", reason="x"
    )
    _drop_delete_guards()
    for table in ("cohorts_decisiondigest", "cohorts_weekseal", "cohorts_eventlogentry"):
        _sql(f"DELETE FROM {table}", [])
    problem = _problem()
    assert f"cohort {week.pk} week 1: no seal, but a market of its universe has settled" in problem


def test_a_competitor_renamed_in_the_admin_is_an_identity_event(week, admin_client):
    competitor = week.entries.order_by("id").first().competitor
    form = {
        "slug": competitor.slug,
        "display_name": "Renamed in the admin",
        "kind": competitor.kind,
        "family": competitor.family,
        "provider": competitor.provider,
        "model_id": competitor.model_id,
        "strategy": competitor.strategy,
        "params": json.dumps(competitor.params),
        "replicates": competitor.replicates,
        "active": "on",
        "endpoint": "",
        "notes": "",
    }
    url = f"/admin/agents/competitor/{competitor.pk}/change/"
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    logged = [
        json.loads(e.record_bytes())["state"]["display_name"]
        for e in EventLogEntry.objects.filter(kind="identity").order_by("seq")
    ]
    assert logged[-1] == "Renamed in the admin"
    assert verify_database().ok
