"""Leaderboard rows for a small scripted cohort, checked against numbers computed by hand here.

The scored unit is the question (one decision's forecast of one market, methodology v2): the
hand computations below complete each question's stated outcomes to a full vector and take the
question Brier, half the Brier (1950) sum, which for a binary market is (p_yes - o_yes)^2.
"""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cohorts.models import Cohort
from cohorts.services import BetOrder, execute_orders
from cohorts.settlement import settle_market
from markets.models import Market
from scoring import metrics
from scoring.models import LeaderboardRow, ScoreRun
from scoring.selectors import latest_run, leaderboard_rows
from scoring.services import compute_scores
from tests.factories import make_cohort_with_entries, make_competitor, make_market
from tests.scoring.conftest import WEEK_START, add_buy, add_forecasts, add_price, make_decision
from web.selectors import competitor_rows

pytestmark = pytest.mark.django_db

AT = WEEK_START + timedelta(hours=1)
END = WEEK_START + timedelta(days=3)


def _binary(yes_price: str):
    return make_market(prices={"Yes": yes_price, "No": str(1 - Decimal(yes_price))})


def _resolve(market, outcome: str | None):
    market.status = Market.Status.RESOLVED if outcome else Market.Status.VOID
    market.resolved_outcome = outcome or ""
    market.resolved_at = END
    market.closed_time = END
    market.save()
    settle_market(market, at=END)


@pytest.fixture
def scripted():
    """Two competitors, four resolved binary markets, one multi-outcome market, one void market."""
    alice, bob = make_competitor("alice"), make_competitor("bob")
    cohort, (ea, eb) = make_cohort_with_entries(
        week_start=WEEK_START, competitors=[alice, bob], at=WEEK_START
    )
    m1, m2, m3, m4, m6 = (_binary(p) for p in ("0.5", "0.5", "0.8", "0.5", "0.5"))
    m5 = make_market(outcomes=["Red", "Green", "Blue"], prices={"Red": "0.4", "Green": "0.3"})
    da, db = make_decision(ea, at=AT), make_decision(eb, at=AT)
    # (market, stated outcome, p, market price shown, o) -- o written out by hand.
    a_rows = [
        (m1, "Yes", 0.8, 0.5, 1),
        (m2, "Yes", 0.3, 0.5, 0),
        (m3, "No", 0.7, 0.2, 1),
        (m4, "Yes", 0.5, 0.5, 1),
        (m5, "Green", 0.6, 0.3, 1),
        (m5, "Red", 0.2, 0.4, 0),
    ]
    b_rows = [
        (m1, "Yes", 0.4, 0.5, 1),
        (m2, "Yes", 0.6, None, 0),  # no price shown: scored, but not in the skill vs market
        (m3, "Yes", 0.9, 0.8, 0),
        (m4, "Yes", 0.7, 0.5, 1),
    ]
    add_forecasts(da, [r[:4] for r in a_rows] + [(m6, "Yes", 0.9, 0.5)])
    add_forecasts(db, [r[:4] for r in b_rows] + [(m6, "Yes", 0.6, 0.5)])
    # Alice: +$1000 on m1 (2000 shares at 0.5, wins), -$500 on m2.  P/L +500, 1 of 2 won.
    execute_orders(ea, [BetOrder(m1.pk, "Yes", Decimal(1000)), BetOrder(m2.pk, "Yes", Decimal(500))], [], None, decision=da, at=AT)  # fmt: skip
    # Bob: m6 void (refund), -$1000 on m3, +$500 on m4 (1000 shares at 0.5).  P/L -500, 1 of 2.
    execute_orders(eb, [BetOrder(m6.pk, "Yes", Decimal(1000)), BetOrder(m3.pk, "Yes", Decimal(1000)), BetOrder(m4.pk, "Yes", Decimal(500))], [], None, decision=db, at=AT)  # fmt: skip
    for market, outcome in ((m1, "Yes"), (m2, "No"), (m3, "No"), (m4, "Yes"), (m5, "Green"), (m6, None)):  # fmt: skip
        _resolve(market, outcome)
    return {"cohort": cohort, "alice": (alice, a_rows), "bob": (bob, b_rows)}


def _row(run, competitor, cohort=None) -> LeaderboardRow:
    return run.rows.get(competitor=competitor, cohort=cohort)


