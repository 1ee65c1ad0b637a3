"""The shipped configs give the page cache and the Celery broker separate Redis servers with
separate limits: a flood of cached pages evicts old pages and never fills the broker, and a full
broker refuses new messages instead of dropping queued ones."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings

from simulations.rehearsal.procs import free_port
from tests.faults.conftest import wait_until

ROOT = Path(django_settings.BASE_DIR)
PAGE = b"x" * 30_000  # a rendered page is 20-30 kB


def _compose_command(service: str) -> list[str]:
    text = (ROOT / "docker-compose.yml").read_text()
    block = text.split(f"\n  {service}:\n", 1)[1]
    command = re.search(r"command: (\[.*?\])", block, re.S)
    assert command, service
    return json.loads(command.group(1))


def _compose_url(name: str) -> str:
    found = re.search(rf"{name}: (redis://\S+)", (ROOT / "docker-compose.yml").read_text())
    assert found, name
    return found.group(1)


class _Redis:
    def __init__(self, args: list[str], workdir: Path):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [*args, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir),
             "--pidfile", str(workdir / "redis.pid"), "--logfile", "", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.client = redis.Redis(port=self.port, socket_timeout=2)
        wait_until(self._ping, 10, "redis-server")

    def _ping(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def servers(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is needed to check the shipped Redis configs", pytrace=False)
    started: list[_Redis] = []

    def start(args: list[str]) -> _Redis:
        workdir = tmp_path / str(len(started))
        workdir.mkdir()
        started.append(_Redis(args, workdir))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def test_compose_gives_cache_and_broker_their_own_servers():
    broker, cache = _compose_url("CELERY_BROKER_URL"), _compose_url("REDIS_CACHE_URL")
    assert broker.split("/")[2] != cache.split("/")[2]  # two hosts, not two databases of one
    assert "noeviction" in _compose_command("redis")
    assert "allkeys-lru" in _compose_command("cache")


@pytest.mark.parametrize("source", ["compose", "single-host"])
def test_a_flood_of_pages_stays_within_the_cache_limit(servers, source, settings):
    from django.core.cache import caches

    args = (
        _compose_command("cache")
        if source == "compose"
        else ["redis-server", str(ROOT / "deploy" / "redis" / "redis-cache.conf")]
    )
    server = servers([*args, "--maxmemory", "4mb"])  # the shipped policy, a test-sized limit
    assert server.client.config_get("maxmemory-policy")["maxmemory-policy"] == "allkeys-lru"
    settings.CACHES = {
        "default": {
            "BACKEND": "arena.cache_backend.ResilientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{server.port}/0",
        }
    }
    cache = caches["default"]
    for n in range(400):  # 12 MB of pages into a 4 MB cache
        cache.set(f"arena:page:GET:/markets/?q={n}", PAGE, 120)
        assert cache.available, n  # never an out-of-memory error (the breaker would open)
    info = server.client.info("memory")
    assert info["used_memory"] <= 4 * 1024 * 1024 + 512 * 1024
    assert server.client.info("stats")["evicted_keys"] > 0
    assert cache.get("arena:page:GET:/markets/?q=399") == PAGE  # the newest page is kept


@pytest.mark.parametrize("source", ["compose", "single-host"])
def test_a_full_broker_refuses_rather_than_evicts(servers, source):
    if source == "compose":
        args = _compose_command("redis")
    else:
        limits = (ROOT / "deploy" / "redis" / "redis-broker.conf").read_text()
        args = ["redis-server"]
        for line in limits.splitlines():
            if line.strip() and not line.startswith("#"):
                name, value = line.split(None, 1)
                args += [f"--{name}", value.strip()]
    server = servers([*args, "--maxmemory", "2mb"])
    assert server.client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    queued = [f"task-{n}".encode() * 2000 for n in range(2000)]
    with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
        for message in queued:
            server.client.lpush("celery", message)
    kept = server.client.llen("celery")
    assert kept > 0 and server.client.lindex("celery", -1) == queued[0]  # nothing dropped
