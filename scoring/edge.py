"""Edge statistics of one scope: closing lines and closing-line value (CLV) of trades, the
pairwise Diebold-Mariano tables of a group, and the market-information test per competitor.

Pure computation over a loaded ScopeData (formulas in scoring.metrics, constants frozen in the
methodology); model classes are imported only for their choice constants.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from cohorts.models import Trade
from core.methodology import CONSTANTS as C
from markets.models import Market
from scoring import metrics
from scoring.load import ScopeData
from scoring.questions import BoolArray, FloatArray, Questions
from scoring.stored import Clv, DmPair, DmTables

EntryComp = dict[int, tuple[int, int]]  # entry id -> (cohort id, competitor index)


class TradeClv(NamedTuple):
    """Closing-line value of one BUY trade with a closing line later than the trade."""

    entry: int
    comp: int
    cohort: int
    t: float
    clv_prob: float
    clv_logodds: float
    trade_pk: int
    close: float


def closing_price(data: ScopeData, market_id: int, outcome: str) -> tuple[float, float]:
    """(closing line, time of the price it comes from) of one outcome, NaN when there is none.

    Frozen clv_closing_rule: the anchor is the earliest of the market's scheduled end, its
    recorded close and its resolution (each as known at as_of; a market still trading at as_of
    has no closing line); the closing line is the last price point at or before anchor minus
    clv_close_horizon_hours, so the outcome is not yet public in it. A binary market's missing
    side is the complement of the other; quotes of all outcomes summing above 1 are de-vigged
    multiplicatively. The time returned is that of the oldest price point used: a trade or
    forecast at or after it has no closing line (n/a, never 0).
    """
    key = (market_id, outcome)
    if key not in data.closes:
        data.closes[key] = _closing_price(data, market_id, outcome)
    return data.closes[key]


def _closing_price(data: ScopeData, market_id: int, outcome: str) -> tuple[float, float]:
    none = (math.nan, math.nan)
    info = data.markets.get(market_id)
    if info is None or math.isnan(info.closed_t) or outcome not in info.outcomes:
        return none
    known_resolution = info.resolved_t if info.resolved_t <= data.as_of_t else math.nan
    anchor = np.nanmin([info.close_t, info.closed_t, known_resolution])
    at = anchor - 3600.0 * C.clv_close_horizon_hours
    last_price, last_stamp = [], []
    for name in info.outcomes:
        t, p = data.prices.get((market_id, name), (np.zeros(0), np.zeros(0)))
        k = np.searchsorted(t, at, side="right") - 1
        last_price.append(p[k] if k >= 0 else math.nan)
        last_stamp.append(t[k] if k >= 0 else math.nan)
    closes = np.asarray(last_price, dtype=float)
    stamps = np.asarray(last_stamp, dtype=float)
    if len(info.outcomes) == 2:
        # Binary: a missing side is the complement of the quoted one.
        for a, b in ((0, 1), (1, 0)):
            if math.isnan(closes[a]) and not math.isnan(closes[b]):
                closes[a], stamps[a] = 1.0 - closes[b], stamps[b]
    j = info.outcomes.index(outcome)
    if np.all(np.isfinite(closes)) and closes.sum() > 1.0:
        return float(metrics.devig(closes)[j]), float(stamps.min())
    return float(closes[j]), float(stamps[j])


def dm_tables(q: Questions, sel: BoolArray, data: ScopeData, present: list[int]) -> DmTables:
    """Pairwise Diebold-Mariano on common questions, Brier and log loss, Bonferroni levels.

    A common question is (cohort, week, market): two competitors pair whatever outcome labels
    they stated (keying on the label too would drop the pair of a "Yes" and a "No" statement
    of one market). Replicates are averaged on it; questions are ordered by time so
    the HAC variance sees the real sequence.
    """
    s = sel & q.scored
    if not s.any() or len(present) < 2:
        return DmTables([], [], 0)
    keys = np.stack([q.cohort[s], q.week[s], q.market[s]], axis=1)
    uniq, key = np.unique(keys, axis=0, return_inverse=True)
    key = key.reshape(-1)
    n_keys = uniq.shape[0]
    first_t = np.full(n_keys, np.inf)
    np.minimum.at(first_t, key, q.t[s])
    order = np.lexsort((np.arange(n_keys), first_t))
    comp = q.comp[s]
    slugs = {ci: data.competitors[ci][1] for ci in present}
    tables: dict[str, list[DmPair]] = {}
    for name, loss in (("brier", q.brier[s]), ("log", q.log[s])):
        per: dict[str, FloatArray] = {}
        for ci in present:
            mask = comp == ci
            total = np.bincount(key[mask], weights=loss[mask], minlength=n_keys)
            count = np.bincount(key[mask], minlength=n_keys)
            with np.errstate(invalid="ignore", divide="ignore"):
                per[slugs[ci]] = np.where(count > 0, total / np.maximum(count, 1), np.nan)[order]
        tables[name] = [DmPair(**pair) for pair in metrics.dm_matrix(per)]
    return DmTables(tables["brier"], tables["log"], int(n_keys))


def information_tests(q: Questions, sel: BoolArray, data: ScopeData) -> dict[int, dict[str, Any]]:
    """Market-information test per competitor on its binary questions, against the closing line
    (questions whose closing line is later than the decision; see closing_price) and against the
    price shown at the decision ("opening")."""
    idx = np.flatnonzero(sel & q.scored & q.binary)
    close = np.full(q.t.size, np.nan)
    for i in idx.tolist():
        info = data.markets[int(q.market[i])]
        value, stamp = closing_price(data, int(q.market[i]), info.outcomes[0])
        if stamp > q.t[i]:
            close[i] = value
    comp = q.comp[idx]
    out = {}
    for ci in np.unique(comp):
        k = idx[comp == ci]
        out[int(ci)] = {
            "closing": metrics.market_information_test(q.o_yes[k], close[k], q.p_yes[k]),
            "opening": metrics.market_information_test(q.o_yes[k], q.m_yes[k], q.p_yes[k]),
        }
    return out


def trade_clv(data: ScopeData, entry_comp: EntryComp) -> list[TradeClv]:
    """The CLV of every BUY with a closing line later than the trade (see closing_price); the
    others have none."""
    out = []
    for entry_id, _d, side, _amount, price, at, market_id, outcome, trade_pk in data.trades:
        if side != Trade.Side.BUY or entry_id not in entry_comp:
            continue
        info = data.markets.get(market_id)
        if info is None or info.status == Market.Status.VOID:
            continue
        c, stamp = closing_price(data, market_id, outcome)
        t = at.timestamp()
        if not stamp > t:
            continue
        q = float(price)
        cohort, ci = entry_comp[entry_id]
        out.append(
            TradeClv(entry_id, ci, cohort, t, float(metrics.clv_prob([q], [c])[0]),
                     float(metrics.clv_logodds([q], [c])[0]), trade_pk, c)
        )  # fmt: skip
    return out


def clv_summary(rows: list[TradeClv], seed: int | None = None) -> Clv:
    """CLV statistics of one competitor's trades in time order. Without a single closing line
    the label is None (shown as n/a): no closing line says nothing, which is not "no edge".
    The label here is the single test's; holm_labels turns a group's into published ones."""
    if not rows:
        return Clv(n=0, label=None, flag="no_closing_line")
    rows = sorted(rows, key=lambda r: (r.t, r.trade_pk))
    prob = np.asarray([r.clv_prob for r in rows])
    lo = np.asarray([r.clv_logodds for r in rows])
    z, zp = metrics.clv_mean_ztest(prob)
    sb = metrics.stationary_bootstrap_sharpe(prob, seed=seed)
    tested = sb["flag"] is None
    return Clv(
        n=len(rows),
        mean_prob=float(prob.mean()),
        mean_logodds=float(lo.mean()),
        z=z,
        z_p=zp,
        sharpe=sb["sharpe"],
        sharpe_bc=sb["sharpe_bc"],
        block_length=sb["block_length"],
        ci90=sb["ci"].get(0.9),
        ci95=sb["ci"].get(0.95),
        p=sb["p"] if tested else None,
        p_se=sb["p_se"] if tested else None,
        label=sb["label"],
        flag=sb["flag"],
    )


def holm_labels(clvs: list[Clv]) -> list[Clv]:
    """The published edge labels of one group: each tested p-value Holm-adjusted across the
    group's competitors (frozen edge_multiple_comparison) and labelled at the frozen levels.

    Monte Carlo error: every p moved edge_borderline_z standard errors up (all together, the
    adjusted p is monotone in each of them) gives the published label, the one a luckier seed
    cannot take away; moved down, it gives the best label within that error. Where the two
    differ the result is borderline and says so. Untested series (too few, no variance, no
    closing line) keep their label and are not part of the family.
    """
    tested = [i for i, c in enumerate(clvs) if c.p is not None and math.isfinite(c.p)]
    if not tested:
        return clvs
    p = np.asarray([clvs[i].p for i in tested], dtype=float)
    se = np.asarray([clvs[i].p_se or 0.0 for i in tested], dtype=float)
    adjusted = metrics.holm_adjust(p)
    band = C.edge_borderline_z * se
    worst = metrics.holm_adjust(np.minimum(p + band, 1.0))
    best = metrics.holm_adjust(np.maximum(p - band, 0.0))
    out = list(clvs)
    for k, i in enumerate(tested):
        label = metrics.edge_label(float(worst[k]))
        out[i] = replace(
            clvs[i],
            p_holm=float(adjusted[k]),
            label=label,
            borderline=metrics.edge_label(float(best[k])) != label,
        )
    return out
