import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import override_settings

from arena.beat import FileLock


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user("ops", password="correct horse", is_staff=True)


def _login(client, password, ip="10.0.0.1", xff=None):
    extra = {"REMOTE_ADDR": ip}
    if xff:
        extra["HTTP_X_FORWARDED_FOR"] = xff
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": "ops", "password": password},
        **extra,
    )


def test_pages_carry_a_csp_that_forbids_inline_script(client, db):
    resp = client.get("/healthz")
    csp = resp["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in csp


def test_correct_password_logs_in(client, staff):
    resp = _login(client, "correct horse")
    assert resp.status_code == 302 and resp["Location"] == "/admin/"


@override_settings(ARENA_LOGIN_MAX_FAILURES=3)
def test_account_locks_after_repeated_failures_even_from_other_ips(client, staff):
    for i in range(3):
        assert _login(client, "wrong", ip=f"10.0.0.{i + 1}").status_code == 200
    # Locked: the right password from a fresh IP is refused too.
    resp = _login(client, "correct horse", ip="10.9.9.9")
    assert resp.status_code == 200
    assert "_auth_user_id" not in client.session


@override_settings(ARENA_LOGIN_MAX_FAILURES=3)
def test_ip_locks_after_failures_across_accounts(client, staff):
    get_user_model().objects.create_user("other", password="pw-other-123", is_staff=True)
    for name in ("a", "b", "c"):
        client.post("/admin/login/", {"username": name, "password": "x"}, REMOTE_ADDR="10.1.1.1")
    resp = client.post(
        "/admin/login/?next=/admin/",
        {"username": "other", "password": "pw-other-123"},
        REMOTE_ADDR="10.1.1.1",
    )
    assert resp.status_code == 200  # refused from that IP
    resp = client.post(
        "/admin/login/?next=/admin/",
        {"username": "other", "password": "pw-other-123"},
        REMOTE_ADDR="10.1.1.2",
    )
    assert resp.status_code == 302  # the account itself is fine


@override_settings(ARENA_LOGIN_MAX_FAILURES=2, ARENA_TRUSTED_PROXIES=0)
def test_forwarded_for_is_ignored_unless_proxies_are_configured(client, staff):
    # An attacker rotating X-Forwarded-For still hits the REMOTE_ADDR counter.
    _login(client, "wrong", ip="10.2.2.2", xff="1.1.1.1")
    _login(client, "wrong", ip="10.2.2.2", xff="2.2.2.2")
    cache.delete("login-fail:user:ops")
    resp = _login(client, "correct horse", ip="10.2.2.2", xff="3.3.3.3")
    assert resp.status_code == 200


@override_settings(ARENA_LOGIN_MAX_FAILURES=2, ARENA_TRUSTED_PROXIES=1)
def test_forwarded_for_is_used_behind_a_configured_proxy(client, staff):
    _login(client, "wrong", ip="10.3.3.3", xff="5.5.5.5")
    _login(client, "wrong", ip="10.3.3.3", xff="5.5.5.5")
    cache.delete("login-fail:user:ops")
    # Same proxy, different real client: not locked.
    assert _login(client, "correct horse", ip="10.3.3.3", xff="6.6.6.6").status_code == 302


def test_file_lock_admits_one_beat(tmp_path):
    first, second = FileLock(tmp_path / "beat.lock"), FileLock(tmp_path / "beat.lock")
    assert first.acquire()
    assert not second.acquire()
    first.release()
    assert second.acquire()
    second.release()


@pytest.mark.redis
def test_redis_lock_admits_one_beat_and_only_the_owner_refreshes():
    import os

    from arena.beat import RedisLock

    url = os.environ["REDIS_URL"]
    a = RedisLock(url, key="arena:test-beat-lock", ttl=30)
    b = RedisLock(url, key="arena:test-beat-lock", ttl=30)
    a.client.delete("arena:test-beat-lock")
    assert a.acquire()
    assert not b.acquire()
    assert a.refresh() and not b.refresh()
    b.release()  # not the owner: no effect
    assert not b.acquire()
    a.release()
    assert b.acquire()
    b.release()


def test_healthz_reports_database_broker_and_jobs(client, db):
    from django.utils import timezone

    from core.models import JobRun

    JobRun.objects.create(
        job="sync", status="ok", started_at=timezone.now(), finished_at=timezone.now()
    )
    data = client.get("/healthz").json()
    assert data["database"] == "ok" and data["broker"] == "ok"
    assert data["jobs"]["sync"]["late"] is False
    assert data["jobs"]["snapshot"]["late"] is True
    assert "password" not in str(data).lower()
