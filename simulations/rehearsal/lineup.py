"""A rehearsal's catalog change, reviewed and approved as it is live, and its check.

Before beat's first tick the orchestrator reprices the model of one simulated competitor on the
stand-in's catalog (`SimulatedLLMServer.reprice`): the stand-in lists it at PROMPT / COMPLETION
USD per token while the competitor's release says free, as the catalog said when the lineup was
set. The weekly lineup review, run by beat on the workers (agents/lineup_review.py), finds the
difference and proposes a new release on /admin/attention/. Once the first week's cohort has
opened (its entries pinned to the release current then) and no earlier than APPROVE_AFTER into
it, staff log in through the admin's login form, find the proposal's row on the attention page
and press its "New release with these figures" button (the form's CSRF token and all).

The check (`check_lineup`) reads what the product recorded, not what the orchestrator did: the
proposal approved by the staff user with its admin history line; the competitor's entry in the
first week's cohort still on its old release and the next cohort's on the new one (the entries,
their decisions, the sealed decision records and the entry records of the scope's event log);
the new release differing from the old by the prices alone; every other competitor on the same
release in both cohorts and no other proposal approved.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import requests

from agents.models import Competitor, LineupProposal, Release
from cohorts.models import Cohort, Decision, Entry
from cohorts.seals.models import DecisionDigest, StateRecord
from core import clock
from simulations.rehearsal.checks import Check
from simulations.rehearsal.http import CSRF_FIELD, HTTP_TIMEOUT, MESSAGE, TAGS, StaffSession

# The repriced listing, USD per token as the catalog writes it: $1.25 and $10 per M tokens.
PROMPT, COMPLETION = "0.00000125", "0.00001"
PER_M = Decimal(1_000_000)
# Staff approve from this far into the first week (its cohort opened, its entries pinned) ...
APPROVE_AFTER = timedelta(days=1)
# ... and no later than this, a day before the next cohort opens.
APPROVE_BY = timedelta(days=6)
RETRY_WALL_SECONDS = 2.0  # between two looks at the attention page while nothing is proposed
ATTENTION = "/admin/attention/"
ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
FORM = re.compile(r'<form method="post" action="([^"]+)">(.*?)</form>', re.S)
# The release fields a price change leaves as they were.
UNCHANGED = ("model_id", "provider", "base_url", "api_key_env", "params", "context_tokens",
             "structured_output", "knowledge_cutoff", "agent_version")  # fmt: skip


@dataclass
class LineupChange:
    """The change planned for one competitor, and what staff did about it (`run.lineup`)."""

    competitor_id: int
    slug: str
    model_id: str
    first_sunday: datetime
    record: dict[str, Any] = field(default_factory=dict)  # the run's `lineup`, kept up to date
    _staff: StaffSession | None = None
    _next_look: float = 0.0

    def note(self, text: str) -> None:
        self.record.setdefault("notes", []).append(f"{clock.now():%a %H:%M} arena: {text}")

    def tick(self, now: datetime, run: Any, username: str, password: str) -> None:
        """Called from the orchestrator's loop: staff approve once the time has come."""
        if self.record.get("approved") or self.record.get("gave_up"):
            return
        if now < self.first_sunday + APPROVE_AFTER or time.monotonic() < self._next_look:
            return
        if now > self.first_sunday + APPROVE_BY:
            self.record["gave_up"] = True
            self.note("no approval went through before the next cohort")
            return
        self._next_look = time.monotonic() + RETRY_WALL_SECONDS
        if not Entry.objects.filter(cohort__week_start=self.first_sunday,
                                    cohort__kind=Cohort.Kind.REHEARSAL,
                                    competitor_id=self.competitor_id).exists():  # fmt: skip
            return  # its cohort not open yet: approved now, the new release would be its pin
        try:
            if self._staff is None:
                self._staff = StaffSession(run.base_url, username, password)
                self._staff.login()
            approved = approve_release(self._staff, self.competitor_id)
        except (requests.RequestException, RuntimeError) as exc:
            self._staff = None  # log in again next time
            self.note(f"staff could not reach the admin ({str(exc)[:200]})")
            return
        if approved is None:
            return  # not on the attention page yet: the review has not run
        proposal_id, said = approved
        self.record.update(proposal=proposal_id, said=said, at=clock.now().isoformat())
        self.record["approved"] = LineupProposal.objects.filter(
            pk=proposal_id, status=LineupProposal.Status.APPROVED
        ).exists()
        if not self.record["approved"]:
            self.note(f"the admin did not approve proposal {proposal_id}: {said}")


