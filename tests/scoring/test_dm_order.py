"""The Diebold-Mariano loss series is in the order the methodology states (sealed dm_loss_order):
one value per question (cohort, week, market), by the question's first decision time, ties by
cohort, week and market. The Newey-West variance reads autocorrelation along that order."""

from types import SimpleNamespace

import numpy as np

from core.methodology import CONSTANTS
from scoring import metrics
from scoring.edge import dm_tables


def test_dm_series_follow_first_decision_time_then_cohort_week_market():
    assert CONSTANTS.dm_loss_order == "first_decision_time_then_cohort_week_market"
    rng = np.random.default_rng(5)
    # 40 questions over two cohorts, shuffled; two competitors forecast each once. Several share
    # a decision time, so the tie rule matters.
    keys = [(c, w, m) for c in (2, 1) for w in (0, 1) for m in range(10)]
    t = {key: float(rng.integers(0, 6)) for key in keys}
    loss = {(key, comp): float(rng.random()) for key in keys for comp in (0, 1)}
    rows = [(key, comp) for key in keys for comp in (0, 1)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    q = SimpleNamespace(
        scored=np.ones(len(rows), dtype=bool),
        cohort=np.array([k[0] for k, _ in rows]),
        week=np.array([k[1] for k, _ in rows]),
        market=np.array([k[2] for k, _ in rows]),
        # A competitor deciding later on the same question does not move it: the first time counts.
        t=np.array([t[k] + 0.5 * c for k, c in rows]),
        comp=np.array([c for _, c in rows]),
        brier=np.array([loss[r] for r in rows]),
        log=np.array([loss[r] for r in rows]),
    )
    data = SimpleNamespace(competitors=[(1, "a", "A"), (2, "b", "B")])
    sel = np.ones(len(rows), dtype=bool)
    tables = dm_tables(q, sel, data, [0, 1])  # type: ignore[arg-type]

    stated = sorted(keys, key=lambda k: (t[k], k[0], k[1], k[2]))
    expected = metrics.dm_matrix(
        {"a": [loss[(k, 0)] for k in stated], "b": [loss[(k, 1)] for k in stated]}
    )[0]
    (pair,) = tables.brier
    assert tables.n_keys == 40
    assert pair.stat == expected["stat"] and pair.p == expected["p"]
    # The order is not cosmetic: by (cohort, week, market) alone the statistic differs.
    plain = sorted(keys)
    other = metrics.dm_matrix(
        {"a": [loss[(k, 0)] for k in plain], "b": [loss[(k, 1)] for k in plain]}
    )[0]
    assert other["stat"] != expected["stat"]
