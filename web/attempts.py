"""How the decision page labels a decision's model calls: which run each belongs to, whether
staff started the run again or a provider outage did (a new round), and where the model id
changed between attempts.

Calls are never deleted, and a run that starts again numbers its calls after the earlier ones
(cohorts/llm_calls.py), so a call started before the decision's latest claim belongs to an
earlier run. A staff re-run leaves an admin log row on the decision (cohorts/decisions/admin.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType

from cohorts.models import Decision, LLMCall

STAFF_RERUN_MARKS = ("Re-run by staff", "Marked retryable")


@dataclass(frozen=True)
class CallView:
    call: LLMCall
    run_note: str  # "" for a decision that ran once
    model: str
    model_change: str  # "" unless the model id differs from the attempt before


def _model(call: LLMCall) -> str:
    request = call.request if isinstance(call.request, dict) else {}
    return str(request.get("model") or "")


def staff_reran(decision: Decision) -> bool:
    ct = ContentType.objects.get_for_model(Decision)
    logs = LogEntry.objects.filter(content_type=ct, object_id=str(decision.pk))
    return any(
        mark in (message or "")
        for message in logs.values_list("change_message", flat=True)
        for mark in STAFF_RERUN_MARKS
    )


def call_views(decision: Decision, calls: list[LLMCall]) -> list[CallView]:
    earlier = [c for c in calls if c.started_at < decision.claimed_at]
    by_staff = bool(earlier) and staff_reran(decision)
    # Rounds after a provider outage (cohorts/decisions/retry.py) are the arena's own re-runs.
    rounds = bool(earlier) and not by_staff and decision.retry_rounds > 0
    out = []
    previous = ""
    first_of_rerun = True
    for call in calls:
        note = ""
        if earlier:
            if call.started_at < decision.claimed_at:
                note = "earlier round, provider unavailable" if rounds else "earlier run"
            elif first_of_rerun:
                note = "latest round" if rounds else "re-run by staff" if by_staff else "run again"
                first_of_rerun = False
            else:
                note = "re-run"
        model = _model(call)
        change = ""
        if previous and model and model != previous:
            change = f"model id changed from {previous} to {model} since the attempt before"
        previous = model or previous
        out.append(CallView(call, note, model, change))
    return out