def test_scripted_cohort_matches_hand_computation(scripted):
    run = compute_scores("live", as_of=END + timedelta(hours=1))
    assert run.status == ScoreRun.Status.DONE
    # Per question: (question Brier, log score, market's question Brier or None, uniform Brier).
    # Alice's m5 (Red, Green, Blue -> Green) states Green 0.6 and Red 0.2: Blue gets the rest,
    # 0.2, so P = (0.2, 0.6, 0.2) and the Brier is (0.2^2 + 0.4^2 + 0.2^2) / 2 = 0.12; the
    # market's shown Red 0.4 and Green 0.3 complete to (0.4, 0.3, 0.3): 0.37. One question,
    # where v1 counted two binary items. Her m3 "No" at 0.7 is the binary question P(Yes) = 0.3.
    questions = {
        "alice": [
            (0.2**2, -math.log(0.8), 0.25, 0.25),
            (0.3**2, -math.log(0.7), 0.25, 0.25),
            (0.3**2, -math.log(0.7), 0.8**2, 0.25),
            (0.5**2, -math.log(0.5), 0.25, 0.25),
            (0.12, -math.log(0.6), 0.37, 1 / 3),
        ],
        "bob": [
            (0.6**2, -math.log(0.4), 0.25, 0.25),
            (0.6**2, -math.log(0.4), None, 0.25),  # no price shown: not in the skill
            (0.9**2, -math.log(0.1), 0.8**2, 0.25),
            (0.3**2, -math.log(0.7), 0.25, 0.25),
        ],
    }
    for name, n_forecasts, pnl in (("alice", 6, Decimal("500.00")), ("bob", 5, Decimal("-500.00"))):
        competitor, _ = scripted[name]
        qs = questions[name]
        brier = sum(b for b, _, _, _ in qs) / len(qs)
        log = sum(lg for _, lg, _, _ in qs) / len(qs)
        priced = [(b, m) for b, _, m, _ in qs if m is not None]
        skill = sum(m - b for b, m in priced) / len(priced)
        uniform = sum(u for _, _, _, u in qs)
        for cohort in (scripted["cohort"], None):  # one cohort: its row equals the all-cohorts row
            row = _row(run, competitor, cohort)
            assert row.n_forecasts == n_forecasts  # the void-market question is counted ...
            assert row.n_resolved == len(qs)  # ... but not scored
            assert row.brier == pytest.approx(brier, abs=1e-12)
            assert row.log_score == pytest.approx(log, abs=1e-12)
            assert row.skill_vs_market == pytest.approx(skill, abs=1e-12)
            assert row.bss_vs_half == pytest.approx(1 - brier * len(qs) / uniform, abs=1e-12)
            assert row.pnl == pnl
            assert row.return_pct == pytest.approx(float(pnl) / 100)
            assert row.win_rate == pytest.approx(0.5)
            assert row.brier_lo <= row.brier <= row.brier_hi
            # One entry, but the interval resamples its markets, so it exists and holds the value.
            assert row.return_lo <= row.return_pct <= row.return_hi
    alice_row = _row(run, scripted["alice"][0])
    assert alice_row.rank == 1 and _row(run, scripted["bob"][0]).rank == 2
    # The spec's summed multiclass Brier is published beside it, with its convention.
    multi = alice_row.details["brier_multiclass"]
    assert (
        multi["value"] == pytest.approx(0.24) and multi["n"] == 1 and "0..2" in multi["convention"]
    )
    assert _row(run, scripted["bob"][0]).details["brier_multiclass"] is None
    # BSS vs the base rate over binary questions: Alice's four say Yes happened 2 of 4 times.
    assert alice_row.details["base_rate"] == pytest.approx(0.5)
    bin_brier = (0.2**2 + 0.3**2 + 0.3**2 + 0.5**2) / 4
    assert alice_row.details["bss_vs_base_rate"] == pytest.approx(1 - bin_brier / 0.25)
    # Every row says which methodology scored it, and which its cohort started under.
    assert alice_row.details["methodology"]["version"] == run.methodology_version == "5"
    assert alice_row.details["methodology"]["cohort_versions"] == ["5"]
    assert run.details["headline"]["by_cohort"]["all"] == "brier_skill_vs_market"


