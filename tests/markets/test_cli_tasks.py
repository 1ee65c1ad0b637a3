"""The `arena sync-markets` / `arena resolve` verbs and the Celery tasks, end to end against
the fake Gamma server (settings point the default client at it)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from core.models import JobRun
from markets import tasks
from markets.models import Market, PricePoint
from tests.fakes.gamma_server import bulk_markets, example_resolved_binary

pytestmark = pytest.mark.django_db


def arena(*args) -> str:
    out = StringIO()
    call_command("arena", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_sync_markets_verb(gamma, gamma_settings):
    gamma.add(*bulk_markets(12))
    out = arena("sync-markets", "--limit", "5")
    assert "synced 5 markets (5 new) from 1 pages" in out and "10 price points" in out
    assert Market.objects.count() == 5 and PricePoint.objects.count() == 10


def test_sync_markets_default_limit_comes_from_settings(gamma, gamma_settings):
    gamma_settings.ARENA_SYNC_LIMIT = 3
    gamma.add(*bulk_markets(12))
    arena("sync-markets")
    assert Market.objects.count() == 3


def test_sync_markets_rejects_a_bad_limit(gamma, gamma_settings):
    with pytest.raises(CommandError, match="at least 1"):
        arena("sync-markets", "--limit", "0")


def test_sync_markets_reports_gamma_failure_in_one_line(gamma, gamma_settings):
    gamma.fail(status=500)  # retries are off in gamma_settings
    with pytest.raises(CommandError) as err:
        arena("sync-markets", "--limit", "5")
    assert "HTTP 500" in str(err.value) and "\n" not in str(err.value)
    assert not Market.objects.exists()


def test_resolve_verb(gamma, gamma_settings):
    raw = example_resolved_binary()
    gamma.add(dict(raw, closed=False))
    arena("sync-markets", "--limit", "5")
    gamma.markets = [raw]
    out = arena("resolve")
    assert "checked 1 markets" in out and "1 resolved" in out
    assert Market.objects.get().resolved_outcome == "No"


def test_sync_task_runs_the_service_and_records_the_run(gamma, gamma_settings):
    gamma.add(*bulk_markets(6))
    result = tasks.sync_markets.apply(kwargs={"limit": 4})
    assert result.successful() and result.get()["stored"] == 4
    assert Market.objects.count() == 4
    run = JobRun.objects.get(job="sync")  # what /healthz reads
    assert run.status == JobRun.Status.OK and run.summary["stored"] == 4


def test_resolve_task_runs_the_service(gamma, gamma_settings):
    raw = example_resolved_binary()
    gamma.add(dict(raw, closed=False))
    tasks.sync_markets.apply(kwargs={"limit": 4})
    gamma.markets = [raw]
    result = tasks.resolve_markets.apply()
    assert result.successful() and result.get()["resolved"] == 1


def test_task_retries_a_transient_failure_then_succeeds(gamma, gamma_settings):
    # apply() runs Celery's retries eagerly (no countdown), so we can count the attempts.
    gamma.add(*bulk_markets(6))
    gamma.fail(status=503)
    result = tasks.sync_markets.apply(kwargs={"limit": 4})
    assert result.successful() and Market.objects.count() == 4
    assert len(gamma.requests_to("/markets/keyset")) == 2


def test_task_gives_up_after_max_retries(gamma, gamma_settings):
    gamma.fail(status=503, times=10)
    result = tasks.sync_markets.apply(kwargs={"limit": 4})
    assert result.state == "FAILURE"
    assert len(gamma.requests_to("/markets/keyset")) == 1 + tasks.RETRY["max_retries"]
    assert set(JobRun.objects.values_list("status", flat=True)) == {JobRun.Status.FAILED}


def test_task_does_not_retry_our_own_mistakes(gamma, gamma_settings):
    gamma.fail(status=422)
    result = tasks.sync_markets.apply(kwargs={"limit": 4})
    assert result.state == "FAILURE"
    assert len(gamma.requests_to("/markets/keyset")) == 1


def test_a_warning_repeated_per_market_is_said_once_with_a_count(gamma, gamma_settings, caplog):
    gamma.add(*bulk_markets(6))
    for market in gamma.markets[:4]:
        gamma.update(market["id"], outcomePrices='["NaN", "NaN"]')
    err = StringIO()
    call_command("arena", "sync-markets", "--limit", "6", stdout=StringIO(), stderr=err)
    rejected = [r for r in caplog.records if "prices rejected" in r.getMessage()]
    assert len(rejected) == 1  # the first of the four, in full
    assert rejected[0].external_id == gamma.markets[0]["id"] and "NaN" in rejected[0].reason
    summary = err.getvalue().strip().splitlines()
    assert summary == ["4 warnings in all like: prices rejected"]
