"""What staff should look at now: one read of everything that went wrong and needs a human."""

from datetime import timedelta

from agents.models import Competitor, LineupProposal
from cohorts.models import Decision
from core import clock
from core.models import JobRun
from markets.models import Market

# A market closed this long without an upstream resolution is worth a look.
STUCK_AFTER = timedelta(days=3)


def attention_items(now=None, limit: int = 200) -> dict:
    now = now or clock.now()
    from cohorts.doctor import check_invariants

    return {
        "failed_decisions": list(
            Decision.objects.filter(status=Decision.Status.FAILED)
            .select_related("entry__competitor", "entry__cohort")
            .order_by("-claimed_at")[:limit]
        ),
        "stuck_markets": list(
            Market.objects.filter(
                status=Market.Status.CLOSED, closed_time__lt=now - STUCK_AFTER
            ).order_by("closed_time")[:limit]
        ),
        "flagged_markets": list(
            Market.objects.filter(needs_attention=True).order_by("-updated_at")[:limit]
        ),
        "failed_jobs": list(
            JobRun.objects.filter(
                status=JobRun.Status.FAILED, started_at__gte=now - timedelta(days=2)
            ).order_by("-started_at")[:limit]
        ),
        "ledger_violations": check_invariants()[:limit],
        "refused_weeks": refused_decision_weeks(now)[:limit],
        "lineup_proposals": list(
            LineupProposal.objects.filter(status=LineupProposal.Status.PENDING)
            .select_related("competitor", "review")
            .order_by("kind", "catalog", "model_id")[:limit]
        ),
    }


def refused_decision_weeks(now) -> list[dict]:
    """Live weeks that `decide` refuses right now, with the reason (an empty universe, markets
    not synced within the bound): the week's decisions wait until a human fixes the sync."""
    from cohorts.services import cohort_week, decision_eligible_cohorts
    from cohorts.universe import universe_problem

    weeks = []
    for cohort in decision_eligible_cohorts(now):
        week = cohort_week(cohort, now)
        reason = universe_problem(cohort, week, now)
        if reason:
            weeks.append({"cohort": cohort, "week": week, "reason": reason})
    return weeks


def retrying_decisions(limit: int = 200) -> list[Decision]:
    """Decisions waiting out a provider outage (cohorts/decisions/retry.py): no human is needed,
    the catch-up runs them again from `retry_after`, but staff watching an outage want to see
    which competitors wait, since when and until when."""
    return list(
        Decision.objects.filter(status=Decision.Status.RETRYABLE, retry_rounds__gt=0)
        .select_related("entry__competitor", "entry__cohort")
        .order_by("retry_after", "pk")[:limit]
    )


def lineup_choices() -> dict[str, list[Competitor]]:
    """The model competitors of each provider: who a new model may become a release of."""
    choices: dict[str, list[Competitor]] = {}
    for competitor in Competitor.objects.filter(kind=Competitor.Kind.LLM).order_by("slug"):
        choices.setdefault(competitor.provider, []).append(competitor)
    return choices


def attention_count(items: dict) -> int:
    return sum(len(v) for v in items.values())


def attention_counts(now=None) -> dict[str, int]:
    """How many of each kind of item wait on the attention page, counted in the database (the
    admin index shows the total on every visit, so no rows are loaded and the ledger check,
    which reads every entry, is left to the page itself)."""
    now = now or clock.now()
    return {
        "failed decisions": Decision.objects.filter(status=Decision.Status.FAILED).count(),
        "stuck markets": Market.objects.filter(
            status=Market.Status.CLOSED, closed_time__lt=now - STUCK_AFTER
        ).count(),
        "flagged markets": Market.objects.filter(needs_attention=True).count(),
        "failed jobs": JobRun.objects.filter(
            status=JobRun.Status.FAILED, started_at__gte=now - timedelta(days=2)
        ).count(),
        "lineup proposals": LineupProposal.objects.filter(
            status=LineupProposal.Status.PENDING
        ).count(),
    }
