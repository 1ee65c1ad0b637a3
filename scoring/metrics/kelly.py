"""The standard trading layer ("champion's clothes"): which side of a candidate to buy and how
much, by fractional Kelly within the per-decision budget, in whole cents above min_bet.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal

import numpy as np
from numpy.typing import ArrayLike

from core.methodology import CONSTANTS as C
from scoring.metrics._arrays import _pair, _vec


@dataclass(frozen=True)
class StakedBet:
    """What the standard trading layer does with one candidate.

    side is "YES" (buy the outcome) or "NO" (buy its complement, binary only) or None when no
    side has a positive edge. p and price are for the side bought; kelly is the full-Kelly
    fraction of cash; reason is "bet", "no_edge", "below_edge", "below_min_bet" or "bad_price".
    """

    index: int
    side: str | None
    p: float
    price: float
    edge: float
    kelly: float
    stake: Decimal
    reason: str


_CENT = Decimal("0.01")


def _to_cents(value: float) -> Decimal:
    # Round to 8 places first so float noise (999.9999999999998) does not cost a cent.
    if not value > 0:
        return Decimal("0.00")
    return Decimal(str(round(float(value), 8))).quantize(_CENT, rounding=ROUND_DOWN)


def kelly_stake(
    p: ArrayLike,
    price: ArrayLike,
    cash: Decimal | float,
    fraction: float | None = None,
    cap: float | None = None,
    *,
    multi: ArrayLike = False,
    min_bet: Decimal | str | float | None = None,
    no_price: ArrayLike | None = None,
) -> list[StakedBet]:
    """Stakes of the standard trading layer for a list of candidates, one StakedBet each.

    A candidate is a stated probability p of an outcome and its YES price. Binary candidates may
    buy either side (NO at no_price, default 1 - price); multi-outcome candidates (multi=True)
    only buy the outcome. A side is bet when its edge (p - price) reaches edge_threshold_binary
    or edge_threshold_multi. Stake = fraction * full Kelly (p - q) / (1 - q) * cash; the
    decision's stakes together may not exceed cap * cash (max_bet_fraction of the cash held
    before the decision, so no single bet can either): when they would, all are scaled down in
    proportion. Stakes are then rounded down to cents and any below min_bet is dropped.
    """
    fraction = C.kelly_fraction if fraction is None else fraction
    cap = C.max_bet_fraction if cap is None else cap
    min_bet = Decimal(str(C.min_bet if min_bet is None else min_bet))
    p_yes, q_yes = _pair(p, price)
    n = p_yes.size
    multi = np.broadcast_to(np.asarray(multi, dtype=bool), (n,))
    q_no = 1.0 - q_yes if no_price is None else np.broadcast_to(_vec(no_price), (n,))
    cash_f = float(cash)

    edge_yes, edge_no = p_yes - q_yes, (1.0 - p_yes) - q_no
    buy_no = ~multi & (edge_no > edge_yes)
    side_p = np.where(buy_no, 1.0 - p_yes, p_yes)
    side_q = np.where(buy_no, q_no, q_yes)
    edge = side_p - side_q
    threshold = np.where(multi, C.edge_threshold_multi, C.edge_threshold_binary)
    valid = np.isfinite(side_p) & np.isfinite(side_q) & (side_q > 0) & (side_q < 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kelly = np.where(valid & (edge > 0), edge / (1.0 - side_q), 0.0)
    # Small tolerance so an edge of exactly the threshold (e.g. 0.53 - 0.50) is not lost to rounding.
    eligible = valid & (edge >= threshold - 1e-12)
    raw = np.where(eligible, fraction * kelly * cash_f, 0.0)
    budget = cap * cash_f
    total = raw.sum()
    if cash_f > 0 and total > budget:
        raw = raw * (budget / total)

    bets = []
    for i in range(n):
        stake = _to_cents(raw[i]) if cash_f > 0 else Decimal("0.00")
        if not valid[i]:
            reason = "bad_price"
        elif edge[i] <= 0:
            reason = "no_edge"
        elif not eligible[i]:
            reason = "below_edge"
        elif stake < min_bet:
            reason = "below_min_bet"
        else:
            reason = "bet"
        bets.append(
            StakedBet(
                index=i,
                side=None if reason in ("no_edge", "bad_price") else ("NO" if buy_no[i] else "YES"),
                p=float(side_p[i]),
                price=float(side_q[i]),
                edge=float(edge[i]),
                kelly=float(kelly[i]),
                stake=stake if reason == "bet" else Decimal("0.00"),
                reason=reason,
            )
        )
    return bets
