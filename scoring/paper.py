"""Champion's clothes: what each entry's stated probabilities would have earned if the standard
trading layer had bet them (kelly_stake sides and fractions, the real max_bet_fraction budget per
decision, bets under min_bet skipped), with the paper bets' closing-line value.

Owns the paper candidates and the per-entry paper portfolios; the comparison with the real
money is shaped into rows by scoring/present.py. Pure computation over loaded data: it never
touches the ORM (Market is imported only for its status constants) and never writes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from core.methodology import CONSTANTS as C
from markets.models import Market
from markets.pricing import outcome_price
from scoring import metrics
from scoring.edge import closing_price
from scoring.load import MarketInfo, ScopeData
from scoring.questions import BoolArray, FloatArray, IntArray, Items, YesView, category_codes


@dataclass
class PaperCandidates:
    """What the standard trading layer may bet: one row per binary market (as its first outcome)
    and per stated outcome of a multi-outcome market, per decision, with kelly_stake's verdict."""

    entry: IntArray
    decision: IntArray
    t: FloatArray
    market: IntArray
    outcome: NDArray[np.object_]  # the outcome bought if the side is YES
    kelly: FloatArray  # full-Kelly fraction of the side kelly_stake chose (0: no bet)
    side_no: BoolArray
    price: FloatArray  # price of the side bought


@dataclass(frozen=True)
class PaperEntry:
    """One entry's paper portfolio: P/L (resolved at 1/0, open marked at the last price), the
    number of paper bets and their closing-line values as (time, CLV) pairs."""

    pnl: float
    n_bets: int
    clv: list[tuple[float, float]]


@dataclass(frozen=True)
class _PaperBet:
    """One paper bet: the outcome bought, stake and shares, the price paid, when."""

    market: int
    outcome: str
    stake: float
    shares: float
    price: float
    t: float
    info: MarketInfo


def paper_candidates(items: Items, yes: YesView, data: ScopeData) -> PaperCandidates:
    first = np.asarray(
        [(data.markets[m].outcomes or [""])[0] if m in data.markets else "" for m in items.market.tolist()],
        dtype=object,
    ) if items.p.size else np.zeros(0, dtype=object)  # fmt: skip
    void = np.asarray(
        [data.markets.get(m) is None or data.markets[m].status == Market.Status.VOID
         for m in items.market.tolist()], dtype=bool,
    )  # fmt: skip
    p = np.where(items.binary, yes.p, items.p)
    m = np.where(items.binary, yes.m, items.m)
    outcome = np.where(items.binary, first, items.outcome)
    # Below the smaller edge threshold no side can be bet: skip those before kelly_stake.
    reach = np.abs(p - m) >= min(C.edge_threshold_binary, C.edge_threshold_multi) - 1e-9
    ok = np.flatnonzero(np.isfinite(m) & ~void & reach)
    # First statement per (decision, market, outcome): a binary market stated twice (Yes and
    # No) is one candidate.
    keys = np.stack([items.decision[ok], items.market[ok], category_codes(outcome[ok])], axis=1)
    if ok.size:
        _, first_pos = np.unique(keys, axis=0, return_index=True)
        ok = ok[np.sort(first_pos)]
    # Side, edge threshold and Kelly fraction do not depend on the cash, so one call decides
    # every candidate; cash 0 leaves the stakes to _within_budget (kelly_stake's proportional
    # scale-down would push a long list of small edges under min_bet).
    bets = metrics.kelly_stake(p[ok], m[ok], 0, multi=~items.binary[ok])
    eligible = np.asarray([b.reason in ("bet", "below_min_bet") for b in bets], dtype=bool)
    return PaperCandidates(
        entry=items.entry[ok], decision=items.decision[ok], t=items.t[ok], market=items.market[ok],
        outcome=outcome[ok],
        kelly=np.where(eligible, np.asarray([b.kelly for b in bets], dtype=float), 0.0),
        side_no=np.asarray([b.side == "NO" for b in bets], dtype=bool),
        price=np.asarray([b.price for b in bets], dtype=float),
    )  # fmt: skip


