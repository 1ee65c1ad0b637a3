"""A decision followed to its score: each question it answered (one market) with the outcome
once known, its Brier and the market's, and each trade with its settlement, payout and P/L.

The Brier of a question is the leaderboard's (scoring/questions.py): the stated outcomes are
completed into a full vector (the rest shared like the shown prices) and scored with half the
Brier (1950) sum over the market's outcomes; the market's Brier completes the shown prices of the
same outcomes the same way. The page recomputes it for one decision from the same functions, so a
reader can follow one row of the leaderboard's mean back to the decision that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from cohorts.models import Decision, Forecast, Settlement, Trade, Universe
from markets.models import Market
from scoring import metrics


@dataclass
class QuestionView:
    market: Market
    forecasts: list[Forecast] = field(default_factory=list)
    state: str = "open"  # open / resolved / void / unscored
    brier: float | None = None
    market_brier: float | None = None


@dataclass
class TradeView:
    trade: Trade
    settlement: Settlement | None
    payout: Decimal | None  # what this trade's shares were paid at settlement (BUY only)
    pnl: Decimal | None  # SELL: realised; BUY held to settlement: payout - amount
    note: str = ""


def question_views(decision: Decision) -> list[QuestionView]:
    """One row per market the decision stated forecasts on, in the order it stated them."""
    views: dict[int, QuestionView] = {}
    for f in decision.forecasts.all():
        views.setdefault(f.market_id, QuestionView(f.market)).forecasts.append(f)
    universe: dict[int, dict] | None = None
    for view in views.values():
        market = view.market
        if market.status == Market.Status.VOID:
            view.state = "void"
            continue
        if market.status != Market.Status.RESOLVED:
            continue
        names = list(market.outcomes or [])
        if market.resolved_outcome not in names or len(names) < 2:
            view.state = "unscored"
            continue
        if len(names) > 2 and universe is None:
            universe = _shown(decision)
        view.brier, view.market_brier = _briers(view, names, (universe or {}).get(market.pk))
        view.state = "resolved" if view.brier is not None else "unscored"
    return list(views.values())


def _shown(decision: Decision) -> dict[int, dict]:
    items = (
        Universe.objects.filter(cohort_id=decision.entry.cohort_id, week=decision.week)
        .values_list("markets", flat=True)
        .first()
    )
    return {
        item["market_id"]: item.get("prices") or {}
        for item in items or []
        if isinstance(item, dict) and "market_id" in item
    }


def _briers(
    view: QuestionView, names: list[str], prices: dict | None
) -> tuple[float | None, float | None]:
    k = len(names)
    stated = np.full((1, k), np.nan)
    shown = np.full((1, k), np.nan)
    for f in view.forecasts:
        if f.outcome in names:
            i = names.index(f.outcome)
            stated[0, i] = float(f.probability)
            if f.market_price is not None:
                shown[0, i] = float(f.market_price)
    said = ~np.isnan(stated)
    if not said.any():
        return None, None
    weights = shown.copy()
    if k > 2 and prices:
        full = np.asarray([_float(prices.get(name)) for name in names])
        weights[0] = np.where(np.isnan(weights[0]), full, weights[0])
    o = np.asarray([names.index(view.market.resolved_outcome)])
    brier = float(metrics.question_brier_loss(metrics.complete_forecast(stated, weights), o)[0])
    if (said & np.isnan(shown)).any():
        return brier, None
    M = metrics.complete_forecast(np.where(said, shown, np.nan), weights)
    return brier, float(metrics.question_brier_loss(M, o)[0])


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def trade_views(decision: Decision) -> list[TradeView]:
    """Each trade with the settlement of its position (the live one, when there is one)."""
    trades = list(decision.trades.all())
    positions = {t.position_id for t in trades}
    live = {
        s.position_id: s
        for s in Settlement.objects.filter(position_id__in=positions, reversed_at__isnull=True)
    }
    sold = set(
        Trade.objects.filter(position_id__in=positions, side=Trade.Side.SELL).values_list(
            "position_id", flat=True
        )
    )
    return [_trade_view(t, live.get(t.position_id), t.position_id in sold) for t in trades]


def _trade_view(trade: Trade, settlement: Settlement | None, partly_sold: bool) -> TradeView:
    if trade.side == Trade.Side.SELL:
        return TradeView(trade, settlement, None, trade.realized_pnl, "realised at the sale")
    if settlement is None:
        return TradeView(trade, None, None, None, "")
    if partly_sold or not settlement.shares:
        # The position was partly sold before it settled: its P/L is split across its trades
        # by average cost, so this buy alone has no payout of its own.
        return TradeView(trade, settlement, None, None, "position partly sold before settling")
    per_share = settlement.payout / settlement.shares
    payout = (per_share * trade.shares).quantize(Decimal("0.01"))
    return TradeView(trade, settlement, payout, payout - trade.amount, "held to settlement")