def test_murphy_and_calibration_details_add_up(scripted):
    run = compute_scores("live", as_of=END + timedelta(hours=1))
    row = _row(run, scripted["alice"][0])
    m = row.details["murphy"]
    # Murphy and calibration are over the binary questions (P of Yes); Alice's fifth question is
    # a three-outcome market.
    bin_brier = (0.2**2 + 0.3**2 + 0.3**2 + 0.5**2) / 4
    assert m["brier"] == pytest.approx(bin_brier)
    assert m["rel"] - m["res"] + m["unc"] + m["wbv"] - m["wbc"] == pytest.approx(bin_brier)
    assert sum(b["n"] for b in row.details["calibration"]) == row.details["n_binary"] == 4


def test_implied_confidence_brier_from_buy_trades(scripted):
    run = compute_scores("live", as_of=END + timedelta(hours=1))
    # Alice: $1000 and $500 of 25% x $10,000: c = 0.4 (won) and 0.2 (lost).
    expected = ((0.4 - 1) ** 2 + (0.2 - 0) ** 2) / 2
    assert _row(run, scripted["alice"][0]).implied_confidence_brier == pytest.approx(expected)


def test_replay_and_demo_never_mixed_into_live(scripted):
    intruder = make_competitor("replayer")
    _, (entry,) = make_cohort_with_entries(
        week_start=WEEK_START, kind=Cohort.Kind.REPLAY, competitors=[intruder], at=WEEK_START
    )
    market = Market.objects.filter(status=Market.Status.RESOLVED).first()
    add_forecasts(make_decision(entry, at=AT), [(market, market.resolved_outcome, 0.99, 0.5)])
    live = compute_scores("live", as_of=END + timedelta(hours=1))
    replay = compute_scores("replay", as_of=END + timedelta(hours=1))
    assert not live.rows.filter(competitor=intruder).exists()
    assert set(replay.rows.values_list("competitor__slug", flat=True)) == {"replayer"}
    assert live.n_forecasts == 11 and replay.n_forecasts == 1  # questions
    assert latest_run("live") == live and latest_run("replay") == replay
    assert latest_run("demo") is None


def test_before_resolution_nothing_is_scored_and_return_ranks(scripted):
    run = compute_scores("live", as_of=AT + timedelta(minutes=5))
    rows = list(leaderboard_rows(run))
    assert {r.n_resolved for r in rows} == {0}
    assert all(r.brier is None and r.provisional for r in rows)
    assert run.details["headline"]["by_cohort"]["all"] == "return_pct"


def test_provisional_is_one_threshold_for_everybody(week_start):
    # A threshold derived from each competitor's own differences to the market would let one
    # staying near the market leave the badge after 2 resolutions: it is 350 for all.
    rng = np.random.default_rng(5)
    steady, noisy, few = (make_competitor(s) for s in ("steady", "noisy", "few"))
    _, (es, en, ef) = make_cohort_with_entries(
        week_start=week_start, competitors=[steady, noisy, few], at=week_start
    )
    markets = [_binary("0.5") for _ in range(350)]
    outcomes = rng.integers(0, 2, size=350)
    # steady: 0.52 on everything (near the market); noisy: anything; few: 4 questions only.
    add_forecasts(make_decision(es, at=AT), [(m, "Yes", 0.52, 0.5) for m in markets])
    add_forecasts(
        make_decision(en, at=AT),
        [(m, "Yes", float(p), 0.5) for m, p in zip(markets, rng.random(350))],
    )
    add_forecasts(make_decision(ef, at=AT), [(m, "Yes", 0.52, 0.5) for m in markets[:4]])
    for outcome in ("Yes", "No"):
        Market.objects.filter(
            pk__in=[m.pk for m, o in zip(markets, outcomes) if (o == 1) == (outcome == "Yes")]
        ).update(  # fmt: skip
            status=Market.Status.RESOLVED,
            resolved_outcome=outcome,
            resolved_at=END,
            closed_time=END,
        )
    run = compute_scores("live", as_of=END + timedelta(hours=1))
    for competitor, n, provisional in ((steady, 350, False), (noisy, 350, False), (few, 4, True)):
        row = _row(run, competitor)
        assert (row.n_resolved, row.required_n, row.provisional) == (n, 350, provisional)
    assert metrics.provisional_threshold() == 350


