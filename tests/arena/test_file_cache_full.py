"""The file cache (one machine, no Redis) fails open like the Redis one: a full or unwritable
var/ costs speed, never a 500, and never serves a page older than the last write."""

import errno
import logging
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from django.core.cache import cache

from core.versions import data_changed
from markets.models import Market
from tests.site.conftest import World, build_arena

pytestmark = pytest.mark.django_db(transaction=True)
LOGGER = "arena.cache_backend"


@pytest.fixture
def pages(db):
    world = World()
    cohort = build_arena(world, n_competitors=2)
    market = world.markets[0]
    decision = world.decisions[0]
    return [
        "/?range=1W",
        "/cohorts/",
        f"/cohorts/{cohort.pk}/",
        f"/markets/{market.pk}/",
        "/markets/?q=event",
        f"/decisions/{decision.pk}/",
    ]


def _use_file_cache(settings, location: Path) -> None:
    settings.ARENA_PAGE_CACHE = True
    settings.CACHES = {
        "default": {
            "BACKEND": "arena.cache_backend.ResilientFileBasedCache",
            "LOCATION": str(location),
        }
    }


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 64 kB filesystem (tmpfs; the test runs as root, as ./run test does in CI)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 1024)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC  # the disk is really full
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_serves_every_page_fresh_and_logs_once(
    client, settings, tiny_disk, pages, caplog
):
    _use_file_cache(settings, tiny_disk / "cache")
    cache.clear()
    for path in pages:
        assert client.get(path)["X-Cache"] == "miss"
    assert client.get("/cohorts/")["X-Cache"] == "hit"  # the cache works until the disk fills
    filler = _fill(tiny_disk)
    # A write while the disk is full: its token cannot be stored.
    Market.objects.update(question="Renamed event, disk full?")
    data_changed()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            for path in pages:
                response = client.get(path)
                assert response.status_code == 200, path
                # Each freed file lets a small write through now and then (a hit is then of
                # this version); with no token stored the page renders uncached (no header).
                # Never the previous version, never "stale".
                assert response.get("X-Cache") in (None, "miss", "hit"), path
                if "markets" in path:
                    assert b"Renamed event, disk full?" in response.content, path
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1 and "No space left" in warnings[0].getMessage()
    filler.unlink()  # room again: cached again
    client.get("/cohorts/")
    assert client.get("/cohorts/")["X-Cache"] == "hit"


def test_an_unusable_cache_directory_serves_pages(client, settings, tmp_path, pages, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    # Root ignores permission bits, so the refusal comes from the filesystem's structure.
    _use_file_cache(settings, blocker / "cache")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for path in pages:
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.get("X-Cache") is None  # rendered uncached, as with Redis down
    assert [r for r in caplog.records if r.name == LOGGER]
    assert cache.add("k", 1) is False and cache.get("k") is None and cache.delete("k") is False


def test_an_unreadable_cache_file_is_a_miss(settings, tmp_path):
    _use_file_cache(settings, tmp_path / "cache")
    cache.set("page", "content", 60)
    [stored] = list((tmp_path / "cache").glob("*.djcache"))
    stored.write_bytes(stored.read_bytes()[:-5])  # cut short: zlib cannot finish it
    assert cache.get("page", "default") == "default"
    key = uuid.uuid4().hex
    assert cache.add(key, 1) is True and cache.get(key) == 1
    assert os.listdir(tmp_path / "cache")


def _every_public_route(world: World, cohort) -> dict[str, list[str]]:
    """One or more paths for each named route of web/urls.py, filled from the world."""
    from web.exports.files import FORMATS, SEALS, WHATS

    entry, market, decision = world.entries[0], world.markets[0], world.decisions[0]
    return {
        "home": ["/", "/?range=1W"],
        "cohort-list": ["/cohorts/"],
        "cohort-detail": [f"/cohorts/{cohort.pk}/"],
        "entry-detail": [f"/cohorts/{cohort.pk}/entries/{entry.competitor.slug}/"],
        "competitor-list": ["/competitors/"],
        "competitor-detail": [f"/competitors/{entry.competitor.slug}/"],
        "market-list": ["/markets/", "/markets/?q=event"],
        "market-detail": [f"/markets/{market.pk}/"],
        "decision-detail": [f"/decisions/{decision.pk}/"],
        "methodology": ["/methodology/"],
        "methodology-spec": ["/methodology/spec.md", "/methodology/spec.md?download=1"],
        "method": ["/method/"],
        "method-file": ["/method/verification", "/method/verification.md"],
        "api-openapi": ["/api/openapi.json"],
        # The agent API answers only a token: anonymous, its one-line 401 (405 for a GET of
        # the POST-only route), never a 500.
        "agent-week": ["/api/agent/v1/week"],
        "agent-decision": ["/api/agent/v1/decision"],
        "agent-decision-record": [f"/api/agent/v1/decisions/{decision.pk}"],
        "about": ["/about/"],
        "enter": ["/enter/"],
        "api-cohorts": ["/api/cohorts/"],
        "api-cohort": [f"/api/cohorts/{cohort.pk}"],
        "api-cohort-series": [f"/api/cohorts/{cohort.pk}/series"],
        "api-decision": [f"/api/decisions/{decision.pk}"],
        "api-leaderboard": ["/api/leaderboard"],
        "api-overview": ["/api/overview"],
        "api-markets": ["/api/markets"],
        "api-market": [f"/api/markets/{market.pk}"],
        "api-market-prices": [f"/api/markets/{market.pk}/prices"],
        "exports": ["/exports/"],
        "api-seals": ["/api/seals"],
        "export": [  # seals are JSON only (a CSV of them is a 400 by design)
            f"/exports/{what}.{fmt}"
            for what in WHATS
            for fmt in FORMATS
            if (what, fmt) != (SEALS, "csv")
        ],
    }


def _get(client, path: str):
    """A GET read to its end and closed, as a browser does (an export holds its slot until then)."""
    response = client.get(path)
    if response.streaming:
        b"".join(response.streaming_content)
    response.close()
    return response


def test_every_public_route_answers_with_the_cache_disk_full(client, settings, tiny_disk):
    from cohorts.seals import sign
    from web import urls

    # As deployed: the file cache lives in var/, with the signing key and the rest of var/.
    settings.VAR_DIR = tiny_disk
    sign._private_key.cache_clear()  # a key made by an earlier test lives elsewhere
    world = World()
    cohort = build_arena(world, n_competitors=2)
    routes = _every_public_route(world, cohort)
    # A route added to web/urls.py without a path here fails, rather than going unwalked.
    assert set(routes) == {p.name for p in urls.urlpatterns}
    paths = [path for group in routes.values() for path in group]
    _use_file_cache(settings, tiny_disk / "cache")
    cache.clear()
    _fill(tiny_disk)
    data_changed()
    for _ in range(2):
        for path in paths:
            wanted = {401, 405} if path.startswith("/api/agent/") else {200}
            assert _get(client, path).status_code in wanted, path
