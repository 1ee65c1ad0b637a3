"""Staff's read-only audit of decisions: each decision with its model calls and forecasts, and
the one staff action on it (run a failed or skipped decision again)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from cohorts.correction_impact import SettlementImpact
from cohorts.correction_preview import SettlementPreview
from cohorts.decisions.tasks import enqueue_decisions
from cohorts.models import Decision, Forecast, LLMCall
from cohorts.scope import on_live_path
from cohorts.services import mark_decisions_retryable
from core.money import format_money
from markets.admin import IMPACT
from markets.correction_views import PREVIEW

# The market admin's correction pages tell staff what a correction reverses and pays.
if not any(isinstance(reader, SettlementImpact) for reader in IMPACT):
    IMPACT.append(SettlementImpact())
if not any(isinstance(reader, SettlementPreview) for reader in PREVIEW):
    PREVIEW.insert(0, SettlementPreview())  # the books first, the ranks after


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class LLMCallInline(ReadOnlyInline):
    model = LLMCall
    fields = (
        "attempt",
        "phase",
        "http_status",
        "error_kind",
        "error",
        "served_model",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "latency_ms",
        "finish_reason",
    )
    readonly_fields = fields

    @admin.display(description="cost (USD)")
    def cost(self, obj: LLMCall) -> str:
        return cost(obj)


class ForecastInline(ReadOnlyInline):
    model = Forecast
    fields = ("market", "outcome", "probability", "market_price", "source")
    readonly_fields = fields


class ReadOnlyAdmin(admin.ModelAdmin):
    """The audit trail is written only by the decision run; staff read it."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.display(description="cost (USD)", ordering="cost_usd")