def paper_portfolios(cands: PaperCandidates, data: ScopeData) -> dict[int, PaperEntry]:
    """Champion's clothes: every entry's stated probabilities through the standard trading layer.

    Per entry, decisions in time order; paper cash starts at the entry's initial balance, pays
    out when a market resolves before the next decision (void refunds the stake), and a
    decision's bets together stay within max_bet_fraction of the cash before it (the real
    execution rule, see _within_budget) and above min_bet. Returns per entry: pnl (resolved at
    1/0, open marked at the last price), n_bets, and the paper bets' CLV rows.
    """
    initial = dict(zip(data.entries["id"].tolist(), data.entries["initial"].tolist()))
    order = np.lexsort((np.arange(cands.t.size), cands.t, cands.entry))
    entry, decision = cands.entry[order], cands.decision[order]
    cut = np.flatnonzero(np.r_[True, (entry[1:] != entry[:-1]) | (decision[1:] != decision[:-1])])
    blocks = np.split(order, cut[1:]) if order.size else []
    per_entry: dict[int, list[IntArray]] = defaultdict(list)
    for block in blocks:
        per_entry[int(cands.entry[block[0]])].append(block)
    return {
        entry_id: _paper_entry(cands, data, initial.get(entry_id, 0.0), decision_blocks)
        for entry_id, decision_blocks in per_entry.items()
    }


def _paper_entry(
    cands: PaperCandidates, data: ScopeData, initial: float, blocks: list[IntArray]
) -> PaperEntry:
    cash = initial
    open_bets: list[_PaperBet] = []
    done: list[_PaperBet] = []
    cap_share, min_bet = C.max_bet_fraction, float(C.min_bet)
    for idx in blocks:  # one block per decision, in time order
        t = float(cands.t[idx[0]])
        cash, open_bets = _paper_settle(cash, open_bets, done, t)
        if cash <= 0:
            continue
        wanted = np.minimum(C.kelly_fraction * cands.kelly[idx], cap_share) * cash
        amounts = _within_budget(wanted, cap_share * cash, min_bet)
        for i, amount in zip(idx[amounts > 0], amounts[amounts > 0]):
            info = data.markets[int(cands.market[i])]
            outcome = cands.outcome[i]
            if cands.side_no[i]:
                outcome = next(o for o in info.outcomes if o != outcome)
            cash -= amount
            open_bets.append(
                _PaperBet(market=int(cands.market[i]), outcome=outcome, stake=float(amount),
                          shares=float(amount / cands.price[i]), price=float(cands.price[i]),
                          t=t, info=info)
            )  # fmt: skip
    cash, open_bets = _paper_settle(cash, open_bets, done, math.inf)
    value = cash
    for bet in open_bets:  # still open at as_of: mark at the last price, like the snapshots
        price = outcome_price(bet.info.last_prices, bet.info.outcomes, bet.outcome)
        value += bet.stake if price is None else bet.shares * float(price)
    clv = []
    for bet in done + open_bets:
        c, stamp = closing_price(data, bet.market, bet.outcome)
        if stamp > bet.t:  # a closing line later than the bet, else none (see closing_price)
            clv.append((bet.t, float(metrics.clv_prob([bet.price], [c])[0])))
    return PaperEntry(pnl=value - initial, n_bets=len(done) + len(open_bets), clv=clv)


def _within_budget(stakes: FloatArray, budget: float, min_bet: float) -> FloatArray:
    """Fit one decision's stakes (dollars, floored to cents) into the real execution budget
    (max_bet_fraction of the cash before it).

    Largest stakes (largest Kelly edge) are funded first; the one that meets the end of the
    budget gets the remainder if that is still a legal bet; the rest are skipped. Shrinking
    every stake in proportion instead would push a long list of small edges under min_bet.
    """
    order = np.argsort(-stakes, kind="stable")
    wanted = np.floor(stakes[order] * 100) / 100
    remaining = budget - np.r_[0.0, np.cumsum(wanted)[:-1]]
    amount = np.floor(np.minimum(wanted, np.maximum(remaining, 0.0)) * 100) / 100
    amount[amount < min_bet] = 0.0
    out = np.zeros(stakes.size)
    out[order] = amount
    return out


def _paper_settle(
    cash: float, open_bets: list[_PaperBet], done: list[_PaperBet], t: float
) -> tuple[float, list[_PaperBet]]:
    """Pay out (or refund, void) the open bets whose market resolved by t; the rest stay open."""
    still = []
    for bet in open_bets:
        info = bet.info
        if info.status in (Market.Status.RESOLVED, Market.Status.VOID) and (
            math.isnan(info.resolved_t) or info.resolved_t <= t
        ):
            if info.status == Market.Status.VOID:
                cash += bet.stake
            elif bet.outcome == info.resolved_outcome:
                cash += bet.shares
            done.append(bet)
        else:
            still.append(bet)
    return cash, still
