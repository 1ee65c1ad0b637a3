"""Published worked examples and seeded scenarios shared by the scoring tests."""

import numpy as np
from scipy import special

# Constantinou & Fenton (2012), "Solving the problem of inadequate scoring rules for assessing
# probabilistic football forecast models", JQAS 8(1): hypothetical matches (home, draw, away),
# the observed result as a 0-based class index, and the RPS the paper reports.
CONSTANTINOU_FENTON_2012 = [
    ((1.00, 0.00, 0.00), 0, 0.0),
    ((0.90, 0.10, 0.00), 0, 0.005),
    ((0.80, 0.10, 0.10), 0, 0.025),
    ((0.50, 0.25, 0.25), 0, 0.15625),
    ((0.35, 0.30, 0.35), 1, 0.1225),
    ((0.60, 0.30, 0.10), 1, 0.185),
    ((0.60, 0.25, 0.15), 0, 0.09125),
    ((0.60, 0.15, 0.25), 0, 0.11125),
    ((0.57, 0.33, 0.10), 0, 0.0975),
    ((0.60, 0.20, 0.20), 0, 0.1),
]

# Single-forecast Brier examples as usually taught (rain forecast, it rained): (p, o, score).
BRIER_RAIN_EXAMPLES = [(1.0, 1, 0.0), (0.7, 1, 0.09), (0.5, 1, 0.25), (0.3, 1, 0.49), (1.0, 0, 1.0)]


def informed_vs_noisy_market(n: int = 600, seed: int = 20240601) -> dict[str, np.ndarray]:
    """Markets whose true YES probability t is known to one competitor.

    The price at decision time is t blurred by heavy log-odds noise; the closing price has moved
    most of the way to t (markets learn), and the outcome is drawn from t.
    """
    rng = np.random.default_rng(seed)
    truth = rng.beta(2.0, 2.0, size=n)
    logit_t = special.logit(truth)
    market = special.expit(logit_t + rng.normal(0.0, 0.8, size=n))
    close = special.expit(logit_t + rng.normal(0.0, 0.15, size=n))
    outcome = (rng.random(n) < truth).astype(float)
    return {"truth": truth, "market": market, "close": close, "outcome": outcome, "rng": rng}
