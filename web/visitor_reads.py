"""Reads behind what the pages say around the numbers: a page of a market's forecasts, its
prices in outcome order, an entry's current value for its header, whether a staff
correction is waiting for new scores, and the home page's facts around its tables."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import reduce

from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Exists,
    JSONField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    When,
)
from django.http import Http404

from cohorts.models import Entry, Forecast, Position, Trade
from cohorts.series import write as series
from core.models import JobRun
from markets.models import Market, PricePoint, ResolutionChange
from scoring import selectors as scoring_selectors
from scoring.models import LeaderboardRow, ScoreRun
from scoring.stored import RunDetails
from web import selectors
from web.shapes import per_thread
from web.standings import table_rows

FORECASTS_PER_PAGE = 20
TRADES_PER_PAGE = 20
HOLDERS_SHOWN = 25


def market_forecasts_page(market: Market, number: int) -> Page:
    """One page of the market's stated forecasts, newest first (a popular market has
    thousands: the market page stays a page long). Http404 past the last page."""
    qs = (
        Forecast.objects.filter(market=market)
        .select_related("entry__competitor", "entry__cohort")
        .order_by("-created_at", "-id")
    )
    paginator = Paginator(qs, FORECASTS_PER_PAGE)
    if number > paginator.num_pages:
        raise Http404(f"there are {paginator.num_pages} pages of forecasts")
    page = paginator.page(number)
    for f in page.object_list:
        f.edge = None if f.market_price is None else f.probability - f.market_price
    return page


def market_trades_page(market: Market, number: int) -> Page:
    """One page of the paper trades made in the market, newest first, each with its entry and
    decision. Http404 past the last page."""
    qs = (
        Trade.objects.filter(position__market=market)
        .select_related("entry__competitor", "entry__cohort", "position")
        .order_by("-executed_at", "-id")
    )
    paginator = Paginator(qs, TRADES_PER_PAGE)
    if number > paginator.num_pages:
        raise Http404(f"there are {paginator.num_pages} pages of trades")
    return paginator.page(number)


def outcome_prices(market: Market) -> list[tuple[str, object]]:
    """The latest prices in the market's own outcome order ("Yes · No", as everywhere)."""
    prices = dict(market.last_prices or {})
    order = [o for o in market.outcomes or [] if o in prices]
    return [(o, prices[o]) for o in order + sorted(set(prices) - set(order))]


def final_prices(market: Market) -> list[tuple[str, object]]:
    """A resolved or void market's last quote of each outcome at or before its resolution (the
    price history's last point, never a quote synced after it: a resolved market trades at
    0.998 or 0.002, which is not a price anyone could have traded at), in outcome order."""
    points = PricePoint.objects.filter(market=market)
    if market.resolved_at is not None:
        points = points.filter(ts__lte=market.resolved_at)
    last = {
        row["outcome"]: row["ts"]
        for row in points.order_by().values("outcome").annotate(ts=Max("ts"))
    }
    if not last:
        return []
    found = dict(
        points.filter(
            reduce(operator.or_, (Q(outcome=o, ts=ts) for o, ts in last.items()))
        ).values_list("outcome", "price")
    )
    order = [o for o in market.outcomes or [] if o in found]
    return [(o, found[o]) for o in order + sorted(set(found) - set(order))]


def with_value(entry: Entry, open_positions: list[Position]) -> Entry:
    """The entry with the value and return its row on the cohort page shows (its series head,
    or cash plus open positions at cost before the first snapshot)."""
    cached = entry._state.fields_cache
    if "series_head" in cached:  # read with the entry (selectors.get_entry): no query
        h = cached["series_head"]
        entry.snap_total = h.last_total if h is not None and h.last_ts is not None else None
    else:
        head = series.entry_heads([entry.pk]).get(entry.pk)
        entry.snap_total = head[2] if head else None
    entry.invested = sum((p.cost_basis for p in open_positions), Decimal("0.00"))
    selectors.decorate_entry(entry)
    return entry


def rescoring_since(
    scope: str, run: ScoreRun | None, corrected_since: bool | None = None
) -> ResolutionChange | None:
    """The latest staff correction of a market this scope's entries forecast or held, made
    after the run's scores were started: until the next run lands, the page says the scores
    are being recomputed instead of showing them as current. `corrected_since`: whether any
    staff correction at all followed the run's start, when the caller knows (HomeFacts)."""
    if run is None:
        return None
    after = ResolutionChange.objects.filter(
        source=Market.ResolvedBy.ADMIN, changed_at__gt=run.started_at
    )
    # Usually no correction follows the latest run: one cheap test instead of the join below.
    if corrected_since is None:
        corrected_since = after.exists()
    if not corrected_since:
        return None
    # Few changes follow a run, so each is tested for a forecast or position in the scope.
    forecast = Forecast.objects.filter(market_id=OuterRef("market_id"), entry__cohort__kind=scope)
    position = Position.objects.filter(market_id=OuterRef("market_id"), entry__cohort__kind=scope)
    return after.filter(Exists(forecast) | Exists(position)).order_by("-changed_at", "-pk").first()