def plan(run: Any, models: Any, lineup: list[Competitor], staff_user: str) -> LineupChange | None:
    """Reprice the first simulated competitor's model on the stand-in's catalog; None when the
    run has no simulated model or no second week (no next cohort to run a new release)."""
    competitor = next((c for c in lineup if c.kind == Competitor.Kind.LLM and c.simulated), None)
    if competitor is None or run.options.weeks < 2:
        return None
    models.reprice(competitor.model_id, PROMPT, COMPLETION)
    run.lineup.update(
        competitor=competitor.pk, slug=competitor.slug, model_id=competitor.model_id,
        staff=staff_user,
        before=[_usd(competitor.price_in_per_m), _usd(competitor.price_out_per_m)],
        listed=[_usd(Decimal(PROMPT) * PER_M), _usd(Decimal(COMPLETION) * PER_M)],
    )  # fmt: skip
    return LineupChange(competitor.pk, competitor.slug, competitor.model_id, run.first_sunday,
                        record=run.lineup)  # fmt: skip


def approve_release(staff: StaffSession, competitor_id: int) -> tuple[int, str] | None:
    """Press "New release with these figures" on the attention page's row of the competitor's
    pending price-change proposal, as staff would; (proposal id, what the admin said), or None
    when the page shows no such row."""
    page = staff.session.get(staff.base + ATTENTION, timeout=HTTP_TIMEOUT)
    page.raise_for_status()
    runs_it = f'href="/admin/agents/competitor/{competitor_id}/change/"'
    for row in ROW.findall(page.text):
        if runs_it not in row:
            continue
        for action, body in FORM.findall(row):
            token = CSRF_FIELD.search(body)
            found = re.search(r"/lineupproposal/(\d+)/decide/", action)
            if 'value="release"' not in body or token is None or found is None:
                continue
            response = staff.session.post(
                staff.base + action,
                data={"csrfmiddlewaretoken": token.group(1), "action": "release"},
                headers={"Referer": staff.base + ATTENTION}, timeout=HTTP_TIMEOUT,
            )  # fmt: skip
            said = [f"{kind}: {TAGS.sub(' ', text).strip()}"
                    for kind, text in MESSAGE.findall(response.text)]  # fmt: skip
            return int(found.group(1)), f"HTTP {response.status_code}; " + (
                "; ".join(said) or "no message"
            )
    return None


def check_lineup(run: Any) -> Check:
    """The approval went through and the releases are as the product promises (module doc)."""
    plan, staff_user = run.lineup, run.lineup["staff"]
    problems: list[str] = []
    proposal = LineupProposal.objects.filter(pk=plan.get("proposal") or 0).first()
    if proposal is None:
        problems.append("staff approved no lineup proposal (" + "; ".join(plan.get("notes", []))
                        + ")")  # fmt: skip
    elif proposal.status != LineupProposal.Status.APPROVED or proposal.decided_by != staff_user:
        problems.append(f"proposal {proposal.pk} is {proposal.status} by {proposal.decided_by!r}")
    elif not _in_admin_history(proposal, staff_user):
        problems.append(f"no admin history line of {staff_user} for proposal {proposal.pk}")
    others = LineupProposal.objects.filter(
        status=LineupProposal.Status.APPROVED, decided_at__gte=run.first_sunday - timedelta(days=1)
    ).exclude(pk=proposal.pk if proposal else None)
    if others.exists():
        problems.append(f"other proposals approved: {list(others.values_list('pk', flat=True))}")

    cohorts = Cohort.objects.filter(pk__in=run.cohort_ids, kind=Cohort.Kind.REHEARSAL)
    first = cohorts.filter(week_start=run.first_sunday).first()
    second = cohorts.filter(week_start=run.first_sunday + timedelta(days=7)).first()
    if first is None or second is None:
        return Check("lineup change", False, "; ".join([*problems, "the first two weeks' "
                                                        "cohorts did not both open"]))  # fmt: skip
    running = Entry.objects.filter(cohort=first, competitor_id=plan["competitor"]).first()
    nextone = Entry.objects.filter(cohort=second, competitor_id=plan["competitor"]).first()
    if running is None or nextone is None or running.release is None or nextone.release is None:
        return Check("lineup change", False, "; ".join([*problems, f"{plan['slug']} has no "
                                                        "pinned entry in both cohorts"]))  # fmt: skip
    old, new = running.release, nextone.release
    if [_usd(old.price_in_per_m), _usd(old.price_out_per_m)] != plan["before"]:
        problems.append(f"the running entry is on release {old.number} at {_prices(old)}, "
                        f"not the old prices {plan['before']}")  # fmt: skip
    if new.pk == old.pk or [_usd(new.price_in_per_m), _usd(new.price_out_per_m)] != plan["listed"]:
        problems.append(f"the next cohort's entry is on release {new.number} at {_prices(new)}, "
                        f"not a new release at the listed {plan['listed']}")  # fmt: skip
    moved = [f for f in UNCHANGED if getattr(old, f) != getattr(new, f)]
    if moved:
        problems.append(f"the new release changed more than the prices: {moved}")
    weeks = {}
    for entry, release in ((running, old), (nextone, new)):
        weeks[entry.pk], found = _recorded(entry, release)
        problems += found
    if not any(w >= 2 for w in weeks[running.pk]):
        problems.append(f"the running entry {running.pk} made no decision after the approval "
                        f"(weeks {weeks[running.pk]})")  # fmt: skip
    kept = _others_kept(first, second, plan["competitor"])
    problems += kept[1]
    detail = (f"{plan['slug']}: cohort {first.pk} runs release {old.number} ({_prices(old)}; "
              f"decided weeks {weeks[running.pk]}), cohort {second.pk} release {new.number} "
              f"({_prices(new)}; weeks {weeks[nextone.pk]}); approved by "
              f"{proposal.decided_by if proposal else 'nobody'} "
              f"({plan.get('said', 'no answer')}); {kept[0]} other competitor(s) kept "
              "their release")  # fmt: skip
    if problems:
        return Check("lineup change", False, "; ".join(problems[:8]) + f" ({detail})")
    return Check("lineup change", True, detail)


