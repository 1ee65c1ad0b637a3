"""Pure scoring math for the arena: numpy in, numbers out, no Django, no database.

Each formula the methodology page describes lives in one of these modules, under a stable name
re-exported here, so a researcher can `from scoring import metrics` and check any of them against
other libraries. Defaults come from the frozen methodology constants (core/methodology_v<N>.json,
the current version), never from literals in this package.

Conventions: ``p`` is a probability of YES (or of the outcome), ``o`` an outcome (0/1, or a
0-based class index for multiclass), ``P`` an (n, K) probability matrix. Losses are "lower is
better". Empty inputs give NaN rather than raising, because the leaderboard must render even for
a competitor with nothing resolved yet; malformed shapes raise ValueError.

Modules: proper (Brier, log, RPS, skill, completion, relative log), calibration (reliability,
ECE, Murphy, implied confidence), bootstrap (market-resampling intervals, the provisional
threshold), significance (Diebold-Mariano, the market-information test), letters (the
compact letter display of pairwise tests, Holm's adjustment), clv (closing-line
value and the edge label), tournament (relative log score over a question's life, takes),
kelly (the standard trading layer).
"""

from __future__ import annotations

from scoring.metrics.bootstrap import (
    bootstrap_ci,
    paired_bootstrap_diff_ci,
    paired_bootstrap_skill_ci,
    provisional_threshold,
    required_n_for_brier_edge,
)
from scoring.metrics.calibration import (
    calibration,
    ece,
    implied_confidence_brier,
    murphy,
    wilson_interval,
)
from scoring.metrics.clv import (
    clv_logodds,
    clv_mean_ztest,
    clv_prob,
    devig,
    edge_label,
    optimal_block_length,
    stationary_bootstrap_indices,
    stationary_bootstrap_sharpe,
)
from scoring.metrics.kelly import (
    StakedBet,
    kelly_stake,
)
from scoring.metrics.letters import (
    compact_letters,
    holm_adjust,
)
from scoring.metrics.proper import (
    brier,
    brier_loss,
    brier_multiclass,
    brier_multiclass_loss,
    brier_skill,
    complete_forecast,
    log_loss,
    log_score,
    question_brier_loss,
    relative_log_loss,
    relative_log_score,
    rps,
    rps_loss,
)
from scoring.metrics.significance import (
    diebold_mariano,
    dm_matrix,
    long_run_variance,
    market_information_test,
    nw_bandwidth,
)
from scoring.metrics.tournament import (
    prize_shares,
    tournament_question_score,
    tournament_takes,
)

__all__ = [
    "brier_loss",
    "brier",
    "brier_multiclass_loss",
    "brier_multiclass",
    "question_brier_loss",
    "complete_forecast",
    "log_loss",
    "log_score",
    "rps_loss",
    "rps",
    "brier_skill",
    "murphy",
    "calibration",
    "ece",
    "wilson_interval",
    "implied_confidence_brier",
    "relative_log_loss",
    "relative_log_score",
    "bootstrap_ci",
    "paired_bootstrap_diff_ci",
    "paired_bootstrap_skill_ci",
    "required_n_for_brier_edge",
    "provisional_threshold",
    "nw_bandwidth",
    "long_run_variance",
    "diebold_mariano",
    "dm_matrix",
    "compact_letters",
    "holm_adjust",
    "market_information_test",
    "clv_prob",
    "clv_logodds",
    "devig",
    "edge_label",
    "clv_mean_ztest",
    "optimal_block_length",
    "stationary_bootstrap_indices",
    "stationary_bootstrap_sharpe",
    "tournament_question_score",
    "tournament_takes",
    "prize_shares",
    "StakedBet",
    "kelly_stake",
]