def cost(obj: Decision | LLMCall) -> str:
    """The cost as the public pages print it ("$0.00", "$0.0012"), not the column's ten
    decimals."""
    return format_money(obj.cost_usd) if obj.cost_usd is not None else "—"


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "entry",
        "competitor",
        "week",
        "status",
        "action",
        "tokens_in",
        "tokens_out",
        cost,
        "latency_ms",
        "claimed_at",
    )
    list_filter = (
        "status",
        "action",
        "week",
        "prompt_version",
        "entry__competitor",
        "entry__cohort",
    )
    list_select_related = ("entry__competitor", "entry__cohort")
    search_fields = ("reasoning", "hold_reason", "error")
    date_hierarchy = "claimed_at"
    inlines = (LLMCallInline, ForecastInline)
    actions = ("rerun",)
    change_form_template = "admin/cohorts/decision/change_form_rerun.html"
    RERUN_MESSAGE = "Re-run by staff"
    exclude = ("universe",)  # the content hash identifies it; the select box would load them all

    @admin.display(ordering="entry__competitor__display_name")
    def competitor(self, obj: Decision) -> str:
        return obj.entry.competitor.display_name

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        """A re-run calls the model again (and may cost money): it needs the change-decision
        permission, for the action as for the button, though no field of a decision is ever
        editable here; a view-only account is offered neither."""
        return request.user.has_perm("cohorts.change_decision")

    @admin.action(
        description="Run again on the next `arena decide` (failed or skipped only)",
        permissions=["rerun"],
    )
    def rerun(self, request: HttpRequest, queryset: QuerySet[Decision]) -> None:
        """Marks each failed or skipped decision retryable and says, per decision, what it did
        or why not (the rule that keeps a done or running decision as it is)."""
        was = dict(queryset.values_list("pk", "status"))
        mark_decisions_retryable(Decision.objects.filter(pk__in=list(was)))
        now = dict(Decision.objects.filter(pk__in=list(was)).values_list("pk", "status"))
        marked = [pk for pk in sorted(was) if was[pk] in RERUNNABLE and now[pk] == "retryable"]
        # A rerun is a staff action on the public record: leave an audit row per decision.
        for decision in Decision.objects.filter(pk__in=marked):
            self.log_change(request, decision, "Marked retryable: runs again on the next decide")
        if marked:
            self.message_user(
                request,
                f"{len(marked)} decision(s) marked retryable, run again on the next `arena "
                f"decide`: {', '.join(f'#{pk}' for pk in marked[:20])}"
                f"{' …' if len(marked) > 20 else ''}.",
                messages.SUCCESS,
            )
        refused = [(pk, was[pk]) for pk in sorted(was) if pk not in marked]
        for status, why in WHY_NOT_RERUN.items():
            ids = [pk for pk, was_status in refused if was_status == status]
            if ids:
                listed = ", ".join(f"#{pk}" for pk in ids[:20]) + (" …" if len(ids) > 20 else "")
                self.message_user(
                    request, f"{len(ids)} not re-run ({listed}): {why}", messages.WARNING
                )

    def get_urls(self):
        own = [
            path(
                "<int:decision_id>/rerun/",
                self.admin_site.admin_view(require_POST(self.rerun_view)),
                name="cohorts_decision_rerun",
            )
        ]
        return own + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        decision = Decision.objects.filter(pk=object_id).only("status").first()
        extra["can_rerun"] = (
            decision is not None
            and decision.status in RERUNNABLE
            and self.has_rerun_permission(request)
        )
        if extra["can_rerun"]:
            extra["rerun_url"] = reverse("admin:cohorts_decision_rerun", args=[object_id])
        return super().change_view(request, object_id, form_url, extra)

    def rerun_view(self, request: HttpRequest, decision_id: int) -> HttpResponse:
        """The one-step re-run: mark the failed (or skipped) decision retryable and send it to a
        worker now, instead of waiting for the next `arena decide`. Its earlier calls stay in
        the audit; the public page labels the new attempts as a staff re-run."""
        if not self.has_rerun_permission(request):
            raise PermissionDenied("re-running a decision needs the change-decision permission")
        decision = get_object_or_404(
            Decision.objects.select_related("entry__cohort"), pk=decision_id
        )
        back = HttpResponseRedirect(reverse("admin:cohorts_decision_change", args=[decision.pk]))
        with transaction.atomic():
            if not mark_decisions_retryable(Decision.objects.filter(pk=decision.pk)):
                self.message_user(
                    request,
                    f"Decision {decision.pk} is {decision.status}: only a failed or skipped "
                    "decision can be re-run.",
                    messages.WARNING,
                )
                return back
            self.log_change(request, decision, self.RERUN_MESSAGE)
            # A simulated cohort decides on its own clock: the re-run keeps the decision's time.
            at = None if on_live_path(decision.entry.cohort.kind) else decision.claimed_at
            # enqueue_decisions sends the task once this transaction commits.
            enqueue_decisions([decision.entry_id], decision.week, at)
        self.message_user(
            request,
            f"Decision {decision.pk} sent to a worker to run again; reload this page to see the "
            "new attempt.",
            messages.SUCCESS,
        )
        return back


RERUNNABLE = (Decision.Status.FAILED, Decision.Status.SKIPPED)
# Why a decision in each other status is left as it is, for the bulk action's report.
WHY_NOT_RERUN = {
    Decision.Status.DONE: "a done decision is never re-run: its trades and forecasts are on "
    "the public record and sealed; only a failed or skipped decision can be run again",
    Decision.Status.CLAIMED: "running now: a decision is re-run only once it has failed or "
    "been skipped",
    Decision.Status.RETRYABLE: "already retryable: it runs again on the next `arena decide`",
}


@admin.register(LLMCall)
class LLMCallAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "decision",
        "attempt",
        "phase",
        "http_status",
        "error_kind",
        "served_model",
        cost,
        "latency_ms",
        "started_at",
    )
    list_filter = ("phase", "error_kind", "http_status", "cost_source")
    list_select_related = ("decision",)
    search_fields = ("error", "served_model", "generation_id")


@admin.register(Forecast)
class ForecastAdmin(ReadOnlyAdmin):
    list_display = ("id", "decision", "market", "outcome", "probability", "market_price", "source")
    list_filter = ("source",)
    list_select_related = ("decision", "market")
    raw_id_fields = ("decision", "market", "entry")
