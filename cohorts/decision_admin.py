"""Staff's read-only audit of decisions: each decision with its model calls and forecasts, and
the one staff action on it (run a failed or skipped decision again)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from cohorts.models import Decision, Forecast, LLMCall
from cohorts.services import mark_decisions_retryable


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
        "cost_usd",
        "latency_ms",
        "finish_reason",
    )
    readonly_fields = fields


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
        "cost_usd",
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
    exclude = ("universe",)  # the content hash identifies it; the select box would load them all

    @admin.display(ordering="entry__competitor__display_name")
    def competitor(self, obj: Decision) -> str:
        return obj.entry.competitor.display_name

    @admin.action(description="Run again on the next `arena decide` (failed or skipped only)")
    def rerun(self, request: HttpRequest, queryset: QuerySet[Decision]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        count = mark_decisions_retryable(Decision.objects.filter(pk__in=ids))
        # A rerun is a staff action on the public record: leave an audit row per decision.
        for decision in Decision.objects.filter(pk__in=ids, status=Decision.Status.RETRYABLE):
            self.log_change(request, decision, "Marked retryable: runs again on the next decide")
        self.message_user(request, f"{count} decisions marked retryable", messages.SUCCESS)


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
        "cost_usd",
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
