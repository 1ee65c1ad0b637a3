"""The demo's simulated models: the live decision path end to end, and scores that rank them.

One lean demo (the market baseline and the five simulated models, three weekly cohorts, a hundred
markets, the clock stopped on the third Saturday) is long enough for ~50 resolved forecasts per
thorough model, which is where the recipes separate: the skilled model (a noisy view of the
outcome) beats the market on Brier, the copier (the price written down roughly, never surer
than 90 %) does not. Everything is seeded, so the numbers are the same on every run.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from agents.models import Competitor
from agents.services import ensure_default_lineup
from agents.simulated import is_loopback_url
from cohorts.doctor import check_invariants
from cohorts.models import Cohort, Decision, LLMCall, Trade
from scoring.models import LeaderboardRow
from tests import demo_snapshot

NOW = datetime(2026, 3, 21, 12, 0, tzinfo=UTC)  # the third Saturday of a three-week demo


@pytest.fixture
def lean_demo(db, settings):
    settings.ARENA_LLM_API_KEY = "sk-or-must-never-be-sent"
    ensure_default_lineup()
    Competitor.objects.filter(kind=Competitor.Kind.BASELINE).exclude(slug="market").update(
        active=False
    )
    return demo_snapshot.demo(weeks=3, seed=7, n_markets=100, now=NOW, latency_scale=0)


@pytest.mark.slow  # a three-week demo on 100 markets
def test_simulated_models_decide_through_the_model_path_and_are_scored(lean_demo):
    demo = Decision.objects.filter(entry__cohort__kind=Cohort.Kind.DEMO)
    simulated = demo.filter(entry__competitor__simulated=True)
    slugs = set(simulated.values_list("entry__competitor__slug", flat=True))
    assert slugs == {"sim-skilled", "sim-overconfident", "sim-copier", "sim-chatty", "sim-sloppy"}
    assert set(demo.values_list("status", flat=True)) == {Decision.Status.DONE}
    # Never in the live lineup: created inactive, and only demo cohorts hold them.
    assert not Competitor.objects.filter(simulated=True, active=True).exists()
    assert not Cohort.objects.exclude(kind=Cohort.Kind.DEMO).exists()

    calls = LLMCall.objects.filter(decision__in=simulated).select_related("decision")
    assert lean_demo.model_calls == calls.count() >= simulated.count()
    for call in calls:
        d = call.decision
        # The request is exactly the decision's prompt, sent over HTTP to the loopback endpoint.
        messages = call.request["messages"]
        assert messages[:2] == [
            {"role": "system", "content": d.system_prompt},
            {"role": "user", "content": d.user_prompt},
        ]
        assert call.request["model"].startswith("simulated/")
        assert is_loopback_url(call.url) and call.url.endswith("/v1/chat/completions")
        assert call.http_status == 200 and call.served_model == call.request["model"]
        body = json.loads(call.raw_response)
        assert body["usage"]["completion_tokens"] == call.completion_tokens > 0
        assert call.prompt_tokens > len(d.user_prompt) // 8
        assert call.cost_usd == 0
    assert all(d.tokens_in > 0 and d.tokens_out > 0 and d.cost_usd == 0 for d in simulated)

    # The sloppy model's broken answers went through the one repair attempt, which quoted them.
    # Six sloppy decisions at a 50 % break rate: the seeded run shows repairs, and exactly the
    # decisions whose first answer failed have one.
    repairs = calls.filter(phase="repair")
    assert repairs.exists()
    rejected = {d.pk for d in simulated if d.validation_errors}
    assert rejected == set(repairs.values_list("decision_id", flat=True))
    assert set(repairs.values_list("decision__entry__competitor__slug", flat=True)) == {
        "sim-sloppy"
    }
    for call in repairs:
        problems = call.decision.validation_errors[0]["problems"]
        assert call.request["messages"][-1]["content"].startswith("Your answer could not be")
        assert problems[0] in call.request["messages"][-1]["content"]
    actions = Counter(simulated.values_list("action", flat=True))
    assert actions["BET"] > 0
    assert Trade.objects.filter(decision__in=simulated).exists()
    assert check_invariants() == []

    rows = {
        r.competitor.slug: r
        for r in LeaderboardRow.objects.filter(
            run_id=lean_demo.score_run_id, cohort__isnull=True
        ).select_related("competitor")
    }
    skilled, copier = rows["sim-skilled"], rows["sim-copier"]
    assert skilled.n_resolved >= 40 and copier.n_resolved >= 40
    # Skill vs market = mean (market Brier - own Brier) over the same forecasts.
    assert skilled.skill_vs_market > 0.01 and skilled.brier < rows["market"].brier
    assert copier.skill_vs_market < 0 and copier.skill_hi < 0.005
    assert skilled.skill_vs_market > copier.skill_vs_market
