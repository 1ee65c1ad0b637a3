"""Test data for the site, built with the ORM: a small arena with every kind of row.

`World` builds named things (markets, competitors, cohorts, entries with decisions, trades,
positions, settlements and snapshots, a score run) so each test reads like a story and can add
more rows to check that a page's query count does not grow with them.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from agents.models import Competitor
from cohorts.models import (
    Cohort,
    Decision,
    Entry,
    Forecast,
    LedgerEntry,
    LLMCall,
    Position,
    Settlement,
    Trade,
    Universe,
)
from cohorts.snapshots import SnapshotRow, store_snapshots
from markets.models import Market, PricePoint, ResolutionChange
from scoring.models import LeaderboardRow, ScoreRun
from scoring.services import store_board_slices

T0 = datetime(2026, 11, 1, tzinfo=UTC)  # a Sunday
XSS = '<script>alert(1)</script><img src=x onerror="alert(2)"><b>bold</b>'
_seq = itertools.count(1)


def save_details(run: ScoreRun) -> None:
    """Store a test's hand-written run details as compute_scores stores a run's: with each
    group's board slice (scoring.models.BoardSlice), what the leaderboards read."""
    run.save()
    run.board_slices.all().delete()
    run.__dict__.pop("stored_details", None)
    store_board_slices(run, run.stored_details)


