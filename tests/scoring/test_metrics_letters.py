"""Group letters (compact letter display) and Holm's adjustment, against their definitions."""

import itertools
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring import metrics
from scoring.edge import holm_labels
from scoring.metrics.letters import letter_name
from scoring.stored import Clv
from tests.scoring.reference import multitest


@st.composite
def pair_sets(draw):
    n = draw(st.integers(min_value=0, max_value=9))
    pairs = list(itertools.combinations(range(n), 2))
    different = draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    return n, different


def _share(a: str, b: str) -> bool:
    return bool(set(a) & set(b))


@settings(max_examples=200, deadline=None)
@given(pair_sets())
def test_rows_share_a_letter_exactly_when_their_test_found_no_difference(case):
    n, different = case
    items = [f"c{i}" for i in range(n)]
    letters = metrics.compact_letters(items, [(items[a], items[b]) for a, b in different])
    assert set(letters) == set(items)
    assert all(letters[i] for i in items)  # every row carries at least one letter
    diff = set(different)
    for a, b in itertools.combinations(range(n), 2):
        # No pair sharing a letter differs significantly, and no undistinguished pair is split.
        assert _share(letters[items[a]], letters[items[b]]) == ((a, b) not in diff)
    if n:
        assert letters[items[0]].startswith("a")


def test_the_issue_chain_is_not_one_group():
    # Tiers chained: B not separable from A, C not from B, but A better than C. Letters say so.
    letters = metrics.compact_letters(["A", "B", "C"], [("A", "C")])
    assert letters == {"A": "a", "B": "ab", "C": "b"}
    assert metrics.compact_letters(["A", "B"], []) == {"A": "a", "B": "a"}
    assert metrics.compact_letters(["A", "B"], [("B", "A")]) == {"A": "a", "B": "b"}
    # Pairs naming rows that are not ranked (unscored) are ignored.
    assert metrics.compact_letters(["A"], [("A", "Z")]) == {"A": "a"}
    assert [letter_name(i) for i in (0, 25, 26, 52)] == ["a", "z", "A", "a2"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=12))
def test_holm_matches_statsmodels(p):
    ours = metrics.holm_adjust(p)
    # statsmodels' Holm ends in gc.collect(), a full collection of this process's heap (the
    # whole suite's: 0.3-1.5 s a call, over 30 s for the hundred examples); it changes nothing
    # it returns, so the reference is computed without it.
    with patch("gc.collect"):
        reference = multitest.multipletests(p, method="holm")[1]
    np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-15)


def test_holm_leaves_untested_values_out_of_the_family():
    out = metrics.holm_adjust([0.01, float("nan"), 0.04])
    assert out[0] == pytest.approx(0.02) and np.isnan(out[1]) and out[2] == pytest.approx(0.04)


def _clv(p, se=0.0):
    return Clv(n=50, label="unadjusted", flag=None, p=p, p_se=se)


def test_edge_labels_are_holm_adjusted_across_the_group():
    # Alone, p = 0.02 is a genuine edge at the one-sided 0.025 level ...
    (alone,) = holm_labels([_clv(0.02)])
    assert alone.label == "GENUINE_EDGE" and alone.p_holm == pytest.approx(0.02)
    assert alone.borderline is False
    # ... among three tested competitors Holm multiplies the smallest p by three: 0.06, no edge.
    three = holm_labels([_clv(0.02), _clv(0.5), _clv(0.9)])
    assert [c.label for c in three] == ["NO_EDGE"] * 3
    assert three[0].p_holm == pytest.approx(0.06)
    # Untested rows keep their label and stay out of the family.
    untested = Clv(n=3, label="NO_EDGE", flag="too_few")
    mixed = holm_labels([_clv(0.02), untested])
    assert mixed[0].label == "GENUINE_EDGE" and mixed[1] is untested


def test_a_label_within_monte_carlo_error_of_a_level_is_borderline_and_conservative():
    # p = 0.024 with a Monte Carlo error of 0.001: three errors up cross 0.025, so the published
    # label is the one no luckier seed can take away (weak), marked borderline.
    (near,) = holm_labels([_clv(0.024, 0.001)])
    assert near.label == "WEAK_EDGE" and near.borderline is True
    (firm,) = holm_labels([_clv(0.010, 0.001)])
    assert firm.label == "GENUINE_EDGE" and firm.borderline is False


def test_edge_p_value_is_the_share_of_corrected_replicates_at_or_below_zero():
    rng = np.random.default_rng(3)
    x = rng.normal(0.02, 0.1, 80)
    out = metrics.stationary_bootstrap_sharpe(x, B=4000, seed=11)
    assert 0 < out["p"] < 1 and out["p_se"] == pytest.approx(
        np.sqrt(out["p"] * (1 - out["p"]) / 4000)
    )
    # The p-value and the 95% lower bound tell the same story (up to the +1 in the count).
    lower95 = out["ci"][0.95][0]
    assert (lower95 > 0) == (out["p"] <= 0.025 + 1 / 4001)
    assert out["label"] == metrics.edge_label(out["p"])