def _scenario(n_markets: int):
    competitor = make_competitor()
    _, (entry,) = make_cohort_with_entries(competitors=[competitor])
    markets = [_binary("0.5") for _ in range(n_markets)]
    decision = make_decision(entry, at=AT)
    add_forecasts(decision, [(m, "Yes", 0.6, 0.5) for m in markets])
    for m in markets:
        add_buy(entry, decision, m, "Yes", 50, "0.5", AT)
        add_price(m, "Yes", AT, "0.5")
        add_price(m, "Yes", END - timedelta(hours=1), "0.7")
        m.status, m.resolved_outcome, m.resolved_at = Market.Status.RESOLVED, "Yes", END
        m.closed_time = END
        m.save()


def test_query_count_does_not_grow_with_forecasts():
    # The arena's signing key enters the key history once, at the first signed checkpoint: a
    # one-off cost, not one that grows with forecasts.
    from cohorts.seals import keys

    keys.ensure_first()
    counts = []
    for n in (3, 30):  # forecasts, trades, positions and price points all grow tenfold
        _scenario(n)
        with CaptureQueriesContext(connection) as ctx:
            compute_scores("live", as_of=END + timedelta(days=30))
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def test_failed_run_is_marked_and_never_served(scripted, monkeypatch):
    good = compute_scores("live", as_of=END + timedelta(hours=1))
    with pytest.raises(ValueError):
        compute_scores("nonsense")

    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    # A crash deep inside the computation (the math is ours, so patching it is the simplest way).
    monkeypatch.setattr(metrics, "murphy", crash)
    with pytest.raises(RuntimeError):
        compute_scores("live", as_of=END + timedelta(hours=2))
    failed = ScoreRun.objects.latest("started_at")
    assert failed.status == ScoreRun.Status.FAILED and failed.error
    assert latest_run("live") == good


def test_money_without_snapshot_marks_positions_at_last_prices(scripted):
    # Before any resolution there is no snapshot yet: cash from the ledger plus open positions
    # at the last prices. Alice holds 2000 + 1000 shares at 0.5 with $8,500 cash; Bob 2000 at
    # 0.5, 1250 at 0.8 and 1000 at 0.5 with $7,500: both are worth exactly $10,000.
    run = compute_scores("live", as_of=AT + timedelta(minutes=5))
    for name in ("alice", "bob"):
        row = _row(run, scripted[name][0])
        assert row.details["money_source"] == ["computed"]
        assert row.pnl == Decimal("0.00") and row.unrealized_pnl == Decimal("0.00")
        assert row.win_rate is None  # nothing settled yet


def test_ordered_multi_outcome_market_gets_rps(week_start):
    carol = make_competitor("carol")
    _, (entry,) = make_cohort_with_entries(
        week_start=week_start, competitors=[carol], at=week_start
    )
    bands = make_market(outcomes=["<1%", "1-2%", ">2%"], ordered_outcomes=True)
    add_forecasts(
        make_decision(entry, at=AT),
        [(bands, "<1%", 0.2, 0.3), (bands, "1-2%", 0.5, 0.4), (bands, ">2%", 0.3, 0.3)],
    )
    _resolve(bands, "1-2%")
    row = _row(compute_scores("live", as_of=END + timedelta(hours=1)), carol)
    # Cumulative forecast (0.2, 0.7) against observed (0, 1): ((0.2)^2 + (0.3)^2) / (3 - 1).
    assert row.details["rps"] == {"rps": pytest.approx(0.065), "n": 1}
    # One question, not three one-vs-rest items: half of 0.2^2 + 0.5^2 + 0.3^2 = 0.38.
    assert row.n_resolved == 1
    assert row.brier == pytest.approx(0.19)
    assert row.details["brier_multiclass"]["value"] == pytest.approx(0.38)


def test_replicates_pool_into_one_row_with_a_return_interval(week_start):
    twin = make_competitor("twin", replicates=2)
    _, (e1, e2) = make_cohort_with_entries(week_start=week_start, competitors=[twin], at=week_start)
    market = _binary("0.5")
    for entry, p in ((e1, 0.7), (e2, 0.9)):
        add_forecasts(make_decision(entry, at=AT), [(market, "Yes", p, 0.5)])
    execute_orders(e1, [BetOrder(market.pk, "Yes", Decimal(1000))], [], None, at=AT)
    _resolve(market, "Yes")
    run = compute_scores("live", as_of=END + timedelta(hours=1))
    (row,) = run.rows.filter(cohort=None)
    assert row.n_forecasts == 2 and row.details["entries"] == 2
    assert row.brier == pytest.approx((0.3**2 + 0.1**2) / 2)
    # e1 made +$1000 (10%), e2 nothing: pooled return 1000 / 20000 = 5%. The interval resamples
    # markets: with one market every resample holds it once, so there is nothing to vary.
    assert row.return_pct == pytest.approx(5.0)
    assert row.return_lo == pytest.approx(5.0) and row.return_hi == pytest.approx(5.0)