@dataclass
class World:
    markets: list[Market] = field(default_factory=list)
    competitors: list[Competitor] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    # --- markets ------------------------------------------------------------------------
    def market(self, question: str | None = None, **kw) -> Market:
        n = next(_seq)
        defaults = {
            "external_id": f"m{n}",
            "question": question or f"Will event {n} happen?",
            "description": f"Resolves YES if event {n} happens.",
            "outcomes": ["Yes", "No"],
            "last_prices": {"Yes": "0.40", "No": "0.60"},
            "volume": Decimal(1000 * n),
            "last_synced_at": T0,
            "close_time": T0 + timedelta(days=30),
        }
        defaults.update(kw)
        m = Market.objects.create(**defaults)
        PricePoint.objects.bulk_create(
            PricePoint(market=m, outcome=o, ts=T0 + timedelta(hours=h), price=Decimal("0.4"))
            for h in range(5)
            for o in m.outcomes
        )
        self.markets.append(m)
        return m

    def resolve(self, market: Market, outcome: str = "Yes") -> Market:
        ResolutionChange.objects.create(
            market=market,
            source=Market.ResolvedBy.UPSTREAM,
            from_status=market.status,
            to_status=Market.Status.RESOLVED,
            to_outcome=outcome,
            reason="upstream resolved",
        )
        market.status = Market.Status.RESOLVED
        market.resolved_outcome = outcome
        market.resolved_at = T0 + timedelta(days=3)
        market.resolved_by = Market.ResolvedBy.UPSTREAM
        market.save()
        return market

    # --- competitors and cohorts --------------------------------------------------------
    def competitor(self, slug: str | None = None, kind: str = Competitor.Kind.LLM) -> Competitor:
        n = next(_seq)
        slug = slug or f"model-{n}"
        c = Competitor.objects.create(
            slug=slug,
            display_name=slug.replace("-", " ").title(),
            kind=kind,
            model_id=f"vendor/{slug}" if kind == Competitor.Kind.LLM else "",
            strategy="" if kind == Competitor.Kind.LLM else Competitor.Strategy.MARKET,
        )
        self.competitors.append(c)
        return c

    def cohort(self, kind: str = Cohort.Kind.LIVE, weeks_ago: int = 0, **kw) -> Cohort:
        c = Cohort.objects.create(
            kind=kind, week_start=T0 - timedelta(weeks=weeks_ago), methodology_hash="ab" * 32, **kw
        )
        self.cohorts.append(c)
        return c

    def entry(self, cohort: Cohort, competitor: Competitor, replicate: int = 1) -> Entry:
        e = Entry.objects.create(
            cohort=cohort, competitor=competitor, replicate=replicate, cash=Decimal("10000.00")
        )
        LedgerEntry.objects.create(
            entry=e, kind=LedgerEntry.Kind.DEPOSIT, amount=Decimal("10000.00"), created_at=T0
        )
        self.entries.append(e)
        return e

    # --- a decision with everything hanging off it --------------------------------------
    def decision(
        self,
        entry: Entry,
        week: int = 1,
        market: Market | None = None,
        reasoning: str = "",
        raw_response: str = '{"action": "BET"}',
        settle: str | None = None,
    ) -> Decision:
        market = market or self.markets[0]
        at = entry.cohort.week_start + timedelta(weeks=week - 1, minutes=5)
        d = Decision.objects.create(
            entry=entry,
            week=week,
            status=Decision.Status.DONE,
            claimed_at=at,
            finished_at=at,
            decided_at=at,
            action=Decision.Action.BET,
            reasoning=reasoning or f"Week {week}: the price looks low.",
            parsed={"action": "BET", "bets": [{"market_id": market.pk, "amount": "100"}]},
            system_prompt="You are a forecaster.",
            user_prompt="Markets:\n" + market.question,
            tokens_in=1000,
            tokens_out=200,
            cost_usd=Decimal("0.012"),
            latency_ms=900,
            cash_before=entry.cash,
        )
        LLMCall.objects.create(
            decision=d,
            attempt=1,
            raw_response=raw_response,
            http_status=200,
            prompt_tokens=1000,
            completion_tokens=200,
            cost_usd=Decimal("0.012"),
            latency_ms=900,
            served_model="vendor/model-2026",
            started_at=at,
            request={"model": "vendor/model"},
        )
        Forecast.objects.create(
            decision=d,
            entry=entry,
            market=market,
            outcome="Yes",
            probability=0.55,
            market_price=0.40,
            source=Forecast.Source.BET,
            created_at=at,
        )
        closed = settle is not None
        pos = Position.objects.create(
            entry=entry,
            market=market,
            outcome="Yes",
            shares=Decimal("250"),
            cost_basis=Decimal("100.00"),
            opened_at=at,
            status=Position.Status.SETTLED if closed else Position.Status.OPEN,
            closed_at=at + timedelta(days=2) if closed else None,
        )
        trade = Trade.objects.create(
            entry=entry,
            decision=d,
            position=pos,
            side=Trade.Side.BUY,
            amount=Decimal("100.00"),
            shares=Decimal("250"),
            price=Decimal("0.40"),
            executed_at=at,
        )
        LedgerEntry.objects.create(
            entry=entry,
            kind=LedgerEntry.Kind.BUY,
            amount=Decimal("-100.00"),
            trade=trade,
            created_at=at,
        )
        if closed:
            Settlement.objects.create(
                position=pos,
                market=market,
                kind=settle,
                outcome="Yes",
                shares=pos.shares,
                cost_basis=pos.cost_basis,
                payout=Decimal("250.00") if settle == Settlement.Kind.WON else Decimal("0.00"),
                settled_at=at + timedelta(days=2),
            )
        Entry.objects.filter(pk=entry.pk).update(cash=entry.cash - Decimal("100.00"))
        entry.refresh_from_db()
        self.decisions.append(d)
        return d

    def universe(self, cohort: Cohort, week: int = 1) -> Universe:
        return Universe.objects.create(
            cohort=cohort,
            week=week,
            frozen_at=cohort.week_start,
            content_hash="cd" * 32,
            markets=[
                {"market_id": m.pk, "question": m.question, "prices": m.last_prices}
                for m in self.markets
            ],
        )

    def snapshots(self, entry: Entry, n: int = 12, step_minutes: int = 10) -> None:
        # Through the service, which keeps the chart series as the snapshots are written.
        store_snapshots(
            [
                SnapshotRow(
                    entry_id=entry.pk,
                    ts=entry.cohort.week_start + timedelta(minutes=step_minutes * i),
                    cash=entry.cash,
                    positions_value=Decimal("100.00"),
                    total=entry.cash + Decimal("100.00") + Decimal(i),
                    realized_pnl=Decimal("0"),
                    unrealized_pnl=Decimal(i),
                )
                for i in range(n)
            ]
        )

    def score_run(self, scope: str = "live", n_resolved: int = 3) -> ScoreRun:
        run = ScoreRun.objects.create(
            scope=scope,
            status=ScoreRun.Status.DONE,
            as_of=T0 + timedelta(days=7),
            started_at=T0 + timedelta(days=7),
            finished_at=T0 + timedelta(days=7),
            methodology_version="1",
            methodology_hash="ef" * 32,
            engine_version="1",
            n_forecasts=10,
            n_resolved=n_resolved,
        )
        slugs = [c.slug for c in self.competitors]
        run.details = {
            "dm": {
                "all": {
                    "brier": [
                        {
                            "a": a,
                            "b": b,
                            "n": 30,
                            "mean_diff": -0.01,
                            "stat": -2.5,
                            "p": 0.01,
                            "level": 0.05,
                            "verdict": "a_better",
                        }
                        for i, a in enumerate(slugs)
                        for b in slugs[i + 1 :]
                    ]
                }
            },
        }
        save_details(run)
        for rank, comp in enumerate(self.competitors, start=1):
            LeaderboardRow.objects.create(
                run=run,
                competitor=comp,
                rank=rank,
                n_forecasts=10,
                n_resolved=n_resolved,
                brier=0.1 * rank,
                brier_lo=0.1 * rank - 0.05,
                brier_hi=0.1 * rank + 0.05,
                log_score=0.5 + rank,
                skill_vs_market=0.05 / rank,
                return_pct=10.0 - rank,
                return_lo=-5.0,
                return_hi=20.0,
                pnl=Decimal(100 - 10 * rank),
                win_rate=0.5,
                provisional=rank > 1,
                required_n=350,
                details={
                    "slug": comp.slug,
                    "calibration": [
                        {"lo": 0.0, "hi": 0.1, "n": 4, "mean_p": 0.05, "freq": 0.0},
                        {"lo": 0.5, "hi": 0.6, "n": 6, "mean_p": 0.55, "freq": 0.5},
                    ],
                    "murphy": {"rel": 0.01, "res": 0.02, "unc": 0.25, "wbv": 0.001, "wbc": 0.0},
                    "clv": {"n": 5, "mean_prob": 0.03, "mean_logodds": 0.1, "label": "WEAK_EDGE"},
                    "edge_label": "WEAK_EDGE",
                    "tournament": {
                        "competitor": comp.slug,
                        "questions": 3,
                        "score": 0.2,
                        "coverage": 0.8,
                        "take": 1.1,
                        "prize_share": 0.4,
                    },
                    "ece": 0.031,
                },
            )
        return run


