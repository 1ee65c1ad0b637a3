"""Compact letter display of pairwise tests, and Holm's step-down adjustment.

The letter display (Piepho 2004, "insert and absorb") gives each item one or more letters so
that two items share a letter exactly when the pairwise test did not find them different: a
grouping a reader can check pair by pair, unlike tiers that chain along a ranking. Holm (1979)
controls the family-wise error of several tests at once and is never less powerful than
Bonferroni.
"""

from __future__ import annotations

import string
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from scoring.metrics._arrays import FloatArray, _vec

_ALPHABET = string.ascii_lowercase + string.ascii_uppercase


def letter_name(i: int) -> str:
    """a..z, A..Z, then a letter with a number (a2, b2, ...) for very long tables."""
    if i < len(_ALPHABET):
        return _ALPHABET[i]
    return f"{_ALPHABET[i % len(_ALPHABET)]}{i // len(_ALPHABET) + 1}"


def compact_letters(
    items: Sequence[Hashable], different: Iterable[tuple[Hashable, Hashable]]
) -> dict[Hashable, str]:
    """Letters for `items` (in display order) from the pairs found significantly different.

    Insert and absorb: start with one group of every item; for each different pair, split
    every group holding both into a copy without the one and a copy without the other, then
    drop any group contained in another. Afterwards two items share a group exactly when their
    pair is not in `different` (pairs not listed, untested ones included, are not different).
    Groups are lettered in the order of their first member in `items`, so the top row reads
    "a" and letters run down the table.
    """
    position = {item: i for i, item in enumerate(items)}
    groups: list[frozenset[int]] = [frozenset(range(len(items)))] if items else []
    seen = set()
    for a, b in different:
        if a not in position or b not in position or a == b:
            continue
        i, j = sorted((position[a], position[b]))
        if (i, j) in seen:
            continue
        seen.add((i, j))
        split: list[frozenset[int]] = []
        for g in groups:
            if i in g and j in g:
                split += [g - {j}, g - {i}]
            else:
                split.append(g)
        groups = _absorb(split)
    groups.sort(key=lambda g: sorted(g))
    letters = {item: "" for item in items}
    for k, g in enumerate(groups):
        for i in sorted(g):
            letters[items[i]] += letter_name(k)
    return letters


def _absorb(groups: list[frozenset[int]]) -> list[frozenset[int]]:
    """Drop duplicates and every group contained in another (largest first keeps the cover)."""
    kept: list[frozenset[int]] = []
    for g in sorted(set(groups), key=lambda g: (-len(g), sorted(g))):
        if not any(g <= k for k in kept):
            kept.append(g)
    return kept


def holm_adjust(p_values: ArrayLike) -> FloatArray:
    """Holm step-down adjusted p-values: sorted ascending, p_(i) * (m - i + 1), made
    non-decreasing, capped at 1. Rejecting where adjusted p <= alpha controls the family-wise
    error at alpha. NaN p-values are left out of the family and stay NaN."""
    p = _vec(p_values)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out
