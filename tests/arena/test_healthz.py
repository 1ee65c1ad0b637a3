"""Fault: the broker hangs (a listener that accepts and never answers) while /healthz is asked.

Before: every /healthz waited on the broker check (2-4 s with the broker down), was never
cached, and timed out under load. Proves: /healthz answers from the last check without waiting
on a slow one, says how old the broker result is, and picks up the result once it exists.
"""

from __future__ import annotations

import socket
import threading

import pytest

from arena import health
from tests.faults.conftest import wait_until


@pytest.fixture
def hanging_broker(monkeypatch):
    """A TCP listener that accepts connections and never says a word."""
    from arena.celery import app

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    saved = app.conf.broker_url, app._pool, app.amqp._producer_pool
    port = listener.getsockname()[1]
    app.conf.broker_url, app._pool, app.amqp._producer_pool = (
        f"redis://127.0.0.1:{port}/0",
        None,
        None,
    )
    monkeypatch.setattr(health, "broker_check", health.CachedCheck(health._broker_ok))
    yield
    app.conf.broker_url, app._pool, app.amqp._producer_pool = saved
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_healthz_does_not_wait_on_a_hanging_broker(client, db, hanging_broker):
    response = client.get("/healthz")
    # Answered while the broker check is still hanging in the background.
    assert health.broker_check.thread.is_alive()
    data = response.json()
    assert data["broker"] == "unknown"  # the first check of this process has not finished
    assert data["database"] == "ok"
    again = client.get("/healthz").json()  # still not waiting; still honest
    assert again["broker"] == "unknown"
    wait_until(lambda: not health.broker_check.thread.is_alive(), 10, "the broker check")
    response = client.get("/healthz")
    data = response.json()
    assert response.status_code == 503
    assert data["broker"] == "error" and data["broker_checked_seconds_ago"] is not None
