"""The statistics on a real (simulated) history: the demo, scored by the real services.

- group letters: no two ranked rows that share a letter differ significantly, in every group;
- the API ranks exactly the rows the page ranks;
- the no-information "Market copier": the demo's prices are calibrated (so copying them cannot
  pay on average) and its return interval, which resamples markets, covers zero.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

import numpy as np
import pytest

from agents.services import ensure_default_lineup
from scoring.models import LeaderboardRow
from scoring.selectors import latest_run, leaderboard_rows
from simulations.demo import build_plan
from tests import demo_snapshot
from web import standings

NOW = datetime(2026, 4, 4, 12, 0, tzinfo=UTC)  # five weekly cohorts from 2026-03-01


@pytest.fixture
def demo(db, settings):
    settings.ARENA_LLM_API_KEY = ""
    ensure_default_lineup()
    demo_snapshot.demo(weeks=5, seed=42, n_markets=160, now=NOW, latency_scale=0)
    return latest_run("demo")


@pytest.mark.slow  # a five-week demo on 160 markets
def test_demo_letters_api_ranks_and_the_copier_interval(demo, client):
    run = demo
    groups = ["all", *(str(c["id"]) for c in run.details["cohorts"])]
    checked = 0
    for group in groups:
        cohort = None if group == "all" else int(group)
        rows = list(leaderboard_rows(run, cohort))
        board = standings.build(run, rows, group=group, details=run.stored_details)
        verdict = {frozenset((p.a, p.b)): p.verdict for p in run.stored_details.dm_for(group).brier}
        assert board.grouped
        for x, y in itertools.combinations(board.scored, 2):
            pair = frozenset((x.row.competitor.slug, y.row.competitor.slug))
            differ = verdict.get(pair) in ("a_better", "b_better")
            assert standings.share_a_letter(x, y) == (not differ), (group, pair)
            checked += 1
        # The API ranks what the page ranks, and nothing else.
        query = {"scope": "demo"} if cohort is None else {"cohort": cohort}
        api = json.loads(client.get("/api/leaderboard", query).content)["rows"]
        page_rank = {s.row.competitor.slug: s.rank for s in board.scored + board.unscored}
        assert {r["competitor"]: r["rank"] for r in api} == page_rank
        assert all(r["unranked_reason"] for r in api if r["rank"] is None)
    assert checked > 50

    copier = LeaderboardRow.objects.get(run=run, cohort__isnull=True, competitor__slug="sim-copier")
    assert copier.return_lo is not None and copier.return_lo <= 0 <= copier.return_hi


def test_demo_prices_are_calibrated():
    """The plan's hourly prices against outcomes: in every probability decile the outcome
    frequency is within sampling error of the mean price, so a copier of prices has no edge."""
    prices, outcomes = [], []
    rng = np.random.default_rng(0)
    for seed in range(4):
        plan = build_plan(seed=seed, weeks=8, n_markets=300, start=NOW)
        for m in plan.markets:
            if not m.outcome:
                continue
            picked = m.prices[rng.integers(0, len(m.prices), 5)]
            prices += picked.tolist()
            outcomes += [m.outcome == "Yes"] * len(picked)
    p, o = np.asarray(prices), np.asarray(outcomes, dtype=float)
    deciles = np.minimum((p * 10).astype(int), 9)
    for d in range(10):
        s = deciles == d
        # Five samples per market are correlated: allow four binomial errors of the market count.
        err = 4 * np.sqrt(p[s].mean() * (1 - p[s].mean()) / (s.sum() / 5))
        assert abs(o[s].mean() - p[s].mean()) < err, d