def _recorded(entry: Entry, release: Release) -> tuple[list[int], list[str]]:
    """The weeks the entry decided, and where its decisions, their sealed records or its
    event-log record name another release than `release`."""
    problems = []
    decisions = Decision.objects.filter(entry=entry)
    weeks = sorted(decisions.values_list("week", flat=True))
    called = set(decisions.values_list("release_id", flat=True))
    if not called or called != {release.pk}:
        problems.append(f"entry {entry.pk}'s decisions called releases {sorted(called, key=str)},"
                        f" not {release.pk}")  # fmt: skip
    sealed = set()
    for digest in DecisionDigest.objects.filter(entry=entry, state=DecisionDigest.State.FINAL):
        record = json.loads(digest.record_bytes())
        sealed.add((record.get("release") or {}).get("number"))
    if sealed != {release.number}:
        problems.append(f"entry {entry.pk}'s sealed decisions name releases {sorted(sealed, key=str)}"
                        f", not {release.number}")  # fmt: skip
    states = StateRecord.objects.filter(scope=entry.cohort.kind, subject=StateRecord.Subject.ENTRY,
                                        subject_id=entry.pk).order_by("-id")  # fmt: skip
    logged = states.first()
    number = ((logged.state.get("release") or {}).get("number")) if logged else None
    if number != release.number:
        problems.append(f"the event log records entry {entry.pk} on release {number}, not "
                        f"{release.number}")  # fmt: skip
    return weeks, problems


def _others_kept(first: Cohort, second: Cohort, changed: int) -> tuple[int, list[str]]:
    before = dict(Entry.objects.filter(cohort=first).exclude(competitor_id=changed)
                  .values_list("competitor_id", "release_id"))  # fmt: skip
    after = dict(Entry.objects.filter(cohort=second).exclude(competitor_id=changed)
                 .values_list("competitor_id", "release_id"))  # fmt: skip
    moved = [c for c in before if c in after and before[c] != after[c]]
    problems = [f"competitors {moved} changed release too"] if moved else []
    return len([c for c in before if c in after]) - len(moved), problems


def _in_admin_history(proposal: LineupProposal, staff_user: str) -> bool:
    from django.contrib.admin.models import CHANGE, LogEntry

    return LogEntry.objects.filter(
        user__username=staff_user, object_id=str(proposal.pk), action_flag=CHANGE,
        content_type__app_label="agents", content_type__model="lineupproposal",
    ).exists()  # fmt: skip


def _usd(value: Decimal | None) -> str | None:
    return None if value is None else f"{Decimal(value).quantize(Decimal('0.000001')):f}"


def _prices(release: Release) -> str:
    return f"${_usd(release.price_in_per_m)} / ${_usd(release.price_out_per_m)} per M"
