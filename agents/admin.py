"""Admin: competitors are edited by staff; decisions and their calls are a read-only audit."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from agents import endpoints
from agents.models import Competitor, Decision, Forecast, LLMCall
from agents.services import mark_decisions_retryable

NOT_ALLOWED = "not-allowed"
MOVED = ("base_url", "api_key_env")  # model fields the form sets from `endpoint`


class CompetitorForm(forms.ModelForm):
    """The endpoint is a choice among the operator's allow-list (agents/endpoints.py), never a
    typed URL or variable name."""

    endpoint = forms.ChoiceField(
        label="Endpoint",
        required=False,  # "" is the default endpoint
        help_text="The operator's list (ARENA_LLM_ENDPOINTS); ask them to add an endpoint.",
    )

    class Meta:
        model = Competitor
        # Everything staff edit except base_url / api_key_env, which come from `endpoint`.
        fields = ("slug", "display_name", "kind", "family", "provider", "model_id", "strategy",
                  "params", "price_in_per_m", "price_out_per_m", "knowledge_cutoff",
                  "replicates", "active", "simulated", "notes")  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        default = f"Default: {settings.ARENA_LLM_BASE_URL} (key from $OPENROUTER_API_KEY)"
        choices = [("", default)]
        try:
            choices += [(e.value, e.label) for e in endpoints.allowed()]
        except endpoints.EndpointConfigError as exc:
            self.fields["endpoint"].help_text = str(exc)
        current = self.instance
        if current.pk and not endpoints.is_default(current.base_url, current.api_key_env):
            why = endpoints.check(current.base_url, current.api_key_env)
            url = (current.base_url or settings.ARENA_LLM_BASE_URL).rstrip("/")
            value = endpoints.Endpoint(url, current.api_key_env).value
            if why:  # stored before the allow-list, or since removed from it
                choices.append((NOT_ALLOWED, f"Not allowed: {why}"))
                value = NOT_ALLOWED
            self.initial.setdefault("endpoint", value)
        self.fields["endpoint"].choices = choices

    def clean_endpoint(self) -> str:
        value = self.cleaned_data["endpoint"]
        if value == NOT_ALLOWED:
            raise forms.ValidationError(
                "This competitor's endpoint is not on the allow-list; pick an allowed one."
            )
        return value

    def clean(self):
        cleaned = super().clean()
        if "endpoint" in cleaned:
            # Set before the model's own checks run (a simulated competitor: loopback only,
            # never a key), so they judge the endpoint being saved, not the stored one.
            url, _, var = cleaned["endpoint"].partition("|")
            self.instance.base_url, self.instance.api_key_env = url, var
        return cleaned

    def _update_errors(self, errors):
        # The model reports base_url / api_key_env, which this form sets from `endpoint`: the
        # message belongs there (a field the form lacks would be a ValueError, a 500).
        if hasattr(errors, "error_dict"):
            moved: dict[str, list] = {}
            for field, messages in errors.error_dict.items():
                moved.setdefault("endpoint" if field in MOVED else field, []).extend(messages)
            errors = forms.ValidationError(moved)
        super()._update_errors(errors)


@admin.register(Competitor)
class CompetitorAdmin(admin.ModelAdmin):
    form = CompetitorForm
    list_display = (
        "display_name",
        "slug",
        "kind",
        "family",
        "model_id",
        "strategy",
        "replicates",
        "active",
        "simulated",
    )
    list_filter = ("kind", "simulated", "active", "family", "provider")
    list_editable = ("active", "replicates")
    search_fields = ("slug", "display_name", "model_id")
    prepopulated_fields = {"slug": ("display_name",)}
    readonly_fields = ("created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("slug", "display_name", "kind", "family", "active", "replicates")}),
        ("Model", {"fields": ("provider", "model_id", "params", "knowledge_cutoff")}),
        ("Endpoint", {"fields": ("endpoint", "simulated")}),
        (
            "Fallback prices (USD per million tokens)",
            {"fields": ("price_in_per_m", "price_out_per_m")},
        ),
        ("Baseline", {"fields": ("strategy",)}),
        (None, {"fields": ("notes", "created_at", "updated_at")}),
    )


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
