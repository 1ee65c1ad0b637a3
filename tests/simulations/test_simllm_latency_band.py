"""The simulated endpoint's flat latency band (for sizing workers) and the round bench's arithmetic."""

from __future__ import annotations

import time

import pytest
import requests

from bench.decision_round import dist, list_schedule
from simulations.simllm import SimulatedLLMServer
from simulations.simmodels import CHARACTERS

BODY = {
    "model": next(iter(CHARACTERS)),
    "messages": [{"role": "user", "content": "Say HOLD."}],
}


@pytest.mark.exclusive  # measures wall time: runs alone (tests/xdist_worker.py)
def test_every_call_waits_a_draw_in_the_band():
    with SimulatedLLMServer(latency_seconds=(0.3, 0.4)) as server:
        waits = []
        for _ in range(2):
            t0 = time.monotonic()
            response = requests.post(f"{server.base_url}/chat/completions", json=BODY, timeout=10)
            waits.append(time.monotonic() - t0)
            assert response.status_code == 200
    assert all(0.3 <= w < 2.0 for w in waits), waits


@pytest.mark.exclusive  # measures wall time: runs alone (tests/xdist_worker.py)
def test_without_a_band_the_scale_still_rules():
    with SimulatedLLMServer(latency_scale=0) as server:
        t0 = time.monotonic()
        response = requests.post(f"{server.base_url}/chat/completions", json=BODY, timeout=10)
        assert response.status_code == 200
        assert time.monotonic() - t0 < 0.3


@pytest.mark.parametrize("band", [(-1.0, 2.0), (3.0, 2.0)])
def test_a_band_must_be_low_then_high_and_not_negative(band):
    with pytest.raises(ValueError, match="latency_seconds"):
        SimulatedLLMServer(latency_seconds=band)


def test_list_scheduling_is_the_slot_bound():
    assert list_schedule([40.0] * 50, 2) == 1000.0
    assert list_schedule([40.0] * 50, 64) == 40.0
    assert list_schedule([10.0, 30.0, 20.0], 2) == 30.0
    summary = dist([1.0, 2.0, 3.0, 4.0])
    assert (summary["n"], summary["min"], summary["max"], summary["mean"]) == (4, 1.0, 4.0, 2.5)
