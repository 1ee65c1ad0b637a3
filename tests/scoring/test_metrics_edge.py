"""Edge over the market: Diebold-Mariano, the information test, CLV and its stationary bootstrap."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from core.methodology import CONSTANTS as C
from scoring import metrics
from tests.scoring.reference import arch_bootstrap, stats, stattools
from tests.scoring.reference import statsmodels_api as sm
from tests.scoring.vectors import informed_vs_noisy_market

FAST = settings(max_examples=30, deadline=None)


def _ar1(n, phi, seed):
    rng = np.random.default_rng(seed)
    e = rng.normal(size=n)
    x = np.empty(n)
    x[0] = e[0]
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    return x


# --- Diebold-Mariano --------------------------------------------------------------------------


def _textbook_dm(d, lags, h):
    """Direct transcription of DM (1995) + HLN (1997), loops and all, for the cross-check."""
    n = len(d)
    mean = sum(d) / n
    gamma = [
        sum((d[t] - mean) * (d[t - k] - mean) for t in range(k, n)) / n for k in range(lags + 1)
    ]
    lrv = gamma[0] + 2 * sum((1 - k / (lags + 1)) * gamma[k] for k in range(1, lags + 1))
    dm = mean / math.sqrt(lrv / n)
    stat = dm * math.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    return stat, 2 * stats.t.sf(abs(stat), n - 1)


def test_dm_matches_a_textbook_transcription_on_a_known_vector():
    loss_a = [0.30, 0.12, 0.45, 0.08, 0.27, 0.33, 0.05, 0.19, 0.41, 0.22, 0.16, 0.29]
    loss_b = [0.35, 0.20, 0.40, 0.15, 0.31, 0.36, 0.12, 0.18, 0.50, 0.30, 0.21, 0.28]
    d = [a - b for a, b in zip(loss_a, loss_b)]
    for h, lags in [(1, 0), (1, 2), (3, 2)]:
        stat, p = metrics.diebold_mariano(loss_a, loss_b, h=h, lags=lags)
        ref_stat, ref_p = _textbook_dm(d, lags, h)
        assert stat == pytest.approx(ref_stat, rel=1e-12)
        assert p == pytest.approx(ref_p, rel=1e-9)
    stat, p = metrics.diebold_mariano(loss_a, loss_b)
    assert stat < 0 and p < 0.05  # a's losses are lower on 10 of 12 forecasts


@FAST
@given(
    st.integers(10, 400),
    st.integers(1, 4),
    st.sampled_from(["rule", "h-1"]),
    st.integers(0, 2**32 - 1),
)
def test_dm_matches_statsmodels(n, h, which, seed):
    rng = np.random.default_rng(seed)
    loss_a = rng.random(n) ** 2
    loss_b = np.clip(loss_a + rng.normal(0.01, 0.1, n), 0, 1)
    lags = metrics.nw_bandwidth(n, h) if which == "rule" else h - 1
    ref = stattools.diebold_mariano_test(
        np.zeros(n), loss_a, loss_b, criterion=lambda y, f: f, lags=lags, harvey_adj=True, horizon=h
    )
    stat, p = metrics.diebold_mariano(loss_a, loss_b, h=h, lags=lags)
    assert stat == pytest.approx(ref.statistic, rel=1e-9, abs=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-12)


def test_dm_default_bandwidth_is_the_sealed_rule():
    assert C.dm_bandwidth_rule == "nw_floor_4(n/100)^(2/9)"
    assert metrics.nw_bandwidth(100) == 4
    assert metrics.nw_bandwidth(5000) == math.floor(4 * 50 ** (2 / 9))
    assert metrics.nw_bandwidth(5000, h=3, rule="h-1") == 2
    d_a, d_b = np.random.default_rng(1).random((2, 500))
    assert metrics.diebold_mariano(d_a, d_b) == metrics.diebold_mariano(
        d_a, d_b, lags=metrics.nw_bandwidth(500)
    )


def test_dm_safe_answers_on_degenerate_input():
    assert metrics.diebold_mariano([0.1, 0.2], [0.3, 0.1]) == (
        pytest.approx(math.nan, nan_ok=True),
        1.0,
    )
    same = np.random.default_rng(2).random(50)
    assert metrics.diebold_mariano(same, same) == (0.0, 1.0)
    stat, p = metrics.diebold_mariano(same + 0.1, same)  # constant difference: no variance
    assert math.isnan(stat) and p == 1.0
    # Pairs with a missing loss are dropped, never propagated.
    other = np.random.default_rng(3).random(50)
    gappy_a, gappy_b = np.append(same, np.nan), np.append(other, 0.5)
    assert metrics.diebold_mariano(gappy_a, gappy_b) == metrics.diebold_mariano(same, other)


def test_dm_matrix_with_bonferroni_levels():
    data = informed_vs_noisy_market(n=800, seed=11)
    o = data["outcome"]
    losses = {
        "informed": metrics.brier_loss(data["truth"], o),
        "market": metrics.brier_loss(data["market"], o),
        "copier": metrics.brier_loss(data["market"], o),
    }
    losses["copier"][:5] = np.nan  # the copier skipped a few markets
    rows = {(r["a"], r["b"]): r for r in metrics.dm_matrix(losses)}
    assert set(rows) == {("informed", "market"), ("informed", "copier"), ("market", "copier")}
    for r in rows.values():
        assert r["level"] == pytest.approx(C.dm_family_alpha / 3)
    win = rows[("informed", "market")]
    assert win["verdict"] == "a_better" and win["stat"] < 0 and win["p"] < win["level"]
    assert win["n"] == 800
    tie = rows[("market", "copier")]
    assert tie["verdict"] == "no_difference" and tie["p"] == 1.0 and tie["n"] == 795


# --- Market-information test ------------------------------------------------------------------


def _logit(p):
    p = np.clip(p, C.info_test_logit_clip, 1 - C.info_test_logit_clip)
    return np.log(p / (1 - p))


@settings(max_examples=15, deadline=None)
@given(st.integers(60, 400), st.floats(0.0, 0.3), st.integers(0, 2**32 - 1))
def test_information_test_matches_statsmodels_logit(n, model_noise, seed):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.05, 0.95, n)
    o = (rng.random(n) < truth).astype(float)
    market = np.clip(truth + rng.normal(0, 0.2, n), 0.0, 1.0)
    model = np.clip(truth + rng.normal(0, model_noise, n), 0.0, 1.0)
    res = metrics.market_information_test(o, market, model)
    X = np.column_stack([np.ones(n), _logit(market), _logit(model)])
    try:
        full = sm.Logit(o, X).fit(disp=0, maxiter=200)
        restricted = sm.Logit(o, X[:, :2]).fit(disp=0, maxiter=200)
    except Exception:  # statsmodels refuses perfect separation; ours must flag it instead
        assert not res["ok"]
        return
    if not res["ok"]:
        assert res["flag"] in {"separation", "no_convergence"} and res["lr_p"] == 1.0
        return
    lr = 2 * (full.llf - restricted.llf)
    assert res["lr_stat"] == pytest.approx(lr, rel=1e-6, abs=1e-8)
    assert res["lr_p"] == pytest.approx(stats.chi2.sf(lr, 1), rel=1e-5, abs=1e-12)
    np.testing.assert_allclose(list(res["coefs"].values()), full.params, rtol=1e-6, atol=1e-8)


def test_information_test_hc3_matches_the_sandwich_from_statsmodels_pieces():
    # statsmodels' GLM 'HC3' ignores leverage, so build HC3 from its GLM hat matrix instead.
    rng = np.random.default_rng(12)
    n = 300
    truth = rng.uniform(0.05, 0.95, n)
    o = (rng.random(n) < truth).astype(float)
    market = np.clip(truth + rng.normal(0, 0.2, n), 0.01, 0.99)
    model = np.clip(truth + rng.normal(0, 0.05, n), 0.01, 0.99)
    X = np.column_stack([np.ones(n), _logit(market), _logit(model)])
    glm = sm.GLM(o, X, family=sm.families.Binomial()).fit()
    leverage = glm.get_influence().hat_matrix_diag
    bread = glm.cov_params()
    scores = X * (glm.resid_response / (1 - leverage))[:, None]
    hc3 = bread @ (scores.T @ scores) @ bread
    res = metrics.market_information_test(o, market, model)
    assert res["ok"]
    assert res["wald_hc3_stat"] == pytest.approx(glm.params[2] ** 2 / hc3[2, 2], rel=1e-6)
    assert res["wald_p"] < 0.001 and res["lr_p"] < 0.001  # the model knows the truth


def test_information_test_finds_nothing_in_noise():
    rng = np.random.default_rng(13)
    n = 500
    truth = rng.uniform(0.05, 0.95, n)
    o = (rng.random(n) < truth).astype(float)
    noise_model = rng.uniform(0.05, 0.95, n)
    res = metrics.market_information_test(o, truth, noise_model)
    assert res["ok"] and res["lr_p"] > 0.01
    assert res["coefs"]["market"] == pytest.approx(1.0, abs=0.35)


@pytest.mark.parametrize(
    ("case", "flag"),
    [
        ("few", "too_few"),
        ("one_outcome", "one_outcome"),
        ("copy", "collinear"),
        ("oracle", "separation"),
    ],
)
def test_information_test_flags_degenerate_data_without_raising(case, flag):
    rng = np.random.default_rng(14)
    n = 5 if case == "few" else 200
    market = rng.uniform(0.1, 0.9, n)
    o = (rng.random(n) < market).astype(float)
    model = rng.uniform(0.1, 0.9, n)
    if case == "one_outcome":
        o[:] = 1.0
    if case == "copy":
        model = market.copy()
    if case == "oracle":  # says 0% / 100% and is always right: perfect separation
        model = o.copy()
    res = metrics.market_information_test(o, market, model)
    assert not res["ok"] and res["flag"] == flag
    assert res["lr_p"] == 1.0 and res["wald_p"] == 1.0 and math.isnan(res["lr_stat"])


# --- CLV and de-vigging -----------------------------------------------------------------------


def test_clv_forms():
    np.testing.assert_allclose(metrics.clv_prob([0.40, 0.70], [0.55, 0.60]), [0.15, -0.10])
    # NO side: bought NO at 0.30, YES closed at 0.60 -> NO closed at 0.40.
    np.testing.assert_allclose(metrics.clv_prob([0.30], [1 - 0.60]), [0.10])
    expected = math.log(0.55 / 0.45) - math.log(0.40 / 0.60)
    assert metrics.clv_logodds([0.40], [0.55])[0] == pytest.approx(expected)
    clipped = metrics.clv_logodds([0.5], [1.0])[0]
    assert clipped == pytest.approx(special.logit(1 - C.clv_logodds_clip))


@FAST
@given(st.lists(st.floats(0.01, 0.95), min_size=2, max_size=8), st.floats(1.0, 1.2))
def test_devig_methods(quotes, overround):
    q = np.asarray(quotes) / np.sum(quotes) * overround
    q = np.minimum(q, 0.999)
    mult = metrics.devig(q)
    np.testing.assert_allclose(mult.sum(), 1.0)
    np.testing.assert_allclose(mult / mult[0], q / q[0])  # ratios kept
    power = metrics.devig(q, method="power")
    np.testing.assert_allclose(power.sum(), 1.0, atol=1e-9)
    if q.sum() > 1.0 + 1e-9 and np.ptp(q) > 1e-3:
        # q^k with k > 1: the longshot loses a larger share than the favourite.
        lo, hi = np.argmin(q), np.argmax(q)
        assert power[lo] / mult[lo] < 1 < power[hi] / mult[hi] + 1e-9


def test_devig_fair_book_is_unchanged_and_rows_are_independent():
    fair = np.array([[0.2, 0.3, 0.5], [0.55, 0.55, 0.0]])
    out = metrics.devig(fair, method="power")
    np.testing.assert_allclose(out[0], fair[0], atol=1e-9)
    np.testing.assert_allclose(out[1], [0.5, 0.5, 0.0], atol=1e-9)


def test_naive_z_test_is_the_one_sample_t_statistic_with_normal_tail():
    x = np.random.default_rng(15).normal(0.01, 0.05, 120)
    z, p = metrics.clv_mean_ztest(x)
    assert z == pytest.approx(stats.ttest_1samp(x, 0.0).statistic)
    assert p == pytest.approx(stats.norm.sf(z))
    assert metrics.clv_mean_ztest([0.1]) == (pytest.approx(math.nan, nan_ok=True), 1.0)


# --- Stationary bootstrap ---------------------------------------------------------------------


def test_block_length_matches_arch():
    # arch normalises its lag correlations slightly differently (and falls back to M = m_max when
    # no insignificant run exists), so the choice of M can flip on borderline series; everywhere
    # else the two must agree to rounding. arch does not clip; we never go below 1.
    same = total = 0
    for n in (150, 400, 1000, 3000):
        for phi in (-0.4, 0.0, 0.3, 0.6, 0.8, 0.95):
            for seed in range(3):
                x = _ar1(n, phi, seed)
                theirs = max(float(arch_bootstrap.optimal_block_length(x).iloc[0, 0]), C.sb_min_block_length)
                same += metrics.optimal_block_length(x) == pytest.approx(theirs, rel=1e-9)
                total += 1
    assert same >= 0.9 * total


def test_block_length_grows_with_persistence():
    lengths = [metrics.optimal_block_length(_ar1(2000, phi, 3)) for phi in (0.0, 0.5, 0.9)]
    assert lengths[0] == pytest.approx(1.0, abs=1.5) and lengths[0] < lengths[1] < lengths[2]


def test_stationary_indices_are_wrapped_blocks():
    rng = np.random.default_rng(16)
    idx = metrics.stationary_bootstrap_indices(50, 200, 5.0, rng)
    assert idx.shape == (200, 50) and idx.min() >= 0 and idx.max() < 50
    continues = (idx[:, 1:] == (idx[:, :-1] + 1) % 50).mean()
    # A block continues with probability 1 - 1/5 (plus the rare random restart at the next index).
    assert continues == pytest.approx(0.8 + 0.2 / 50, abs=0.02)
    rotation = metrics.stationary_bootstrap_indices(20, 3, 1e12, rng)
    for row in rotation:
        np.testing.assert_array_equal(np.sort(row), np.arange(20))


def test_sharpe_bootstrap_reports_bias_corrected_intervals():
    x = np.random.default_rng(17).normal(0.02, 0.05, 300)
    res = metrics.stationary_bootstrap_sharpe(x, B=500, seed=1)
    assert res == metrics.stationary_bootstrap_sharpe(x, B=500, seed=1)
    assert res["sharpe"] == pytest.approx(x.mean() / x.std(ddof=1))
    assert res["sharpe_bc"] == pytest.approx(res["sharpe"] - res["bias"])
    lo90, hi90 = res["ci"][0.9]
    lo95, hi95 = res["ci"][0.95]
    assert lo95 < lo90 < res["sharpe_bc"] < hi90 < hi95
    # The interval is as wide as the sampling spread of a Sharpe ratio (about 1/sqrt(n)).
    assert hi95 - lo95 == pytest.approx(2 * 1.96 / math.sqrt(300), rel=0.3)
    expected = "GENUINE_EDGE" if lo95 > 0 else ("WEAK_EDGE" if lo90 > 0 else "NO_EDGE")
    assert res["label"] == expected


def test_sharpe_bootstrap_degenerate_series():
    few = metrics.stationary_bootstrap_sharpe([0.1, 0.2, 0.3])
    assert few["label"] == "NOT_TESTED" and few["flag"] == "too_few"
    flat = metrics.stationary_bootstrap_sharpe(np.full(50, 0.02))
    assert flat["label"] == "NOT_TESTED" and flat["flag"] == "zero_variance"
    assert metrics.stationary_bootstrap_sharpe([])["n"] == 0


def test_clv_of_zeros_plus_one_ulp_noise_is_no_edge():
    # A replay's trades can have CLV exactly 0 apart from float noise of one unit in the last
    # place of 0.5 (1.1e-16). Comparing the spread with the mean (itself noise) would call zeros
    # plus six such values GENUINE_EDGE.
    ulp = float(np.nextafter(0.5, 1.0) - 0.5)
    assert ulp == pytest.approx(1.1102230246251565e-16)
    x = np.zeros(60)
    x[[3, 11, 19, 30, 42, 55]] = ulp
    sd = x.std(ddof=1)
    assert sd > 1e-12 * abs(x.mean())  # v1's relative guard lets this through
    res = metrics.stationary_bootstrap_sharpe(x)
    assert (res["label"], res["flag"]) == ("NOT_TESTED", "zero_variance")
    assert math.isnan(res["sharpe"])
    z, p = metrics.clv_mean_ztest(x)
    assert math.isnan(z) and p == 1.0
    # Real variance just above the absolute tolerance is judged, not waved through.
    judged = metrics.stationary_bootstrap_sharpe(np.tile([0.0, 0.001], 30), B=200)
    assert judged["flag"] is None


def test_bias_correction_shifts_every_replicate_by_b():
    # The interval is the percentile interval of the corrected replicates S* - b, i.e. shifted
    # by -b (v1: -2b). Recompute the replicates from the same seeded draws and compare.
    x = np.random.default_rng(21).normal(0.01, 0.05, 300)
    res = metrics.stationary_bootstrap_sharpe(x, B=400, seed=7, block_length=3.0)
    rng = np.random.default_rng(7)
    idx = metrics.stationary_bootstrap_indices(x.size, 400, 3.0, rng)
    draws = x[idx]
    reps = draws.mean(axis=1) / draws.std(axis=1, ddof=1)
    sharpe = x.mean() / x.std(ddof=1)
    bias = reps.mean() - sharpe
    assert res["bias"] == pytest.approx(bias, rel=1e-9)
    assert res["sharpe_bc"] == pytest.approx(sharpe - bias, rel=1e-9)
    for level in (0.9, 0.95):
        lo, hi = np.percentile(reps, [50 * (1 - level), 50 * (1 + level)])
        assert res["ci"][level] == pytest.approx((lo - bias, hi - bias), rel=1e-9)


# --- The seeded scenario: real information versus copying the market ---------------------------


def _trade_clv(p, market, close):
    """CLV of every trade the standard layer makes, one decision per market, side bought."""
    clv = []
    for i in range(p.size):
        (bet,) = metrics.kelly_stake([p[i]], [market[i]], 10_000)
        if bet.reason == "bet":
            clv.append(close[i] - market[i] if bet.side == "YES" else market[i] - close[i])
    return np.asarray(clv)


def test_informed_competitor_has_genuine_edge_and_a_copier_has_none():
    data = informed_vs_noisy_market()
    truth, market, close, o = data["truth"], data["market"], data["close"], data["outcome"]

    informed_clv = _trade_clv(truth, market, close)
    assert informed_clv.size > 200
    informed = metrics.stationary_bootstrap_sharpe(informed_clv, B=1000)
    assert informed["label"] == "GENUINE_EDGE"
    assert metrics.clv_mean_ztest(informed_clv)[1] < 0.001

    # The copier states the market price: the standard layer never finds an edge.
    assert all(b.reason == "no_edge" for b in metrics.kelly_stake(market, market, 10_000))
    # Forced to trade, it picks sides at random at the market price.
    side = data["rng"].random(market.size) < 0.5
    copier_clv = np.where(side, close - market, market - close)
    copier = metrics.stationary_bootstrap_sharpe(copier_clv, B=1000)
    assert copier["label"] == "NO_EDGE"
    assert abs(copier["sharpe_bc"]) < 0.15

    stat, p = metrics.diebold_mariano(metrics.brier_loss(truth, o), metrics.brier_loss(market, o))
    assert stat < 0 and p < 0.001
    info = metrics.market_information_test(o, market, truth)
    assert info["ok"] and info["lr_p"] < 0.001
    assert metrics.relative_log_score(truth, market, o) > 0
    assert metrics.relative_log_score(market, market, o) == 0
