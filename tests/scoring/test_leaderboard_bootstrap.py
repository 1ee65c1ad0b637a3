"""The leaderboard's matrix form of the paired market bootstrap against metrics.bootstrap_ci."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring import metrics
from scoring.compute import cluster_bootstrap_ratio_ci


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 60), st.integers(1, 5))
def test_one_competitor_matches_metrics_bootstrap_ci(seed, n_markets, per_market):
    rng = np.random.default_rng(seed)
    market = np.repeat(rng.permutation(n_markets) * 7 + 3, per_market)  # ids, not 0..n-1
    loss = rng.random(market.size)
    (lo, hi), = cluster_bootstrap_ratio_ci(
        np.zeros(market.size, dtype=np.int64), market, [(loss, np.ones(market.size))], 1, n_boot=300
    )  # fmt: skip
    ref_lo, ref_hi = metrics.bootstrap_ci(loss, n=300, groups=market)
    assert lo[0] == pytest.approx(ref_lo, abs=1e-12) and hi[0] == pytest.approx(ref_hi, abs=1e-12)


def test_draws_are_shared_by_all_competitors():
    rng = np.random.default_rng(3)
    market = np.tile(np.arange(40), 2)
    row = np.repeat([0, 1], 40)
    loss_a = rng.random(40)
    loss = np.concatenate([loss_a, loss_a + 0.1])  # b is a everywhere worse by exactly 0.1
    (lo, hi), = cluster_bootstrap_ratio_ci(row, market, [(loss, np.ones(80))], 2, n_boot=500)  # fmt: skip
    # The same markets in every resample: b's interval is a's shifted by exactly 0.1.
    assert lo[1] - lo[0] == pytest.approx(0.1) and hi[1] - hi[0] == pytest.approx(0.1)


def test_weights_leave_out_forecasts_and_empty_rows_get_none():
    market = np.array([1, 2, 3, 4])
    values = np.array([0.2, 0.4, np.nan, 0.9])
    weights = np.array([1.0, 1.0, 1.0, 0.0])  # NaN and zero weight: not in the statistic
    row = np.zeros(4, dtype=np.int64)
    (lo, hi), = cluster_bootstrap_ratio_ci(row, market, [(values, weights)], 2, n_boot=200)  # fmt: skip
    assert 0.2 - 1e-12 <= lo[0] <= hi[0] <= 0.4 + 1e-12  # a resample of one market: its mean
    assert np.isnan(lo[1]) and np.isnan(hi[1])  # a competitor without forecasts: no interval
