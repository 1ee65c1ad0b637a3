"""Writes of the competition engine: opening cohorts, moving them through their lifecycle, and
executing BET/SELL orders against an entry's portfolio.

Money rules (see also cohorts/models.py):
- cash is Decimal with 2 places; shares have 6 places; prices are Decimals strictly inside (0, 1).
- BUY: the entry pays exactly `amount` (whole cents); shares = amount / price rounded DOWN to
  6 places, so the entry never receives a fraction of a share it did not pay for.
- SELL p%: shares sold = shares * p / 100 rounded DOWN to 6 places (all shares at 100%);
  proceeds = shares sold * price rounded DOWN to cents; the cost basis removed is the same
  fraction of the cost basis rounded half-even to cents (all of it at 100%); realised P/L =
  proceeds - cost removed. Rounding down on every payment to the entry means rounding can
  never create money.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from agents.models import Competitor, Release
from cohorts.lineup import NoCompetitors
from cohorts.models import Cohort, Decision, Entry, LedgerEntry, Position, Trade
from cohorts.scope import live_path_kind
from cohorts.seals import state as seal_state
from core import clock
from core.methodology import CONSTANTS, METHODOLOGY_HASH, METHODOLOGY_VERSION
from core.versions import data_changed
from markets.models import Market
from markets.pricing import outcome_price

log = logging.getLogger(__name__)

CENT = Decimal("0.01")
SHARE_PLACES = Decimal("0.000001")
MIN_BET = Decimal(str(CONSTANTS.min_bet))
MAX_BET_FRACTION = Decimal(str(CONSTANTS.max_bet_fraction))

PriceBook = dict[tuple[int, str], Decimal]


def _now(at: datetime | None) -> datetime:
    return at if at is not None else clock.now()


# --- cohorts -----------------------------------------------------------------------------


def week_start_for(at: datetime) -> datetime:
    """Sunday 00:00 UTC at or before `at`."""
    at = at.astimezone(UTC)
    days_since_sunday = (at.weekday() + 1) % 7  # Monday is 0, Sunday 6
    day = at.date() - timedelta(days=days_since_sunday)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _as_week_start(week_start: date | datetime) -> datetime:
    """Accept a date or an aware datetime; it must be a Sunday (at 00:00 UTC)."""
    if isinstance(week_start, datetime):
        if timezone.is_naive(week_start):
            raise ValueError("week_start must be timezone-aware")
        value = week_start.astimezone(UTC)
    else:
        value = datetime(week_start.year, week_start.month, week_start.day, tzinfo=UTC)
    if value != week_start_for(value):
        raise ValueError(
            f"week_start must be a Sunday 00:00 UTC, got {value:%Y-%m-%d %H:%M} ({value:%A})"
        )
    return value


def open_cohort(
    week_start: date | datetime | None = None,
    *,
    kind: str | None = None,
    label: str = "",
    competitors=None,
    at: datetime | None = None,
    refuse_empty: bool = False,
) -> tuple[Cohort, bool]:
    """Open the cohort of `kind` for the week (default: the week containing `at`).

    Returns (cohort, created). Idempotent and safe to run concurrently: the unique constraint
    on (kind, week_start) decides the race; the loser gets the winner's cohort. Each active
    competitor (or each of `competitors`) gets `replicates` entries, each funded by a DEPOSIT
    ledger row, all in the cohort's transaction.

    With `refuse_empty` (the operator's verb and the beat), a cohort that would have no entry
    is not created: NoCompetitors says why. Entries are fixed when a cohort opens, so an empty
    week opened by mistake would stay empty, and competitors added later join the next one.
    """
    kind = kind or live_path_kind()
    start = _as_week_start(week_start) if week_start is not None else week_start_for(_now(at))
    if refuse_empty and competitors is None:
        existing = Cohort.objects.filter(kind=kind, week_start=start).first()
        if existing is not None:
            return existing, False
        if not Competitor.objects.filter(active=True).exists():
            raise NoCompetitors(
                f"no active competitor: not opening the {start:%Y-%m-%d} cohort with 0 entries "
                "(`manage.py migrate` seeds the default lineup on a new database; "
                "add or activate competitors in the admin)"
            )
    with transaction.atomic():
        try:
            # The savepoint keeps the outer transaction usable after an IntegrityError.
            with transaction.atomic():
                cohort = Cohort.objects.create(
                    kind=kind,
                    week_start=start,
                    label=label,
                    decision_weeks=settings.ARENA_DECISION_WEEKS,
                    methodology_version=METHODOLOGY_VERSION,
                    methodology_hash=METHODOLOGY_HASH,
                )
        except IntegrityError:
            return Cohort.objects.get(kind=kind, week_start=start), False
        if competitors is None:
            competitors = Competitor.objects.filter(active=True).order_by("pk")
        _fund_entries(cohort, competitors, _now(at))
    log.info(
        "opened %s with %d entries", cohort, cohort.entries.count(), extra={"cohort": cohort.pk}
    )
    data_changed()
    return cohort, True


def _fund_entries(cohort: Cohort, competitors, at: datetime) -> list[Entry]:
    # Each entry is pinned to its competitor's release as of now: a later change of the
    # model is a new release for cohorts opened after it, never for this one.
    releases = {c.pk: Release.current(c) for c in competitors}
    entries = [
        Entry(
            cohort=cohort,
            competitor=competitor,
            release=releases[competitor.pk],
            replicate=rep,
            cash=cohort.initial_balance,
            initial_balance=cohort.initial_balance,
        )
        for competitor in competitors
        for rep in range(1, max(competitor.replicates, 1) + 1)
    ]
    Entry.objects.bulk_create(entries)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            entry=entry,
            kind=LedgerEntry.Kind.DEPOSIT,
            amount=cohort.initial_balance,
            memo="initial balance",
            created_at=at,
        )
        for entry in entries
    )
    return entries


def cohort_week(cohort: Cohort, at: datetime) -> int:
    """1-based week number of `at` in the cohort (0 or less: before the cohort starts)."""
    return (at - cohort.week_start).days // 7 + 1


def decision_eligible_cohorts(
    at: datetime | None = None, kind: str | None = None
) -> QuerySet[Cohort]:
    """Active cohorts of `kind` (default: the live path's, see cohorts.scope) that have started
    and are still within their decision weeks."""
    at = _now(at)
    kind = kind or live_path_kind()
    candidates = Cohort.objects.filter(kind=kind, status=Cohort.Status.ACTIVE, week_start__lte=at)
    # decision_weeks is per cohort; there are only a handful of active cohorts, so the
    # week arithmetic is done here rather than as database-specific interval SQL.
    ids = [
        c.pk
        for c in candidates.only("pk", "week_start", "decision_weeks")
        if cohort_week(c, at) <= c.decision_weeks
    ]
    return Cohort.objects.filter(pk__in=ids).order_by("week_start")


def advance_cohorts(at: datetime | None = None, cohorts=None) -> dict[str, int]:
    """active -> tracking after the decision weeks; tracking -> completed once nothing is open.

    Each transition is a conditional UPDATE, so two concurrent runs cannot double-apply it.
    Without `cohorts` (ids), the live cohorts: a replay or demo on a simulated clock passes its
    own cohorts so its past `at` never completes a live cohort.
    """
    at = _now(at)
    scope = (
        Cohort.objects.filter(pk__in=cohorts)
        if cohorts is not None
        else Cohort.objects.filter(kind=live_path_kind())
    )
    to_tracking = 0
    moved: list[int] = []
    for cohort in scope.filter(status=Cohort.Status.ACTIVE, week_start__lte=at):
        if cohort_week(cohort, at) > cohort.decision_weeks:
            n = Cohort.objects.filter(pk=cohort.pk, status=Cohort.Status.ACTIVE).update(
                status=Cohort.Status.TRACKING
            )
            to_tracking += n
            moved += [cohort.pk] * n
    has_open = Exists(
        Position.objects.filter(entry__cohort=OuterRef("pk"), status=Position.Status.OPEN)
    )
    done = list(
        scope.filter(status=Cohort.Status.TRACKING).filter(~has_open).values_list("pk", flat=True)
    )
    completed = Cohort.objects.filter(pk__in=done, status=Cohort.Status.TRACKING).update(
        status=Cohort.Status.COMPLETED, completed_at=at
    )
    if to_tracking or completed:
        data_changed()
        # The status moves are the application's: the sealed state of these cohorts follows.
        seal_state.cohorts_changed(moved + done, fields=("status",))
    return {"tracking": to_tracking, "completed": completed}


# --- execution ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BetOrder:
    market_id: int
    outcome: str
    amount: Decimal


@dataclass(frozen=True)
class SellOrder:
    position_id: int
    percentage: Decimal


class ExecutionError(Exception):
    """The whole decision was rejected; `reasons` says why, one line per invalid item."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))


@dataclass
class _Book:
    """What the rules look at: the entry's cash, the markets and the entry's open positions."""

    cash: Decimal
    markets: dict[int, Market]
    positions: dict[int, Position]
    # A late decision (see cohorts/decisions.UNIVERSE_PRICE_WINDOW) trades only at market quotes
    # marked at or after `fresh_after`, and records the price its prompt showed (`shown`).
    fresh_after: datetime | None = None
    shown: PriceBook | None = None


def _decimal(value) -> Decimal | None:
    try:
        d = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError, TypeError):
        return None
    return d if d.is_finite() else None


def _order_price(
    prices: PriceBook | None, market: Market, outcome: str, fresh_after: datetime | None = None
) -> tuple[Decimal | None, str]:
    """The decision's quote when it has one, else the market's latest quote (none when it was
    marked before `fresh_after`: a late decision never trades at a stale price)."""
    if prices and (market.pk, outcome) in prices:
        return _decimal(prices[(market.pk, outcome)]), "decision"
    if fresh_after is not None and (
        market.last_priced_at is None or market.last_priced_at < fresh_after
    ):
        return None, "stale"
    return outcome_price(market, None, outcome), "market"


def _market_problem(market: Market | None, market_id: int) -> str | None:
    if market is None:
        return f"market {market_id} does not exist"
    if market.status != Market.Status.OPEN:
        return f"market {market_id} is {market.status}, not open"
    if market.settled_at is not None:
        # Reopened by staff but the old settlement is not reversed yet (settle_market will).
        return f"market {market_id} is awaiting re-settlement"
    return None


def _valid(value: object) -> Decimal:
    """A number _validate accepted: execution runs only after the rules passed under lock."""
    number = _decimal(value)
    if number is None:
        raise ExecutionError([f"{value!r} is not a number"])
    return number


def _price_problem(price: Decimal | None, source: str, where: str) -> str | None:
    if price is None and source == "stale":
        return f"{where}: no price marked recently enough to trade at (the market's is stale)"
    if price is None:
        return f"{where}: no price"
    if not (Decimal(0) < price < Decimal(1)):
        return f"{where}: price {price} is not strictly between 0 and 1"
    return None


def _validate(
    book: _Book, bets: list[BetOrder], sells: list[SellOrder], prices: PriceBook | None
) -> list[str]:
    reasons: list[str] = []
    total_bets = Decimal(0)
    for i, bet in enumerate(bets, 1):
        where = f"BET {i} (market {bet.market_id}, {bet.outcome!r})"
        amount = _decimal(bet.amount)
        if amount is None:
            reasons.append(f"{where}: amount {bet.amount!r} is not a number")
            continue
        if amount != amount.quantize(CENT):
            reasons.append(f"{where}: amount {amount} has fractions of a cent")
        if amount < MIN_BET:
            reasons.append(f"{where}: amount ${amount} is below the ${MIN_BET} minimum")
        total_bets += amount
        market = book.markets.get(bet.market_id)
        problem = _market_problem(market, bet.market_id)
        if problem or market is None:
            reasons.append(f"{where}: {problem}")
            continue
        if bet.outcome not in (market.outcomes or []):
            reasons.append(f"{where}: unknown outcome (choose from {', '.join(market.outcomes)})")
            continue
        problem = _price_problem(
            *_order_price(prices, market, bet.outcome, book.fresh_after), where
        )
        if problem:
            reasons.append(problem)

    limit = (book.cash * MAX_BET_FRACTION).quantize(CENT, rounding=ROUND_DOWN)
    if total_bets > limit:
        reasons.append(
            f"BETs total ${total_bets}, above {MAX_BET_FRACTION:.0%} of cash (${limit} of ${book.cash})"
        )
    if total_bets > book.cash:
        reasons.append(f"BETs total ${total_bets}, more than the cash ${book.cash}")

    seen: set[int] = set()
    for i, sell in enumerate(sells, 1):
        where = f"SELL {i} (position {sell.position_id})"
        if sell.position_id in seen:
            reasons.append(f"{where}: the same position is sold twice in one decision")
            continue
        seen.add(sell.position_id)
        pct = _decimal(sell.percentage)
        if pct is None or not (Decimal(1) <= pct <= Decimal(100)):
            reasons.append(f"{where}: percentage {sell.percentage!r} must be between 1 and 100")
            continue
        position = book.positions.get(sell.position_id)
        if position is None:
            reasons.append(f"{where}: not an open position of this entry")
            continue
        market = book.markets.get(position.market_id)
        problem = _market_problem(market, position.market_id)
        if problem or market is None:
            reasons.append(f"{where}: {problem}")
            continue
        problem = _price_problem(
            *_order_price(prices, market, position.outcome, book.fresh_after), where
        )
        if problem:
            reasons.append(problem)
            continue
        if _shares_to_sell(position, pct) <= 0:
            reasons.append(f"{where}: {pct}% of {position.shares} shares rounds to nothing")
    return reasons


def _load_book(entry_id: int, bets, sells, *, lock: bool) -> _Book:
    """Read the entry, its open positions and the markets involved (locked when executing).

    Lock order, shared with settlement to avoid deadlocks (docs/architecture.md, "Lock
    order"): markets (by pk), then the entry, then its positions. FOR NO KEY UPDATE on markets
    still lets other transactions insert rows that reference them.
    """
    entries = Entry.objects.all()
    positions_qs = Position.objects.filter(entry_id=entry_id, status=Position.Status.OPEN)
    markets_qs = Market.objects.all()
    if lock:
        entries = entries.select_for_update()
        positions_qs = positions_qs.select_for_update()
        markets_qs = markets_qs.select_for_update(no_key=True)
    sell_ids = [s.position_id for s in sells]
    # Which markets the sells touch is needed before locking; a plain read is enough since a
    # position's market never changes.
    sell_markets = set(
        Position.objects.filter(pk__in=sell_ids, entry_id=entry_id).values_list(
            "market_id", flat=True
        )
    )
    market_ids = sorted({b.market_id for b in bets if isinstance(b.market_id, int)} | sell_markets)
    markets = {m.pk: m for m in markets_qs.filter(pk__in=market_ids).order_by("pk")}
    entry = entries.get(pk=entry_id)
    positions = {p.pk: p for p in positions_qs.order_by("pk")}
    return _Book(cash=entry.cash, markets=markets, positions=positions)


def check_orders(
    entry: Entry,
    bets: list[BetOrder],
    sells: list[SellOrder],
    prices: PriceBook | None,
    *,
    fresh_after: datetime | None = None,
) -> list[str]:
    """Every rule, without writing: an empty list means execute_orders would accept the orders.

    Reads the entry's current cash from the database (not the possibly stale `entry.cash`).
    """
    book = _load_book(entry.pk, bets, sells, lock=False)
    book.fresh_after = fresh_after
    return _validate(book, list(bets), list(sells), prices)


def _shares_to_sell(position: Position, pct: Decimal) -> Decimal:
    if pct >= 100:
        return position.shares
    return (position.shares * pct / 100).quantize(SHARE_PLACES, rounding=ROUND_DOWN)


def execute_orders(
    entry: Entry,
    bets: list[BetOrder],
    sells: list[SellOrder],
    prices: PriceBook | None,
    *,
    decision=None,
    at: datetime | None = None,
    fresh_after: datetime | None = None,
    shown: PriceBook | None = None,
) -> list[Trade]:
    """Apply a decision's SELLs then BETs in one transaction, or nothing at all.

    Raises ExecutionError(reasons) when any item breaks a rule (checked again under the
    locks, so a decision validated earlier cannot overspend after a concurrent change).
    Prices come from `prices` (the quotes the decision saw) and, for items it lacks, from
    the market's latest quote, which must be marked at or after `fresh_after` when that is
    given; the price `shown` to the decision is then kept in the trade's quote beside the one
    it executed at. Sells run first; the 25% limit is on the cash before them.
    """
    at = _now(at)
    bets, sells = list(bets), list(sells)
    with transaction.atomic():
        book = _load_book(entry.pk, bets, sells, lock=True)
        book.fresh_after, book.shown = fresh_after, shown
        reasons = _validate(book, bets, sells, prices)
        if reasons:
            raise ExecutionError(reasons)
        trades = [_sell(entry, book, s, prices, decision, at) for s in sells]
        trades += [_buy(entry, book, b, prices, decision, at) for b in bets]
        net = sum(
            (t.amount if t.side == Trade.Side.SELL else -t.amount for t in trades), Decimal(0)
        )
        if trades:
            # book.cash was read under the entry's row lock, so nobody changed it since; the
            # sum is done in Decimal (SQLite would do SQL arithmetic in floating point).
            entry.cash = book.cash + net
            Entry.objects.filter(pk=entry.pk).update(cash=entry.cash)
            data_changed()
    return trades


def _quote(
    prices: PriceBook | None, market: Market, outcome: str, book: _Book
) -> tuple[Decimal, dict]:
    price, source = _order_price(prices, market, outcome, book.fresh_after)
    if price is None:  # _validate refuses an order without a price; this is its guard
        raise ExecutionError([f"market {market.pk}: no price for {outcome!r}"])
    quote = {"price": str(price), "source": source, "last_prices": market.last_prices}
    shown = (book.shown or {}).get((market.pk, outcome))
    if book.fresh_after is not None:
        # Re-priced at execution: both prices, and when the executed one was marked.
        quote["shown_price"] = str(shown) if shown is not None else None
        quote["priced_at"] = market.last_priced_at.isoformat() if market.last_priced_at else None
    return price, quote


def _buy(entry: Entry, book: _Book, bet: BetOrder, prices, decision, at: datetime) -> Trade:
    market = book.markets[bet.market_id]
    amount = _valid(bet.amount)
    price, quote = _quote(prices, market, bet.outcome, book)
    shares = (amount / price).quantize(SHARE_PLACES, rounding=ROUND_DOWN)
    position = next(
        (
            p
            for p in book.positions.values()
            if p.market_id == market.pk and p.outcome == bet.outcome
        ),
        None,
    )
    if position is None:
        position = Position.objects.create(
            entry_id=entry.pk,
            market=market,
            outcome=bet.outcome,
            shares=shares,
            cost_basis=amount,
            opened_at=at,
        )
        book.positions[position.pk] = position
    else:
        # Average in: shares and cost add up, so the average price is cost / shares.
        position.shares += shares
        position.cost_basis += amount
        position.save(update_fields=["shares", "cost_basis"])
    trade = Trade.objects.create(
        entry_id=entry.pk,
        decision=decision,
        position=position,
        side=Trade.Side.BUY,
        amount=amount,
        shares=shares,
        price=price,
        quote=quote,
        executed_at=at,
    )
    LedgerEntry.objects.create(
        entry_id=entry.pk,
        kind=LedgerEntry.Kind.BUY,
        amount=-amount,
        trade=trade,
        memo=f"buy {bet.outcome} in market {market.pk}",
        created_at=at,
    )
    return trade


def _sell(entry: Entry, book: _Book, sell: SellOrder, prices, decision, at: datetime) -> Trade:
    position = book.positions[sell.position_id]
    market = book.markets[position.market_id]
    pct = _valid(sell.percentage)
    price, quote = _quote(prices, market, position.outcome, book)
    shares = _shares_to_sell(position, pct)
    proceeds = (shares * price).quantize(CENT, rounding=ROUND_DOWN)
    if shares == position.shares:
        cost_removed = position.cost_basis
    else:
        cost_removed = (position.cost_basis * shares / position.shares).quantize(
            CENT, rounding=ROUND_HALF_EVEN
        )
    pnl = proceeds - cost_removed
    position.shares -= shares
    position.cost_basis -= cost_removed
    position.realized_pnl += pnl
    fields = ["shares", "cost_basis", "realized_pnl"]
    if position.shares == 0:
        position.status = Position.Status.EXITED
        position.closed_at = at
        fields += ["status", "closed_at"]
        del book.positions[position.pk]
    position.save(update_fields=fields)
    trade = Trade.objects.create(
        entry_id=entry.pk,
        decision=decision,
        position=position,
        side=Trade.Side.SELL,
        amount=proceeds,
        shares=shares,
        price=price,
        quote=quote,
        realized_pnl=pnl,
        executed_at=at,
    )
    if proceeds:
        LedgerEntry.objects.create(
            entry_id=entry.pk,
            kind=LedgerEntry.Kind.SELL,
            amount=proceeds,
            trade=trade,
            memo=f"sell {pct}% of position {position.pk}",
            created_at=at,
        )
    return trade


def mark_decisions_retryable(decisions) -> int:
    """Let `arena decide` run failed or skipped decisions again (e.g. after fixing a key).

    Only rows that ended failed/skipped move, in one conditional UPDATE, so a decision that is
    running or done is never touched; the old LLM calls stay in the audit.
    """
    return decisions.filter(status__in=[Decision.Status.FAILED, Decision.Status.SKIPPED]).update(
        status=Decision.Status.RETRYABLE
    )
