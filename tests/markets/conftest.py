"""Clients for the fake Gamma server (`gamma` and `gamma_settings` are in tests/conftest.py)."""

import pytest

from markets.gamma import GammaClient


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays the client asked for (recorded instead of slept)."""
    return []


@pytest.fixture
def gamma_client(gamma, sleeps) -> GammaClient:
    return GammaClient(gamma.url, timeout=0.5, retries=3, sleep=sleeps.append)