def build_arena(world: World, kind: str = "live", n_competitors: int = 2, weeks: int = 1) -> Cohort:
    """A cohort of `kind` with n competitors, each with `weeks` decisions and snapshots."""
    if not world.markets:
        world.market("Will the first test market resolve YES?")
        world.market("Will the second test market resolve YES?")
    while len(world.competitors) < n_competitors:
        world.competitor()
    cohort = world.cohort(kind=kind, weeks_ago=len(world.cohorts))
    world.universe(cohort)
    for comp in world.competitors[:n_competitors]:
        entry = world.entry(cohort, comp)
        for week in range(1, weeks + 1):
            world.decision(entry, week=week, market=world.markets[week % len(world.markets)])
        world.snapshots(entry)
    return cohort


@pytest.fixture(autouse=True)
def private_cache(settings, request):
    # Chart data is cached; each test gets its own empty cache so data never leaks across tests.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"site-test-{request.node.nodeid}",
        }
    }


@pytest.fixture
def world(db) -> World:
    return World()


@pytest.fixture
def arena_world(world) -> World:
    """A live cohort with two LLM competitors and a baseline, a score run, a resolved market."""
    world.competitor("alpha-model")
    world.competitor("beta-model")
    world.competitor("market-baseline", kind=Competitor.Kind.BASELINE)
    cohort = build_arena(world, n_competitors=3, weeks=2)
    resolved = world.market("Did the resolved market happen?")
    world.resolve(resolved)
    world.decision(world.entries[0], week=3, market=resolved, settle=Settlement.Kind.WON)
    world.score_run("live")
    world.cohort_main = cohort
    return world


# --- the browser for tests/site/test_browser.py ----------------------------------------------

SYSTEM_CHROMIUM = "/usr/bin/chromium"  # Debian's package
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NO_BROWSER = (
    "browser tests need chromium: `./run test` installs it (Debian's chromium via apt-get as root, "
    "else `uv run playwright install chromium`); or set ARENA_CHROMIUM to a chromium binary"
)


def chromium_executable() -> str | None:
    """ARENA_CHROMIUM, else Debian's chromium, else None: Playwright's own downloaded build."""
    for candidate in (os.environ.get("ARENA_CHROMIUM"), SYSTEM_CHROMIUM):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as p:
        try:
            b = p.chromium.launch(
                executable_path=chromium_executable(), args=CHROMIUM_ARGS, headless=True
            )
        except Error as exc:
            b, reason = None, (str(exc).strip().splitlines() or [""])[0]
        if b is None:
            # Never a skip: a missing browser is a broken test setup, said in one line.
            pytest.fail(f"{NO_BROWSER} ({reason})", pytrace=False)
        yield b
        b.close()
