"""Admin of the lineup review: its proposals, read-only, and the one-step decision on each (from
the proposal list or from /admin/attention/, which shows the pending ones).

Each decision checks the permission of the change it makes before anything is written:
a new competitor needs agents.add_competitor; a new release agents.add_release and
agents.change_competitor (the release is the competitor's model fields, changed); leaving a
competitor out of the next cohorts agents.change_competitor; a dismissal
agents.change_lineupproposal.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from agents import lineup_review
from agents.models import LineupProposal, LineupReview

ACTIONS = {
    "competitor": ("agents.add_competitor",),
    "release": ("agents.add_release", "agents.change_competitor"),
    "retire": ("agents.change_competitor",),
    "dismiss": ("agents.change_lineupproposal",),
}


@admin.register(LineupProposal)
class LineupProposalAdmin(admin.ModelAdmin):
    list_display = ("proposed_at", "kind", "catalog", "model_id", "name", "competitor",
                    "detail", "status", "decided_by", "outcome")  # fmt: skip
    list_filter = ("status", "kind", "catalog")
    search_fields = ("model_id", "name")
    readonly_fields = [f.name for f in LineupProposal._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # only a review proposes

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # the record of what was proposed and decided stays

    def get_urls(self):
        decide = self.admin_site.admin_view(require_POST(self.decide_view))
        return [
            path("<int:proposal_id>/decide/", decide, name="agents_lineupproposal_decide"),
            *super().get_urls(),
        ]

    def decide_view(self, request: HttpRequest, proposal_id: int) -> HttpResponse:
        # Staff who may make none of the decisions are refused before their input is read.
        if not any(request.user.has_perms(needed) for needed in ACTIONS.values()):
            raise PermissionDenied("deciding a lineup proposal needs a change permission")
        action = request.POST.get("action", "")
        if action not in ACTIONS:
            return HttpResponseBadRequest(f"unknown action {action[:40]!r}: one of "
                                          f"{', '.join(ACTIONS)}")  # fmt: skip
        if not request.user.has_perms(ACTIONS[action]):
            raise PermissionDenied(f"{action} needs the permissions {', '.join(ACTIONS[action])}")
        competitor_id = None
        if action == "release" and request.POST.get("competitor"):
            try:
                competitor_id = int(request.POST["competitor"])
            except ValueError:
                return HttpResponseBadRequest("competitor must be a competitor's id")
        by = request.user.get_username()
        try:
            if action == "competitor":
                made = lineup_review.approve_as_competitor(proposal_id, by)
                done = f"Added competitor {made.slug}: it runs in the cohorts opened from now on."
            elif action == "release":
                lineup_review.approve_as_release(proposal_id, by, competitor_id)
                done = f"Approved: {LineupProposal.objects.get(pk=proposal_id).outcome}."
            elif action == "retire":
                made = lineup_review.approve_retirement(proposal_id, by)
                done = f"{made.slug} is left out of the cohorts opened from now on."
            else:
                lineup_review.dismiss(proposal_id, by)
                done = f"Proposal #{proposal_id} dismissed."
        except lineup_review.ProposalError as exc:
            messages.error(request, str(exc))
        else:
            proposal = LineupProposal.objects.get(pk=proposal_id)
            self.log_change(request, proposal, f"{action}: {proposal.outcome}")
            messages.success(request, done)
        return HttpResponseRedirect(reverse("admin-attention") + "#lineup")


@admin.register(LineupReview)
class LineupReviewAdmin(admin.ModelAdmin):
    list_display = ("week_start", "started_at", "finished_at", "summary")
    readonly_fields = ("week_start", "started_at", "finished_at", "summary")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
