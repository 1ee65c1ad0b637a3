"""Fault: the broker (a real redis-server) stops and comes back while /healthz is asked.

A cached "ok" once answered for ten seconds after Redis stopped (and a cached 503 as long after
it came back). Proves: no answer says "ok" from a look older than FRESH_SECONDS (plus the short
wait for a running check), the stop is reported within a couple of seconds, and so is the
return.
"""

from __future__ import annotations

import time

import pytest

from arena import health
from simulations.rehearsal.procs import PrivateRedis
from tests.faults.conftest import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.django_db]

# What an operator is promised: a broker state at most a couple of seconds old. The check
# itself (a refused connection, a PING) takes milliseconds; the slack is a loaded machine's.
MAX_AGE_SECONDS = 2.5
SLACK_SECONDS = 3.0


@pytest.fixture
def private_broker(tmp_path, monkeypatch):
    from arena.celery import app

    server = PrivateRedis(tmp_path).start()
    saved = app.conf.broker_url, app._pool, app.amqp._producer_pool
    app.conf.broker_url, app._pool, app.amqp._producer_pool = server.url, None, None
    monkeypatch.setattr(health, "broker_check", health.CachedCheck(health._broker_ok))
    yield server
    server.stop()
    app.conf.broker_url, app._pool, app.amqp._producer_pool = saved


def _watch(client, since: float, want: str, answers: list) -> bool:
    data = client.get("/healthz").json()
    answers.append((time.monotonic() - since, data["broker"], data["broker_checked_seconds_ago"]))
    return data["broker"] == want


def test_a_stopped_broker_is_never_reported_ok_from_an_old_check(client, private_broker):
    wait_until(lambda: _watch(client, 0, "ok", []), 15, "the broker reported ok")
    private_broker.stop()
    stopped, answers = time.monotonic(), []
    wait_until(lambda: _watch(client, stopped, "error", answers), 15, "the stop reported")
    stale = [(t, age) for t, state, age in answers if state == "ok" and age > MAX_AGE_SECONDS]
    assert not stale, answers  # every "ok" came from a fresh look
    assert answers[-1][0] < MAX_AGE_SECONDS + SLACK_SECONDS, answers

    private_broker.start()  # same port, as a restarted service
    back, answers = time.monotonic(), []
    wait_until(lambda: _watch(client, back, "ok", answers), 15, "the return reported")
    assert answers[-1][0] < MAX_AGE_SECONDS + SLACK_SECONDS, answers
