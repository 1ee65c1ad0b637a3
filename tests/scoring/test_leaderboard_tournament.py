"""The leaderboard's vectorised tournament scorer against metrics.tournament_question_score,
one call per (forecaster, question), on random questions (no database needed).

The reference is the price shown with each forecast (sealed tournament_reference), so the one-
question function gets the forecasts' own times as the market's change points.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.methodology import CONSTANTS as C
from scoring import metrics
from scoring.tournament import tournament_pair_scores


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    n_q = int(rng.integers(1, 6))
    q_start = rng.uniform(0, 100, n_q)
    q_close = q_start + rng.uniform(-5, 100, n_q)  # sometimes a broken life (close <= start)
    early = rng.random(n_q) < 0.5
    q_end = np.where(early, q_start + rng.uniform(-5, 120, n_q), q_close)
    q_end = np.minimum(q_end, q_close)
    n_pairs = int(rng.integers(1, 8))
    pair_question = rng.integers(0, n_q, n_pairs)
    pair, t, p, m = [], [], [], []
    for j in range(n_pairs):
        k = pair_question[j]
        n_f = int(rng.integers(1, 4))
        pair += [j] * n_f
        t += list(rng.uniform(q_start[k] - 30, q_close[k] + 30, n_f).round(0))  # ties possible
        p += list(rng.choice([0.0, 0.1, 0.5, 0.8, 1.0], n_f))
        m += list(rng.choice([0.05, 0.3, 0.5, 0.9, 1.0], n_f))
    t, p, m = (np.asarray(x, dtype=float) for x in (t, p, m))
    return np.asarray(pair), t, p, m, pair_question, q_start, q_close, q_end


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_matches_the_one_question_function(seed):
    pair, t, p, m, pair_q, q_start, q_close, q_end = _random_case(seed)
    eps = C.log_eps
    rel = np.log(np.clip(p, eps, 1 - eps)) - np.log(np.clip(m, eps, 1 - eps))
    score, coverage = tournament_pair_scores(pair, t, rel, pair_q, q_start, q_close, q_end)
    for j, k in enumerate(pair_q):
        resolved_early = q_end[k] < q_close[k]
        mine = pair == j
        ref = metrics.tournament_question_score(
            t[mine], p[mine], t[mine], m[mine], 1,
            q_start[k], q_close[k], q_end[k] if resolved_early else None,
        )  # fmt: skip
        assert score[j] == pytest.approx(ref["score"], abs=1e-9)
        assert coverage[j] == pytest.approx(ref["coverage"], abs=1e-9)