def last_correction(scope: str) -> ResolutionChange | None:
    """The latest staff correction of a market this scope's entries forecast or held: the
    leaderboard says its standings last changed because of it (the chart marks it too)."""
    forecast = Forecast.objects.filter(market_id=OuterRef("market_id"), entry__cohort__kind=scope)
    position = Position.objects.filter(market_id=OuterRef("market_id"), entry__cohort__kind=scope)
    return (
        ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN)
        .filter(Exists(forecast) | Exists(position))
        .select_related("market")
        .order_by("-changed_at", "-pk")
        .first()
    )


@dataclass(frozen=True)
class SyncState:
    """Why no market is synced yet, as /admin/attention/ knows it: the sync's failed runs since
    its last success (the latest first), or one running now."""

    running: bool
    failures: int
    last_error: str
    last_failed_at: datetime | None


SYNC_ERROR_CHARS = 300


def sync_state() -> SyncState:
    """The market sync's runs since it last succeeded (two small queries on the job index)."""
    runs = JobRun.objects.filter(job="sync")
    last_ok = runs.filter(status=JobRun.Status.OK).order_by("-started_at").first()
    since = runs.filter(started_at__gt=last_ok.started_at) if last_ok else runs
    failed = since.filter(status=JobRun.Status.FAILED).order_by("-started_at")
    latest = failed.first()
    return SyncState(
        running=since.filter(status=JobRun.Status.RUNNING).exists(),
        failures=failed.count(),
        last_error=" ".join((latest.error if latest else "").split())[:SYNC_ERROR_CHARS],
        last_failed_at=(latest.finished_at or latest.started_at) if latest else None,
    )


@dataclass(frozen=True)
class HomeFacts:
    """What `/` reads besides its chart, in one query: the scope's latest run, the run's
    leaderboard rows in the order asked for, its board's slice and its three answers (markets
    synced, any staff correction, one since the run: two annotations). On a cold render each
    query costs about as much of Django's work as the database's, whatever it reads."""

    run: ScoreRun | None  # without its details (deferred): `details` holds what is read of them
    rows: list[LeaderboardRow]  # the run's all-cohorts rows, sorted (web/selectors.sorted_rows)
    markets_synced: bool  # else the page says to sync markets first
    staff_corrections: bool | None  # any at all (None: not read); the chart marks the scope's
    corrected_since_run: bool  # after the run started: the scores are being recomputed
    details: RunDetails  # what the all-cohorts board reads of the run's (_board_slices)


def home_facts(scope: str, sort: str = "rank", descending: bool | None = None) -> HomeFacts:
    if sort not in selectors.SORTABLE:
        sort = "rank"
    if descending is None:
        descending = not selectors.SORTABLE[sort][1]
    rows = list(_home_rows(scope, sort, descending).all())
    if rows:
        first = rows[0]
        for row in rows:
            row.run = first.run  # one instance, as the rows of a run read through it share
        details = _sliced_details(rows)
        staff, since = _staff_tests(first.latest_staff, first.run)
        return HomeFacts(first.run, rows, first.synced, staff, since, details)
    # No run, or a run with no all-cohorts rows (nothing entered yet): the rare empty page.
    run = scoring_selectors.done_runs(scope).defer("details").annotate(**_home_tests(scope)).first()
    if run is None:  # nothing scored yet: the empty page needs only the first test
        return HomeFacts(
            None, [], selectors.synced_markets(scope).exists(), None, False, NO_DETAILS
        )
    staff, since = _staff_tests(run.latest_staff, run)
    return HomeFacts(run, [], run.synced, staff, since, NO_DETAILS)


