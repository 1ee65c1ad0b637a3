"""Proper scores, calibration, Murphy decomposition, bootstrap intervals, provisional sample size.

Checked three ways: published worked examples, identities that must hold exactly, and other
libraries (scikit-learn, properscoring, statsmodels) on random inputs.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from core.methodology import CONSTANTS as C
from scoring import metrics
from tests.scoring.reference import (
    properscoring,
    proportion,
    sklearn_calibration,
    sklearn_metrics,
    stats,
)
from tests.scoring.vectors import BRIER_RAIN_EXAMPLES, CONSTANTINOU_FENTON_2012

FAST = settings(max_examples=40, deadline=None)

probabilities = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def binary_forecasts(draw, min_size=1, max_size=200):
    n = draw(st.integers(min_size, max_size))
    p = draw(arrays(float, n, elements=probabilities))
    o = draw(arrays(np.int8, n, elements=st.integers(0, 1)))
    return p, o.astype(float)


@st.composite
def class_forecasts(draw, max_k=6, max_n=60):
    k = draw(st.integers(2, max_k))
    n = draw(st.integers(1, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(k, draw(st.sampled_from([0.3, 1.0, 5.0]))), size=n)
    o = rng.integers(0, k, size=n)
    return P, o


# --- Brier ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "o", "expected"), BRIER_RAIN_EXAMPLES)
def test_brier_single_forecast_examples(p, o, expected):
    assert metrics.brier([p], [o]) == pytest.approx(expected)


def test_brier_of_always_half_is_a_quarter_whatever_happens():
    o = np.array([0, 1, 1, 0, 1, 1, 1])
    assert metrics.brier(np.full(o.size, 0.5), o) == pytest.approx(0.25)


@FAST
@given(binary_forecasts())
def test_brier_matches_sklearn(data):
    p, o = data
    # sklearn halves only the multiclass score; the binary one is the plain mean (p - o)^2.
    expected = sklearn_metrics.brier_score_loss(o, p, labels=[0, 1])
    assert metrics.brier(p, o) == pytest.approx(expected, abs=1e-12)


@FAST
@given(binary_forecasts())
def test_brier_loss_matches_properscoring(data):
    p, o = data
    np.testing.assert_allclose(
        metrics.brier_loss(p, o), properscoring.brier_score(o, p), atol=1e-12
    )


@FAST
@given(binary_forecasts())
def test_multiclass_brier_of_two_classes_is_brier_1950_double(data):
    # Brier (1950) sums over both outcomes, so a binary question scores twice the modern number.
    p, o = data
    P = np.column_stack([1.0 - p, p])
    assert metrics.brier_multiclass(P, o.astype(int)) == pytest.approx(2 * metrics.brier(p, o))


@FAST
@given(class_forecasts())
def test_multiclass_brier_matches_sklearn_unhalved(data):
    P, o = data
    k = P.shape[1]
    halved = sklearn_metrics.brier_score_loss(o, P, labels=list(range(k)), scale_by_half=True)
    assert metrics.brier_multiclass(P, o) == pytest.approx(2 * halved, abs=1e-12)
    assert 0.0 <= metrics.brier_multiclass(P, o) <= 2.0


def test_multiclass_brier_worst_case_is_two():
    assert metrics.brier_multiclass([[1.0, 0.0, 0.0]], [2]) == pytest.approx(2.0)


def test_three_outcome_market_question_brier_by_hand():
    # One market with three outcomes (A, B, C), B happened, the forecast says (0.5, 0.3, 0.2):
    # Brier (1950) = 0.5^2 + 0.7^2 + 0.2^2 = 0.78 (range 0..2); the leaderboard's question
    # Brier is half of it, 0.39, and the market counts once (one-vs-rest counted it three
    # times, with items 0.25, 0.49 and 0.04).
    P, o = [[0.5, 0.3, 0.2]], [1]
    assert metrics.brier_multiclass(P, o) == pytest.approx(0.78)
    assert metrics.question_brier_loss(P, o).tolist() == pytest.approx([0.39])
    assert metrics.log_score(P, o) == pytest.approx(-math.log(0.3))


@FAST
@given(binary_forecasts())
def test_question_brier_of_a_binary_market_is_the_binary_brier(data):
    p, o = data
    P = np.column_stack([p, 1.0 - p])  # (Yes, No), o = 1 means Yes -> class 0
    np.testing.assert_allclose(
        metrics.question_brier_loss(P, (1 - o).astype(int)), metrics.brier_loss(p, o), atol=1e-12
    )


def test_complete_forecast_by_hand():
    nan = math.nan
    out = metrics.complete_forecast(
        [
            [0.5, nan, nan],  # the rest 0.5 split 3 : 1 like the shown prices
            [0.6, 0.6, nan],  # stated too much: normalised, the unstated gets nothing
            [0.2, nan, nan],  # no prices shown: the rest split evenly
        ],
        [[0.5, 0.3, 0.1], [0.5, 0.3, 0.1], [nan, nan, nan]],
    )
    np.testing.assert_allclose(out, [[0.5, 0.375, 0.125], [0.5, 0.5, 0.0], [0.2, 0.4, 0.4]])
    # Binary: one side stated -> its complement; both -> normalised; nothing -> uniform.
    binary = metrics.complete_forecast([[0.3, nan], [0.6, 0.3], [0.0, 0.0]])
    np.testing.assert_allclose(binary, [[0.3, 0.7], [2 / 3, 1 / 3], [0.5, 0.5]])


def test_stating_the_shown_price_is_the_market_reference_exactly():
    nan = math.nan
    shown = np.array([[0.52, 0.30, 0.21]])  # overround quotes
    stated = np.array([[0.52, nan, nan]])
    model = metrics.complete_forecast(stated, shown)
    market = metrics.complete_forecast(np.where(np.isnan(stated), nan, shown), shown)
    np.testing.assert_array_equal(model, market)
    assert model.sum() == pytest.approx(1.0)


def test_bad_class_index_is_refused():
    with pytest.raises(ValueError):
        metrics.brier_multiclass([[0.5, 0.5]], [2])
    with pytest.raises(ValueError):
        metrics.brier([0.5, 0.5], [1])


# --- Log score --------------------------------------------------------------------------------


def test_log_score_of_a_certain_wrong_forecast_is_capped_by_eps():
    assert metrics.log_score([0.0], [1]) == pytest.approx(-math.log(C.log_eps))
    assert metrics.log_score([1.0], [0]) == pytest.approx(-math.log(C.log_eps))
    assert metrics.log_score([1.0], [1]) == pytest.approx(-math.log(1 - C.log_eps))
    assert metrics.log_score([0.3], [1], eps=0.4) == pytest.approx(-math.log(0.4))


@FAST
@given(binary_forecasts())
def test_log_score_matches_sklearn_inside_the_clip_range(data):
    p, o = data
    p = np.clip(p, C.log_eps, 1 - C.log_eps)
    expected = sklearn_metrics.log_loss(o, p, labels=[0, 1])
    assert metrics.log_score(p, o) == pytest.approx(expected, rel=1e-9)


@FAST
@given(class_forecasts())
def test_multiclass_log_score_matches_sklearn(data):
    P, o = data
    P = np.clip(P, 2e-3, 1)  # after renormalising every entry stays inside [eps, 1 - eps]
    P = P / P.sum(axis=1, keepdims=True)
    expected = sklearn_metrics.log_loss(o, P, labels=list(range(P.shape[1])))
    assert metrics.log_score(P, o) == pytest.approx(expected, rel=1e-9)


# --- RPS --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("forecast", "observed", "published"), CONSTANTINOU_FENTON_2012)
def test_rps_reproduces_constantinou_fenton_2012(forecast, observed, published):
    # The paper prints four decimals.
    assert metrics.rps([forecast], [observed]) == pytest.approx(published, abs=5e-5)


@FAST
@given(class_forecasts())
def test_rps_times_k_minus_1_is_the_crps_of_the_class_distribution(data):
    # A forecast over classes 0..K-1 is a distribution on the integers; its CRPS (properscoring,
    # weighted ensemble) integrates (F - 1[o <= x])^2 over unit steps, i.e. (K - 1) * RPS.
    P, o = data
    members = np.tile(np.arange(P.shape[1], dtype=float), (P.shape[0], 1))
    crps = properscoring.crps_ensemble(o.astype(float), members, weights=P)
    np.testing.assert_allclose(metrics.rps_loss(P, o) * (P.shape[1] - 1), crps, atol=1e-10)


@FAST
@given(class_forecasts())
def test_rps_is_the_mean_brier_of_the_cumulative_events(data):
    P, o = data
    k = P.shape[1]
    cumulative = [
        metrics.brier_loss(P[:, : j + 1].sum(axis=1), (o <= j).astype(float)) for j in range(k - 1)
    ]
    np.testing.assert_allclose(metrics.rps_loss(P, o), np.mean(cumulative, axis=0), atol=1e-12)


def test_rps_rewards_near_misses_on_ordered_outcomes():
    # Same probability on the observed class; the rest nearer to it scores better.
    near = metrics.rps([[0.5, 0.5, 0.0]], [0])
    far = metrics.rps([[0.5, 0.0, 0.5]], [0])
    assert near < far


# --- Skill and market-relative ----------------------------------------------------------------


@FAST
@given(binary_forecasts(min_size=2))
def test_brier_skill_is_zero_for_the_reference_itself_and_one_for_perfection(data):
    p, o = data
    if metrics.brier(p, o) > 0:
        assert metrics.brier_skill(p, o, p) == pytest.approx(0.0)
        assert metrics.brier_skill(o, o, p) == pytest.approx(1.0)


def test_brier_skill_against_always_half():
    p, o = np.array([0.9, 0.2, 0.7]), np.array([1, 0, 0])
    expected = 1 - np.mean((p - o) ** 2) / 0.25
    assert metrics.brier_skill(p, o, 0.5) == pytest.approx(expected)


def test_brier_skill_is_nan_when_the_reference_is_perfect():
    assert math.isnan(metrics.brier_skill([0.4], [1], [1.0]))


def test_relative_log_score_examples():
    assert metrics.relative_log_score([0.8], [0.5], [1]) == pytest.approx(math.log(0.8 / 0.5))
    assert metrics.relative_log_score([0.8], [0.5], [0]) == pytest.approx(math.log(0.2 / 0.5))
    m = np.array([0.1, 0.6, 0.95])
    assert metrics.relative_log_score(m, m, [0, 1, 1]) == 0.0


def test_implied_confidence_brier_follows_forecaster_arena_v1():
    # A $50 winning YES bet from $10,000 cash is a 2% forecast: c = 50 / (0.25 * 10000).
    assert metrics.implied_confidence_brier([50], [10_000], [True], [1]) == pytest.approx(0.98**2)
    # A full-size NO bet that wins is a 0% YES forecast: perfect score.
    assert metrics.implied_confidence_brier([2500], [10_000], [False], [0]) == pytest.approx(0.0)
    # Bets above the cap count as certainty, not beyond it.
    assert metrics.implied_confidence_brier([9000], [10_000], [True], [0]) == pytest.approx(1.0)


# --- Murphy decomposition and calibration -----------------------------------------------------


def _assert_murphy_identity(d):
    assert d["rel"] - d["res"] + d["unc"] + d["wbv"] - d["wbc"] == pytest.approx(
        d["brier"], abs=1e-12
    )


@FAST
@given(binary_forecasts(), st.integers(1, 25))
def test_murphy_identity_holds_exactly(data, bins):
    p, o = data
    d = metrics.murphy(p, o, bins=bins)
    _assert_murphy_identity(d)
    assert d["brier"] == pytest.approx(metrics.brier(p, o))
    assert d["rel"] >= 0 and d["res"] >= 0 and d["wbv"] >= 0


def test_murphy_reduces_to_the_classic_three_terms_when_bins_hold_one_value():
    # Forecasts only at bin centres: within-bin terms vanish and REL/RES/UNC are Murphy (1973).
    rng = np.random.default_rng(7)
    p = rng.choice(np.arange(0.05, 1.0, 0.1), size=500)
    o = (rng.random(500) < p).astype(float)
    d = metrics.murphy(p, o)
    assert d["wbv"] == pytest.approx(0.0, abs=1e-15)
    assert d["wbc"] == pytest.approx(0.0, abs=1e-15)
    base = o.mean()
    rel = sum((p == v).sum() * (v - o[p == v].mean()) ** 2 for v in np.unique(p)) / p.size
    res = sum((p == v).sum() * (o[p == v].mean() - base) ** 2 for v in np.unique(p)) / p.size
    assert d["rel"] == pytest.approx(rel)
    assert d["res"] == pytest.approx(res)
    assert d["unc"] == pytest.approx(base * (1 - base))


@pytest.mark.parametrize("outcome", [0.0, 1.0])
def test_murphy_with_a_single_outcome_has_no_uncertainty(outcome):
    p = np.array([0.0, 0.2, 0.55, 1.0])
    d = metrics.murphy(p, np.full(4, outcome))
    assert d["unc"] == 0.0 and d["res"] == 0.0
    _assert_murphy_identity(d)


def test_murphy_single_forecast_and_empty_input():
    d = metrics.murphy([0.7], [1])
    _assert_murphy_identity(d)
    assert d["rel"] == pytest.approx(0.09)
    empty = metrics.murphy([], [])
    assert empty["n"] == 0 and math.isnan(empty["brier"])
    assert math.isnan(metrics.brier([], []))


def _off_edges(p, bins=10):
    # scikit-learn puts a value lying exactly on an interior edge in the lower bin, we put it in
    # the upper one ([lo, hi)); keep random values off the edges for the comparison.
    edges = np.linspace(0, 1, bins + 1)[1:-1]
    near = np.abs(p[:, None] - edges[None, :]).min(axis=1) < 1e-9
    return np.where(near, p + 2e-9, p)


@FAST
@given(binary_forecasts(min_size=5))
def test_calibration_matches_sklearn_on_filled_bins(data):
    p, o = data
    p = _off_edges(p)
    rows = metrics.calibration(p, o)
    filled = [r for r in rows if r["n"] > 0]
    prob_true, prob_pred = sklearn_calibration.calibration_curve(o, p, n_bins=10, strategy="uniform")
    np.testing.assert_allclose([r["freq"] for r in filled], prob_true, atol=1e-12)
    np.testing.assert_allclose([r["mean_p"] for r in filled], prob_pred, atol=1e-12)
    assert sum(r["n"] for r in rows) == p.size


def test_calibration_keeps_empty_bins_and_puts_one_in_the_last_bin():
    rows = metrics.calibration([0.0, 1.0, 1.0], [0, 1, 0])
    assert len(rows) == C.calibration_bins
    assert rows[0]["n"] == 1 and rows[-1]["n"] == 2
    assert rows[-1]["hi"] == 1.0 and rows[0]["lo"] == 0.0
    assert rows[5]["n"] == 0 and rows[5]["mean_p"] is None and rows[5]["freq"] is None


@FAST
@given(st.integers(0, 60), st.integers(1, 60))
def test_wilson_interval_matches_statsmodels(k, n):
    k = min(k, n)
    lo, hi = metrics.wilson_interval(k, n)
    ref_lo, ref_hi = proportion.proportion_confint(k, n, alpha=1 - C.ci_level, method="wilson")
    assert float(lo) == pytest.approx(ref_lo, abs=1e-12)
    assert float(hi) == pytest.approx(ref_hi, abs=1e-12)


@FAST
@given(binary_forecasts(min_size=1))
def test_ece_is_the_weighted_gap_of_the_calibration_table(data):
    p, o = data
    rows = [r for r in metrics.calibration(p, o) if r["n"]]
    expected = sum(r["n"] * abs(r["freq"] - r["mean_p"]) for r in rows) / p.size
    assert metrics.ece(p, o) == pytest.approx(expected, abs=1e-12)


def test_ece_of_a_perfectly_calibrated_table_is_zero():
    p = np.repeat([0.25, 0.75], 4)
    o = np.array([1, 0, 0, 0, 1, 1, 1, 0])
    assert metrics.ece(p, o) == pytest.approx(0.0)


# --- Bootstrap intervals ----------------------------------------------------------------------


def test_bootstrap_ci_is_reproducible_and_contains_the_mean():
    x = np.random.default_rng(3).normal(1.0, 2.0, size=300)
    lo, hi = metrics.bootstrap_ci(x)
    assert (lo, hi) == metrics.bootstrap_ci(x)
    assert lo < x.mean() < hi
    # Percentile interval of the mean: close to mean +- 1.96 sd / sqrt(n).
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert hi - lo == pytest.approx(2 * half, rel=0.15)


def test_bootstrap_resamples_markets_not_forecasts():
    # Two identical forecasts per market: resampling markets must give exactly the interval of
    # the per-market values (the same draws), however many forecasts each market has.
    y = np.random.default_rng(4).normal(size=80)
    doubled, groups = np.repeat(y, 2), np.repeat(np.arange(80), 2)
    assert metrics.bootstrap_ci(doubled, groups=groups) == metrics.bootstrap_ci(y)
    assert metrics.bootstrap_ci(doubled, np.median, n=300, groups=groups) == metrics.bootstrap_ci(
        y, np.median, n=300
    )
    # Treating the copies as independent would understate the uncertainty.
    lo_naive, hi_naive = metrics.bootstrap_ci(doubled)
    lo, hi = metrics.bootstrap_ci(y)
    assert hi_naive - lo_naive < 0.85 * (hi - lo)


def test_bootstrap_degenerate_inputs():
    assert all(math.isnan(v) for v in metrics.bootstrap_ci([]))
    assert metrics.bootstrap_ci([0.3]) == pytest.approx((0.3, 0.3))
    assert metrics.bootstrap_ci(np.full(10, 2.0)) == pytest.approx((2.0, 2.0))


def test_paired_diff_ci_uses_the_same_draws_for_both_competitors():
    rng = np.random.default_rng(5)
    common = rng.random(400)  # market difficulty shared by both competitors
    a = common + rng.normal(0, 0.02, 400)
    b = common + 0.01 + rng.normal(0, 0.02, 400)
    lo, hi = metrics.paired_bootstrap_diff_ci(a, b)
    assert (lo, hi) == metrics.bootstrap_ci(a - b)
    assert hi < 0  # a is reliably better by about 0.01
    # Unpaired intervals would be dominated by the shared difficulty and see nothing.
    a_lo, a_hi = metrics.bootstrap_ci(a)
    assert hi - lo < 0.2 * (a_hi - a_lo)
    shift = metrics.paired_bootstrap_diff_ci(b + 0.25, b)
    assert shift == pytest.approx((0.25, 0.25))


def test_paired_skill_ci():
    rng = np.random.default_rng(6)
    ref = rng.random(300) * 0.5
    loss = ref * 0.8
    lo, hi = metrics.paired_bootstrap_skill_ci(loss, ref)
    assert lo == pytest.approx(0.2) and hi == pytest.approx(0.2)
    noisy = ref * rng.uniform(0.6, 1.0, 300)
    lo, hi = metrics.paired_bootstrap_skill_ci(noisy, ref, groups=np.arange(300) // 3)
    assert lo < 1 - noisy.mean() / ref.mean() < hi


# --- Provisional badge sample size ------------------------------------------------------------


def test_required_n_follows_the_power_formula():
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    var = 0.134**2
    assert metrics.required_n_for_brier_edge(var) == math.ceil(z * z * var / 0.02**2)
    # The methodology's "about 350" corresponds to this spread of per-forecast differences.
    assert 330 <= metrics.required_n_for_brier_edge(var) <= 370
    assert metrics.required_n_for_brier_edge(var, delta=0.04) < metrics.required_n_for_brier_edge(
        var
    )
    assert metrics.required_n_for_brier_edge([0.1]) == math.inf
    assert metrics.required_n_for_brier_edge(np.zeros(10)) == 2


def test_provisional_threshold_is_the_specs_350_for_everybody():
    # Enough resolved forecasts to detect a 0.02 Brier edge, about 350 at 80% power.
    # ((1.959964 + 0.841621) * 0.1335 / 0.02)^2 = 349.7 -> 350, from sealed constants alone.
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert (C.provisional_brier_delta, C.provisional_power, C.provisional_alpha) == (
        0.02,
        0.8,
        0.05,
    )
    assert (z * C.provisional_reference_sd / 0.02) ** 2 == pytest.approx(349.71, abs=0.01)
    assert metrics.provisional_threshold() == 350


def test_required_n_gives_the_promised_power():
    # Simulate paired loss differences with a true mean of delta; at the computed n a two-sided
    # z test at alpha should reject about 80% of the time.
    rng = np.random.default_rng(8)
    diffs = rng.normal(0.02, 0.15, size=5000)
    n = int(metrics.required_n_for_brier_edge(diffs))
    samples = rng.normal(0.02, diffs.std(ddof=1), size=(600, n))
    z = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / math.sqrt(n))
    power = np.mean(np.abs(z) > stats.norm.ppf(0.975))
    assert 0.74 <= power <= 0.86
