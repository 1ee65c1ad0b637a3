"""The leaderboard's vectorised tournament scorer against metrics.tournament_question_score,
one call per (forecaster, question), on random questions (no database needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    q_outcome = rng.integers(0, 2, n_q)
    mq, mt, mp = [], [], []
    for k in range(n_q):
        n_m = int(rng.integers(0, 5))  # some questions have no market point at all
        mq += [k] * n_m
        mt += list(rng.uniform(q_start[k] - 20, q_close[k] + 20, n_m).round(0))  # ties possible
        mp += list(rng.choice([0.0, 0.3, 0.5, 0.9, 1.0], n_m))
    n_pairs = int(rng.integers(1, 8))
    pair_question = rng.integers(0, n_q, n_pairs)
    pair, t, p = [], [], []
    for j in range(n_pairs):
        k = pair_question[j]
        n_f = int(rng.integers(1, 4))
        pair += [j] * n_f
        t += list(rng.uniform(q_start[k] - 30, q_close[k] + 30, n_f).round(0))
        p += list(rng.choice([0.0, 0.1, 0.5, 0.8, 1.0], n_f))
    arrays = [np.asarray(x, dtype=float) for x in (t, p, mt, mp)]
    return (
        np.asarray(pair), arrays[0], arrays[1], pair_question, q_start, q_close, q_end,
        q_outcome, np.asarray(mq, dtype=np.int64), arrays[2], arrays[3],
    )  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_matches_the_one_question_function(seed):
    case = _random_case(seed)
    pair, t, p, pair_q, q_start, q_close, q_end, q_out, mq, mt, mp = case
    score, coverage = tournament_pair_scores(*case)
    for j, k in enumerate(pair_q):
        resolved_early = q_end[k] < q_close[k]
        ref = metrics.tournament_question_score(
            t[pair == j], p[pair == j], mt[mq == k], mp[mq == k], int(q_out[k]),
            q_start[k], q_close[k], q_end[k] if resolved_early else None,
        )  # fmt: skip
        assert score[j] == pytest.approx(ref["score"], abs=1e-9)
        assert coverage[j] == pytest.approx(ref["coverage"], abs=1e-9)
