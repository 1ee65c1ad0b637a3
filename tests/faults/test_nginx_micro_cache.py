"""The shipped nginx front's micro-cache, in a real Debian nginx before a real gunicorn.

Anonymous GETs of public pages are served from nginx for a few seconds; a staff session and an
htmx partial never are (bypassed, and never stored), nor the paths the app never caches. One
client's exports beyond a small burst are refused by nginx itself.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from django.contrib.auth import get_user_model

from simulations.rehearsal.procs import free_port
from tests.faults.conftest import Proc, child_env, wait_until
from tests.faults.test_slow_clients import NGINX, _get, nginx_front

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
EXPORT_BURST = 10  # the shipped configs' limit_req burst for /exports/


def _status(session: requests.Session, url: str, **headers) -> str:
    response = session.get(url, headers=headers, timeout=10)
    assert response.status_code == 200, (url, response.status_code)
    return response.headers.get("X-Micro-Cache", "")


def test_anonymous_pages_come_from_nginx_and_staff_and_partials_never_do(tmp_path):
    assert Path(NGINX).exists(), "nginx is not installed: apt-get install nginx (.ci/run does)"
    get_user_model().objects.create_superuser("editor", "e@example.org", "a long passphrase 1")
    gunicorn_port, front_port = free_port(), free_port()
    env = child_env(tmp_path, "memory://")
    web = Proc("gunicorn", [sys.executable, "-m", "gunicorn", "arena.wsgi:application",
                            "--bind", f"127.0.0.1:{gunicorn_port}", "--workers", "1",
                            "--threads", "4"], env, tmp_path)  # fmt: skip
    front = Proc("nginx", nginx_front(tmp_path, front_port, gunicorn_port), env, tmp_path)
    base = f"http://127.0.0.1:{front_port}"
    try:
        wait_until(
            lambda: _get(f"{base}/methodology/", timeout=5) == 200,
            90,
            "gunicorn behind nginx",
            procs=(web, front),
        )
        visitor = requests.Session()
        # An anonymous page is stored once, then served by nginx.
        statuses = [_status(visitor, f"{base}/") for _ in range(3)]
        assert statuses[-1] == "HIT", statuses
        page = visitor.get(f"{base}/", timeout=10).text
        assert "<html" in page

        # An htmx partial is bypassed and never stored: it is never the cached page, and the
        # cached page is never the partial.
        partial = {"HX-Request": "true", "HX-Target": "leaderboard-table"}
        for _ in range(2):
            got = visitor.get(f"{base}/", headers=partial, timeout=10)
            assert got.headers.get("X-Micro-Cache") == "BYPASS"
            assert "<html" not in got.text
        assert "<html" in visitor.get(f"{base}/", timeout=10).text

        # A staff session: logged in through the admin's form, every page bypasses nginx.
        staff = requests.Session()
        login = staff.get(f"{base}/admin/login/", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        done = staff.post(
            f"{base}/admin/login/?next=/admin/",
            data={"username": "editor", "password": "a long passphrase 1",
                  "csrfmiddlewaretoken": token, "next": "/admin/"},
            headers={"Referer": f"{base}/admin/login/"},
            timeout=10,
        )  # fmt: skip
        assert done.status_code == 200 and "sessionid" in staff.cookies, done.status_code
        for path in ("/", "/", "/methodology/", "/methodology/"):
            assert _status(staff, f"{base}{path}") == "BYPASS", path
        # The admin itself is never stored, for anyone.
        assert staff.get(f"{base}/admin/", timeout=10).headers.get("X-Micro-Cache") == "BYPASS"

        # The anonymous copy is unaffected by the staff visits (still the anonymous page).
        assert _status(visitor, f"{base}/methodology/") in ("MISS", "HIT", "EXPIRED")
        assert _status(visitor, f"{base}/methodology/") == "HIT"

        # One client's exports beyond the burst, all at once, are refused by nginx itself (no
        # X-Micro-Cache: the app never saw them) and say when to come back; its pages are not
        # counted against it.
        def export(i: int) -> requests.Response:
            url = f"{base}/exports/trades.csv?limit=1&until=2031-01-{i % 28 + 1:02d}"
            return requests.get(url, timeout=30)

        with ThreadPoolExecutor(3 * EXPORT_BURST) as pool:
            answers = list(pool.map(export, range(3 * EXPORT_BURST)))
        assert {a.status_code for a in answers} <= {200, 429}
        by_nginx = [a for a in answers if a.status_code == 429 and "X-Micro-Cache" not in a.headers]
        assert len(by_nginx) >= EXPORT_BURST, [a.status_code for a in answers]
        assert all(a.headers.get("Retry-After") == "5" for a in by_nginx)
        assert all(_status(visitor, f"{base}/methodology/") for _ in range(EXPORT_BURST + 5))
    finally:
        front.stop()
        web.stop()