@per_thread
def _home_rows(scope: str, sort: str, descending: bool) -> QuerySet[LeaderboardRow]:
    """home_facts' query for a scope and an order (a few dozen in all), built once per thread
    (web.shapes): building it and resolving its subqueries cost about a millisecond of a cold
    `/`, as much as the database's work. It holds no rows; callers run a copy (`.all()`)."""
    latest = scoring_selectors.done_runs(scope).values("pk")[:1]
    board, _, _ = selectors.sorted_rows(
        table_rows(LeaderboardRow.objects.filter(run_id=Subquery(latest), cohort__isnull=True)),
        sort,
        descending,
    )
    # The same answers on every row: each row carries them so that one query suffices.
    return (
        board.select_related("run")
        # The run's details hold every group's tests: the board reads its slice (below).
        .defer("run__details", *selectors.unshown_competitor("competitor"))
        .annotate(**_home_tests(scope), **_board_slices(None))
    )


NO_DETAILS = RunDetails()  # a board of no rows reads nothing of them


@dataclass(frozen=True)
class CohortFacts:
    """What the cohort page reads of scores and corrections, in one query: the cohort kind's
    latest run, that run's rows for the cohort in rank order (with their competitors), and
    whether any staff correction exists at all and any followed the run's start."""

    run: ScoreRun | None  # without its details (deferred): `details` holds what is read of them
    rows: list[LeaderboardRow]
    staff_corrections: bool
    corrected_since_run: bool
    details: RunDetails  # what this cohort's board reads of the run's (_board_slices)


def cohort_facts(cohort) -> CohortFacts:
    board = list(_cohort_rows(cohort.kind).filter(cohort=cohort))
    if board:
        first = board[0]
        for row in board:
            row.run = first.run
        details = _sliced_details(board)
        staff, since = _staff_tests(first.latest_staff, first.run)
        return CohortFacts(first.run, board, staff, since, details)
    # The run has not scored this cohort yet (or there is no run): the same tests on the run.
    runs = scoring_selectors.done_runs(cohort.kind).defer("details")
    run = runs.annotate(**_latest_staff()).first()
    if run is None:
        staff_corrections = ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN)
        return CohortFacts(None, [], staff_corrections.exists(), False, NO_DETAILS)
    staff, since = _staff_tests(run.latest_staff, run)
    return CohortFacts(run, [], staff, since, NO_DETAILS)


@per_thread
def _cohort_rows(kind: str) -> QuerySet[LeaderboardRow]:
    """cohort_facts' query for a cohort kind, built once per thread as home's is (_home_rows),
    filtered to the cohort by the caller."""
    latest = scoring_selectors.done_runs(kind).values("pk")[:1]
    rows = table_rows(
        LeaderboardRow.objects.filter(run_id=Subquery(latest))
        .select_related("run", "competitor")
        .defer("run__details", *selectors.unshown_competitor("competitor"))
        .order_by("rank", "competitor__display_name")
    )
    return rows.annotate(**_latest_staff(), **_board_slices(OuterRef("cohort_id")))


def _board_slices(cohort: OuterRef | None) -> dict[str, Case]:
    """What a board reads of its run's details (its BoardSlice, scoring.selectors.group_details)
    as an annotation of one of its rows, the lowest id, so the rows' one query brings it: on
    every row it would be sent and parsed once per row. `cohort`: the board's (None: all)."""
    lowest = (
        LeaderboardRow.objects.filter(run_id=OuterRef("run_id"), cohort_id=cohort)
        .order_by("pk")
        .values("pk")[:1]
    )
    part = scoring_selectors.board_slice(OuterRef("run_id"), cohort).values("details")
    return {
        "board_slice": Case(
            When(Q(pk=Subquery(lowest)), then=Subquery(part[:1])), output_field=JSONField()
        )
    }


def _sliced_details(rows: list[LeaderboardRow]) -> RunDetails:
    """The board's RunDetails from the one row that carries _board_slices."""
    return RunDetails.from_json(next((r.board_slice for r in rows if r.board_slice), None))


def _home_tests(scope: str) -> dict[str, Exists | Subquery]:
    """HomeFacts' tests as annotations: whether the scope has markets to show, and when the
    latest staff correction was made (_latest_staff)."""
    return {"synced": Exists(selectors.synced_markets(scope)), **_latest_staff()}


def _latest_staff() -> dict[str, Subquery]:
    """When the latest staff correction was made, as an annotation (None: there is none).
    Whether any exists and whether one followed a run's start both follow from it
    (_staff_tests): one subquery to build where two existence tests cost twice as much."""
    staff = ResolutionChange.objects.filter(source=Market.ResolvedBy.ADMIN)
    return {"latest_staff": Subquery(staff.order_by("-changed_at").values("changed_at")[:1])}


def _staff_tests(latest: datetime | None, run: ScoreRun) -> tuple[bool, bool]:
    """(any staff correction at all, one since the run started), from _latest_staff."""
    return latest is not None, latest is not None and latest > run.started_at
