"""Significance tests between forecasters and against the market: Diebold-Mariano with a
Newey-West long-run variance (pairwise, Bonferroni-judged), and the market-information test
(does a model's probability add to the market price? logistic regression, LR and HC3 Wald).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from scoring.metrics._arrays import NAN, FloatArray, _logit, _pair, _vec
from scoring.metrics.distributions import chi2_sf, special, student_t_sf


def nw_bandwidth(n: int, h: int = 1, rule: str | None = None) -> int:
    """Newey-West lag count: floor(4 (n/100)^(2/9)) (Newey & West 1994) or h - 1."""
    rule = C.dm_bandwidth_rule if rule is None else rule
    if rule == "h-1":
        return max(h - 1, 0)
    if rule == "nw_floor_4(n/100)^(2/9)":
        return int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 0 else 0
    raise ValueError(f"unknown bandwidth rule {rule!r}")


def long_run_variance(d: ArrayLike, lags: int) -> float:
    """Bartlett-weighted (Newey-West) long-run variance of d: g0 + 2 sum (1 - k/(L+1)) g_k."""
    d = _vec(d)
    n = d.size
    dc = d - d.mean()
    lrv = float(dc @ dc) / n
    for k in range(1, min(lags, n - 1) + 1):
        lrv += 2.0 * (1.0 - k / (lags + 1.0)) * float(dc[k:] @ dc[:-k]) / n
    return lrv


def diebold_mariano(
    loss_a: ArrayLike, loss_b: ArrayLike, h: int = 1, lags: int | None = None
) -> tuple[float, float]:
    """Diebold-Mariano test of equal expected loss, d = loss_a - loss_b.

    Newey-West/Bartlett long-run variance with the frozen bandwidth (or `lags`), the
    Harvey-Leybourne-Newbold factor sqrt((n + 1 - 2h + h(h-1)/n) / n), Student t with n - 1
    degrees of freedom, two-sided p. A negative statistic means a has the lower loss.
    Pairs where either loss is not finite are dropped. With fewer than dm_min_n pairs or a
    long-run variance that is not positive, returns (0.0 if the mean difference is 0 else NaN, 1.0).
    """
    d = _vec(loss_a) - _vec(loss_b)
    d = d[np.isfinite(d)]
    n = d.size
    if n < max(3, C.dm_min_n):
        return (0.0 if n and not d.any() else NAN), 1.0
    mean = float(d.mean())
    n_lags = nw_bandwidth(n, h) if lags is None else int(lags)
    lrv = long_run_variance(d, n_lags)
    # Rounding can leave a tiny positive variance for a constant d; treat it as zero.
    if not lrv > 1e-14 * max(float(np.mean(d * d)), 1e-300):
        return (0.0 if mean == 0.0 else NAN), 1.0
    hln = math.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    stat = hln * mean / math.sqrt(lrv / n)
    return float(stat), 2.0 * student_t_sf(abs(stat), n - 1)


def dm_matrix(
    loss_by_competitor: Mapping[str, ArrayLike],
    h: int = 1,
    alpha: float | None = None,
) -> list[dict[str, Any]]:
    """Every pair (a, b) of competitors, tested on the forecasts both have (finite losses).

    Arrays are aligned on a common forecast list (NaN where a competitor has none). Each pair
    is judged at the Bonferroni level family alpha / number of pairs: verdict is "a_better",
    "b_better" or "no_difference".
    """
    alpha = C.dm_family_alpha if alpha is None else alpha
    names = list(loss_by_competitor)
    losses = {name: _vec(loss_by_competitor[name]) for name in names}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    level = alpha / len(pairs) if pairs else alpha
    rows = []
    for a, b in pairs:
        la, lb = losses[a], losses[b]
        if la.shape != lb.shape:
            raise ValueError(f"losses of {a} and {b} are not aligned")
        both = np.isfinite(la) & np.isfinite(lb)
        stat, p = diebold_mariano(la[both], lb[both], h=h)
        verdict = ("a_better" if stat < 0 else "b_better") if p < level else "no_difference"
        mean_diff = float(np.mean(la[both] - lb[both])) if both.any() else NAN
        rows.append(
            {
                "a": a,
                "b": b,
                "n": int(both.sum()),
                "mean_diff": mean_diff,
                "stat": stat,
                "p": p,
                "level": level,
                "verdict": verdict,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# Market-information test (logistic regression, Newton/IRLS)
# ---------------------------------------------------------------------------------------------


def _log_likelihood(X: FloatArray, y: FloatArray, beta: FloatArray) -> float:
    eta = X @ beta
    return float(np.sum(y * eta - np.logaddexp(0.0, eta)))


def _fit_logit(X: FloatArray, y: FloatArray) -> dict[str, Any]:
    """Maximum-likelihood logistic regression by Newton's method with step halving.

    Returns beta, log-likelihood, the Fisher information and flags; never raises.
    """
    beta = np.zeros(X.shape[1])
    llf = _log_likelihood(X, y, beta)
    converged = False
    for _ in range(C.info_test_max_iter):
        mu = special().expit(X @ beta)
        info = X.T @ (X * (mu * (1.0 - mu))[:, None])
        try:
            step = np.linalg.solve(info, X.T @ (y - mu))
        except np.linalg.LinAlgError:
            return {"beta": beta, "llf": llf, "info": info, "ok": False, "flag": "singular"}
        # Halve the step until the likelihood does not fall; Newton on logistic rarely needs it,
        # but near-separated data can overshoot.
        for _ in range(30):
            candidate = beta + step
            cand_llf = _log_likelihood(X, y, candidate)
            if cand_llf >= llf - 1e-12:
                break
            step /= 2.0
        beta, llf = candidate, cand_llf
        if np.max(np.abs(X @ beta)) > C.info_test_max_abs_eta:
            return {"beta": beta, "llf": llf, "info": info, "ok": False, "flag": "separation"}
        if np.max(np.abs(step)) < C.info_test_tol:
            converged = True
            break
    mu = special().expit(X @ beta)
    info = X.T @ (X * (mu * (1.0 - mu))[:, None])
    flag = None if converged else "no_convergence"
    return {"beta": beta, "llf": llf, "info": info, "ok": converged, "flag": flag}


def _hc3_covariance(X: FloatArray, y: FloatArray, beta: FloatArray, info: FloatArray) -> FloatArray:
    """HC3 sandwich: I^-1 (sum s_i s_i' / (1 - h_i)^2) I^-1, with GLM leverages h_i."""
    mu = special().expit(X @ beta)
    w = mu * (1.0 - mu)
    bread = np.linalg.inv(info)
    leverage = w * np.einsum("ij,jk,ik->i", X, bread, X)
    scale = (y - mu) / (1.0 - leverage)
    meat = (X * (scale * scale)[:, None]).T @ X
    return bread @ meat @ bread


def market_information_test(
    outcomes: ArrayLike, market_p: ArrayLike, model_p: ArrayLike
) -> dict[str, Any]:
    """Does the model's probability carry information the market price lacks? (Nyberg style)

    Fits logit P(o = 1) = b0 + b1 logit(market) + b2 logit(model), both logits clipped at
    info_test_logit_clip; likelihood-ratio test of b2 = 0 against the market-only fit (chi-square,
    1 df) and an HC3 robust Wald test of b2 = 0. Degenerate data (too few rows, one outcome,
    model collinear with market, separation, no convergence) gives ok=False with a flag,
    NaN statistics and p = 1.0; it never raises.
    """
    y, m = _pair(outcomes, market_p)
    y, f = _pair(y, model_p)
    keep = np.isfinite(y) & np.isfinite(m) & np.isfinite(f)
    y, m, f = y[keep], m[keep], f[keep]
    n = int(y.size)
    result: dict[str, Any] = {
        "n": n,
        "ok": False,
        "flag": None,
        "coefs": {"const": NAN, "market": NAN, "model": NAN},
        "lr_stat": NAN,
        "lr_p": 1.0,
        "wald_hc3_stat": NAN,
        "wald_p": 1.0,
    }
    clip = C.info_test_logit_clip
    X = np.column_stack([np.ones(n), _logit(m, clip), _logit(f, clip)])
    if n < C.info_test_min_n:
        return result | {"flag": "too_few"}
    if y.min() == y.max():
        return result | {"flag": "one_outcome"}
    if np.linalg.matrix_rank(X) < 3:
        return result | {"flag": "collinear"}
    full = _fit_logit(X, y)
    restricted = _fit_logit(X[:, :2], y)
    result["coefs"] = dict(zip(("const", "market", "model"), map(float, full["beta"])))
    if not (full["ok"] and restricted["ok"]):
        return result | {"flag": full["flag"] or restricted["flag"]}
    lr = max(0.0, 2.0 * (full["llf"] - restricted["llf"]))
    try:
        cov = _hc3_covariance(X, y, full["beta"], full["info"])
        wald = float(full["beta"][2] ** 2 / cov[2, 2])
    except (np.linalg.LinAlgError, ZeroDivisionError, FloatingPointError):
        wald = NAN
    return result | {
        "ok": True,
        "lr_stat": lr,
        "lr_p": chi2_sf(lr, 1),
        "wald_hc3_stat": wald,
        "wald_p": chi2_sf(wald, 1) if math.isfinite(wald) else 1.0,
        "llf": full["llf"],
        "llf_restricted": restricted["llf"],
    }
