"""Fixtures shared by the whole suite (registered by tests/conftest.py): the fakes of outside
services, which are real servers on 127.0.0.1 (tests/fakes/), and a demo database.

One place for each set-up: a test that needs the fake model server asks for `model_server`
(tuned with the `model_server` marker), the fake Gamma for `gamma` / `gamma_settings`, the small
offline demo for `small_demo` (or builds a variant from SMALL_DEMO).
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime

import pytest

# --- the fakes of outside services, shared by every test that talks to them -----------------


@pytest.fixture
def openai_server():
    """A bare fake OpenAI-compatible server (tests/fakes/openai_server.py) for tests that build
    their own client; nothing in settings points at it."""
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def model_server(request, settings, monkeypatch):
    """The fake model server as an operator would allow it: its URL in ARENA_LLM_ENDPOINTS, the
    key in the environment (tests.agents.helpers.KEY_ENV), the client's real retry path with
    small delays. A test or its module tunes it with the `model_server` marker, whose keywords
    go to tests.agents.helpers.fake_model_server (timeout, retries, backoff, max_backoff,
    extra_endpoints, default_responder)."""
    from tests.agents.helpers import fake_model_server

    marker = request.node.get_closest_marker("model_server")
    with fake_model_server(settings, monkeypatch, **(marker.kwargs if marker else {})) as fake:
        yield fake


@pytest.fixture
def gamma():
    """A fake Gamma (and CLOB history) server on 127.0.0.1 (tests/fakes/gamma_server.py)."""
    from tests.fakes.gamma_server import FakeGamma

    with FakeGamma() as fake:
        yield fake


@pytest.fixture
def gamma_settings(gamma, settings):
    """Point code that builds its own client (CLI, tasks) at the fake, without retries so a
    fault surfaces at once instead of sleeping through backoff."""
    settings.ARENA_GAMMA_URL = gamma.url
    settings.ARENA_HTTP_TIMEOUT = 2.0
    settings.ARENA_HTTP_RETRIES = 0
    return settings


# --- the simulated world as Gamma and CLOB -------------------------------------------------------

WORLD_START = datetime(2026, 10, 4, tzinfo=UTC)  # a Sunday: a world's first week opens here


@pytest.fixture
def world_clock():
    """The stand-in's clock, stopped at WORLD_START; tests move it."""
    from core.clock import SimulatedClock

    return SimulatedClock(WORLD_START)


@pytest.fixture
def world_server(world, world_clock):
    """The module's `world` (simulations.world.World) served as Gamma and CLOB answer, on
    world_clock's time (simulations.world_server.WorldServer, what a rehearsal runs)."""
    from simulations.world_server import WorldServer

    with WorldServer(world, world_clock) as standin:
        yield standin


# --- Redis ------------------------------------------------------------------------------------


@pytest.fixture
def redis_cache(settings):
    """The arena's Redis cache backend as the default cache, on REDIS_URL (under xdist, this
    worker's own Redis database: tests/xdist_worker.py), emptied before and after the test.
    Only for tests marked `redis`, which run where REDIS_URL is set."""
    from django.core.cache import caches

    settings.CACHES = {
        "default": {
            "BACKEND": "arena.cache_backend.ResilientRedisCache",
            "LOCATION": os.environ["REDIS_URL"],
        }
    }
    cache = caches["default"]
    cache.clear()
    yield cache
    cache.clear()


# --- a demo database ---------------------------------------------------------------------------

# Two weekly cohorts (Sundays 03-01 and 03-08) on 40 markets, the clock stopped on a Wednesday
# noon: the smallest demo with a settled week and one in play.
DEMO_NOW = datetime(2026, 3, 11, 12, 0, tzinfo=UTC)
SMALL_DEMO = {"weeks": 2, "seed": 7, "n_markets": 40, "now": DEMO_NOW, "latency_scale": 0}


@pytest.fixture
def small_demo(db, settings):
    """The offline demo (`arena demo`, simulations.demo.run_demo) at SMALL_DEMO's size in this
    test's database (built once per test run, then copied: tests/demo_snapshot.py); no API
    key, so the simulated models answer through the model path."""
    from tests import demo_snapshot

    settings.ARENA_LLM_API_KEY = ""
    return demo_snapshot.demo(**SMALL_DEMO)


def interruptible() -> None:
    """A child's `preexec_fn`: Ctrl-C (SIGINT) back to Python's default. A suite started in the
    background by a non-interactive shell inherits SIGINT ignored, and a Python started with it
    ignored never raises KeyboardInterrupt, so a test of "stops on Ctrl-C" would wait forever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
