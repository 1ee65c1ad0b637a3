"""Fault: PostgreSQL drops the web server's connections (a restart, pg_terminate_backend).

A real gunicorn serves the site on the test database with persistent connections; the test
terminates every one of its backends between requests. Before: 8 of the next 60 requests
answered 500 (CONN_MAX_AGE without health checks reused the dead connections). Proves: every
request after the kill is answered normally.
"""

from __future__ import annotations

import sys
import urllib.request
import warnings

import pytest
from django.db import connection

from simulations.rehearsal.procs import free_port
from tests.factories import make_market
from tests.faults.conftest import Proc, child_env, release_database, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
PAGES = ["/markets/", "/api/markets", "/cohorts/", "/api/cohorts/"]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:  # not listening yet
        return 0


def _kill_backends() -> int:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cur.fetchone()[0]


def test_killed_database_connections_cost_no_request(tmp_path):
    make_market()
    port = free_port()
    env = child_env(tmp_path, "memory://", ARENA_PAGE_CACHE="0", DB_CONN_MAX_AGE="60")
    web = Proc("gunicorn", [sys.executable, "-m", "gunicorn", "arena.wsgi:application",
                            "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4"],
               env, tmp_path)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _get(base + "/markets/") == 200, 90, "gunicorn", procs=(web,))
        for _ in range(3):  # warm: each thread holds a persistent connection
            assert [_get(base + page) for page in PAGES] == [200] * len(PAGES)
        for round_ in range(3):
            assert _kill_backends() >= 1
            codes = [_get(base + page) for _ in range(5) for page in PAGES]
            assert codes == [200] * len(codes), (round_, codes, web.output()[-3000:])
    finally:
        web.stop()
        # This test kills backends, so a lingering one is its business: named, never a hung flush.
        if left := release_database():
            warnings.warn(f"backends still held locks after gunicorn stopped: {left}", stacklevel=1)