def test_return_interval_resamples_markets_not_entries(week_start):
    """Entries that hold the same markets are not independent draws: two replicates making the
    same two bets (one won, one lost) have equal returns, so an interval over entries would be
    a single point; resampling the markets shows the luck of which bet won."""
    twin = make_competitor("twin", replicates=2)
    _, entries = make_cohort_with_entries(week_start=week_start, competitors=[twin], at=week_start)
    won, lost = _binary("0.5"), _binary("0.5")
    for entry in entries:
        add_forecasts(
            make_decision(entry, at=AT), [(won, "Yes", 0.6, 0.5), (lost, "Yes", 0.6, 0.5)]
        )
        orders = [BetOrder(m.pk, "Yes", Decimal(1000)) for m in (won, lost)]
        execute_orders(entry, orders, [], None, at=AT)
    _resolve(won, "Yes")
    _resolve(lost, "No")
    run = compute_scores("live", as_of=END + timedelta(hours=1))
    (row,) = run.rows.filter(cohort=None)
    # Each entry: +1000 on the winner, -1000 on the loser: 0 %. Resamples draw {won, won}
    # (+20 % over the pooled $20,000), {won, lost} (0 %) or {lost, lost} (-20 %).
    assert row.return_pct == pytest.approx(0.0)
    assert row.return_lo == pytest.approx(-20.0) and row.return_hi == pytest.approx(20.0)


def test_competitor_rows_come_from_the_latest_done_run(scripted):
    alice = scripted["alice"][0]
    assert not competitor_rows(alice, "live")[1]
    compute_scores("live", as_of=AT + timedelta(minutes=5))
    latest = compute_scores("live", as_of=END + timedelta(hours=1))
    run, rows = competitor_rows(alice, "live")
    assert [r.cohort_id for r in rows] == [None, scripted["cohort"].pk]  # all-cohorts row first
    assert {r.run_id for r in rows} == {latest.pk} == {run.pk}
    assert not competitor_rows(alice, "replay")[1]


def test_prune_keeps_the_latest_runs_per_scope_and_recent_failures(db):
    from datetime import timedelta

    from django.utils import timezone

    from scoring.models import ScoreRun
    from scoring.selectors import latest_run
    from scoring.services import prune_runs

    now = timezone.now()

    def run(scope, status, minutes_ago):
        t = now - timedelta(minutes=minutes_ago)
        return ScoreRun.objects.create(
            scope=scope,
            status=status,
            as_of=t,
            started_at=t,
            finished_at=t,
            methodology_version="1",
            methodology_hash="h",
            engine_version="e",
        )

    live = [run("live", "done", m) for m in (50, 40, 30, 20, 10)]
    demo = run("demo", "done", 100)
    old_failed, new_failed = run("live", "failed", 60 * 72), run("live", "failed", 5)
    assert prune_runs(keep=2, at=now) == 4
    left = set(ScoreRun.objects.values_list("pk", flat=True))
    assert left == {live[-1].pk, live[-2].pk, demo.pk, new_failed.pk}
    assert old_failed.pk not in left
    assert latest_run("live") == live[-1]


def test_win_rate_counts_bets_not_positions(week_start):
    # Two bets average into one winning position, a third loses: 2 of 3 bets won (v1 counted
    # the two settled positions: 1 of 2).
    dave = make_competitor("dave")
    _, (entry,) = make_cohort_with_entries(week_start=week_start, competitors=[dave], at=week_start)
    win, lose = _binary("0.5"), _binary("0.5")
    for hours, market in ((1, win), (2, win), (3, lose)):
        execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal(100))], [], None, at=week_start + timedelta(hours=hours))  # fmt: skip
    _resolve(win, "Yes")
    _resolve(lose, "No")
    row = _row(compute_scores("live", as_of=END + timedelta(hours=1)), dave)
    assert (row.details["bets_won"], row.details["bets_lost"]) == (2, 1)
    assert (row.details["settled_won"], row.details["settled_lost"]) == (1, 1)
    assert row.win_rate == pytest.approx(2 / 3)
