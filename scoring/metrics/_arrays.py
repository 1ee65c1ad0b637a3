"""Input shaping shared by the metrics modules.

Every public metric accepts array-likes; these helpers turn them into float vectors or (n, K)
matrices and check shapes once, so a malformed call fails with the same message everywhere.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
NAN = float("nan")


def _vec(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=float).reshape(-1)


def _pair(p: ArrayLike, o: ArrayLike) -> tuple[FloatArray, FloatArray]:
    a, b = _vec(p), _vec(o)
    if a.shape != b.shape:
        raise ValueError(f"p and o differ in length: {a.size} vs {b.size}")
    return a, b


def _matrix(P: ArrayLike, o: ArrayLike) -> tuple[FloatArray, IntArray]:
    matrix = np.asarray(P, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise ValueError("P must be an (n, K) matrix with K >= 2")
    classes = np.asarray(o).reshape(-1)
    if classes.size != matrix.shape[0]:
        raise ValueError(f"P has {matrix.shape[0]} rows but o has {classes.size} entries")
    if classes.size and (
        np.any(classes != np.floor(classes))
        or classes.min() < 0
        or classes.max() >= matrix.shape[1]
    ):
        raise ValueError("o must hold 0-based class indices in [0, K)")
    return matrix, classes.astype(np.intp)


def _mean(x: FloatArray) -> float:
    return float(x.mean()) if x.size else NAN


def _clip(p: FloatArray, eps: float) -> FloatArray:
    return np.clip(p, eps, 1.0 - eps)


def _logit(p: FloatArray, clip: float) -> FloatArray:
    clipped = _clip(p, clip)
    return np.log(clipped) - np.log1p(-clipped)


def _outcome_prob(p: ArrayLike, o: ArrayLike) -> FloatArray:
    """Probability given to what happened: p where o == 1, 1 - p where o == 0; P[i, o_i] for a matrix."""
    if np.ndim(p) == 2:
        P, idx = _matrix(p, o)
        return P[np.arange(P.shape[0]), idx]
    prob, outcome = _pair(p, o)
    return np.where(outcome == 1, prob, 1.0 - prob)
