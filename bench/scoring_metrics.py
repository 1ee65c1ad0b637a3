"""Benchmark of the pure scoring library (scoring/metrics.py) against its targets.

Run: uv run python bench/scoring_metrics.py   (no database needed)

1. Brier + log score + Murphy decomposition on 1,000,000 forecasts    target <= 0.1 s together
2. 12 competitors x 5,000 common forecasts: DM matrix (Brier and log), market-information tests,
   and a 2,000-resample stationary bootstrap of each competitor's CLV     target <= 15 s
3. Paired bootstrap (2,000 resamples) over 100,000 forecasts, by forecast and by market
                                                                          recorded, no target
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")

import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

from scoring import metrics  # noqa: E402


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    """Best wall time of `repeat` runs (the machine may be shared), and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def report(label: str, seconds: float, target: float | None) -> bool:
    verdict = "" if target is None else ("  OK" if seconds <= target else "  OVER TARGET")
    goal = "" if target is None else f" (target <= {target:g} s)"
    print(f"{label:<62} {seconds:8.3f} s{goal}{verdict}")
    return target is None or seconds <= target


def bench_proper_scores(rng: np.random.Generator) -> bool:
    n = 1_000_000
    p = rng.random(n)
    o = (rng.random(n) < p).astype(float)

    def run():
        return metrics.brier(p, o), metrics.log_score(p, o), metrics.murphy(p, o)

    seconds, (b, ls, d) = timed(run, repeat=5)
    print(f"  brier {b:.5f}  log {ls:.5f}  murphy identity error "
          f"{abs(d['rel'] - d['res'] + d['unc'] + d['wbv'] - d['wbc'] - b):.1e}")  # fmt: skip
    return report("Brier + log + Murphy, 1,000,000 forecasts", seconds, 0.1)


def bench_edge_statistics(rng: np.random.Generator) -> bool:
    n, k = 5_000, 12
    truth = rng.beta(2, 2, n)
    market = special.expit(special.logit(truth) + rng.normal(0, 0.6, n))
    close = special.expit(special.logit(truth) + rng.normal(0, 0.2, n))
    o = (rng.random(n) < truth).astype(float)
    skill = np.linspace(0.0, 1.0, k)  # 0 = copies the market, 1 = knows the truth
    models = [
        special.expit((1 - s) * special.logit(market) + s * special.logit(truth)) for s in skill
    ]
    side_yes = [m > market for m in models]
    clv = [np.where(y, close - market, market - close) for y in side_yes]

    def run():
        brier = {f"c{i}": metrics.brier_loss(m, o) for i, m in enumerate(models)}
        log = {f"c{i}": metrics.log_loss(m, o) for i, m in enumerate(models)}
        dm = metrics.dm_matrix(brier) + metrics.dm_matrix(log)
        info = [metrics.market_information_test(o, market, m) for m in models]
        edge = [metrics.stationary_bootstrap_sharpe(x, B=2000) for x in clv]
        return dm, info, edge

    seconds, (dm, info, edge) = timed(run)
    wins = sum(r["verdict"] != "no_difference" for r in dm)
    labels = [e["label"] for e in edge]
    print(f"  {len(dm)} DM pairs ({wins} significant), {len(info)} information tests, "
          f"labels {labels.count('GENUINE_EDGE')} genuine / {labels.count('WEAK_EDGE')} weak / "
          f"{labels.count('NO_EDGE')} none, block lengths "
          f"{min(e['block_length'] for e in edge):.1f}..{max(e['block_length'] for e in edge):.1f}")  # fmt: skip
    return report("12 x 5,000: DM matrix + info tests + 2,000 block bootstraps", seconds, 15.0)


def bench_paired_bootstrap(rng: np.random.Generator) -> bool:
    n = 100_000
    p = rng.random(n)
    o = (rng.random(n) < p).astype(float)
    a = metrics.brier_loss(np.clip(p + rng.normal(0, 0.05, n), 0, 1), o)
    b = metrics.brier_loss(np.clip(p + rng.normal(0, 0.10, n), 0, 1), o)
    markets = rng.integers(0, 20_000, n)  # about 5 forecasts per market
    seconds, ci = timed(lambda: metrics.paired_bootstrap_diff_ci(a, b))
    report("Paired bootstrap, 2,000 x 100,000 forecasts", seconds, None)
    seconds_g, ci_g = timed(lambda: metrics.paired_bootstrap_diff_ci(a, b, groups=markets))
    report("Paired bootstrap, 2,000 x 100,000 forecasts on 20,000 markets", seconds_g, None)
    print(f"  CI by forecast {ci[0]:.6f}..{ci[1]:.6f}, by market {ci_g[0]:.6f}..{ci_g[1]:.6f}")
    return True


def main() -> int:
    rng = np.random.default_rng(2024)
    ok = [bench_proper_scores(rng), bench_edge_statistics(rng), bench_paired_bootstrap(rng)]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
