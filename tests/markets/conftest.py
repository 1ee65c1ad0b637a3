"""Fixtures for the markets tests: a real fake Gamma server on 127.0.0.1 and clients for it."""

import pytest

from markets.gamma import GammaClient
from tests.fakes.gamma_server import FakeGamma


@pytest.fixture
def gamma():
    with FakeGamma() as fake:
        yield fake


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays the client asked for (recorded instead of slept)."""
    return []


@pytest.fixture
def gamma_client(gamma, sleeps) -> GammaClient:
    return GammaClient(gamma.url, timeout=0.5, retries=3, sleep=sleeps.append)


@pytest.fixture
def gamma_settings(gamma, settings):
    """Point code that builds its own client (CLI, tasks) at the fake, without retries so a
    fault surfaces at once instead of sleeping through backoff."""
    settings.ARENA_GAMMA_URL = gamma.url
    settings.ARENA_HTTP_TIMEOUT = 2.0
    settings.ARENA_HTTP_RETRIES = 0
    return settings
