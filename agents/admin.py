"""Admin: competitors are edited by staff; their releases are made by those edits and are
read-only once an entry used them; decisions and their calls are a read-only audit."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib import admin
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from agents import endpoints, lineup_admin, tokens  # noqa: F401 (lineup_admin registers its pages)
from agents.models import RELEASE_FIELDS, AgentToken, Competitor, Release

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
    link = forms.URLField(
        required=False,
        max_length=300,
        assume_scheme="https",
        help_text=Competitor._meta.get_field("link").help_text,
    )

    class Meta:
        model = Competitor
        # Everything staff edit except base_url / api_key_env, which come from `endpoint`.
        fields = ("slug", "display_name", "kind", "family", "provider", "model_id", "strategy",
                  "params", "context_tokens", "structured_output", "price_in_per_m",
                  "price_out_per_m", "knowledge_cutoff",
                  "replicates", "active", "simulated", "team", "contact", "link",
                  "agent_version", "public_key", "notes")  # fmt: skip

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
        cast(forms.ChoiceField, self.fields["endpoint"]).choices = choices

    def clean_endpoint(self) -> str:
        value = self.cleaned_data["endpoint"]
        if value == NOT_ALLOWED:
            raise forms.ValidationError(
                "This competitor's endpoint is not on the allow-list; pick an allowed one."
            )
        return value

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if cleaned is not None and "endpoint" in cleaned:
            # Set before the model's own checks run (a simulated competitor: loopback only,
            # never a key), so they judge the endpoint being saved, not the stored one.
            url, _, var = cleaned["endpoint"].partition("|")
            self.instance.base_url, self.instance.api_key_env = url, var
        return cleaned

    def _update_errors(self, errors: forms.ValidationError) -> None:
        # The model reports base_url / api_key_env, which this form sets from `endpoint`: the
        # message belongs there (a field the form lacks would be a ValueError, a 500).
        if hasattr(errors, "error_dict"):
            moved: dict[str, list] = {}
            for field, messages in errors.error_dict.items():
                moved.setdefault("endpoint" if field in MOVED else field, []).extend(messages)
            errors = forms.ValidationError(moved)
        super()._update_errors(errors)  # type: ignore[misc]  # a private hook the stubs omit


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    """A release an entry used is shown read-only (the model and the database refuse a change
    too); an unused one may still be corrected."""

    list_display = ("competitor", "number", "model_id", "provider", "base_url", "created_at")
    list_filter = ("provider",)
    search_fields = ("competitor__slug", "model_id")
    ordering = ("competitor", "-number")

    def get_readonly_fields(self, request, obj=None):
        # The endpoint is chosen from the operator's list on the competitor, never typed here.
        fixed = ("competitor", "number", "created_at", "base_url", "api_key_env")
        if obj is not None and obj.is_used:
            return (*fixed, *(f for f in RELEASE_FIELDS if f not in fixed))
        return fixed

    def has_add_permission(self, request) -> bool:
        return False  # a release is made by changing the competitor's model fields

    def has_delete_permission(self, request, obj=None) -> bool:
        return obj is None or not obj.is_used


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
    readonly_fields = ("created_at", "updated_at", "releases")
    fieldsets = (
        (None, {"fields": ("slug", "display_name", "kind", "family", "active", "replicates")}),
        (
            "Model",
            {
                "description": "A change of any model, endpoint or price field is a new release: "
                "cohorts opened after it run it, open cohorts keep the release they started with.",
                "fields": (
                    "provider",
                    "model_id",
                    "params",
                    "context_tokens",
                    "structured_output",
                    "knowledge_cutoff",
                ),
            },
        ),
        ("Endpoint", {"fields": ("endpoint", "simulated")}),
        ("Releases", {"fields": ("releases",)}),
        (
            "Fallback prices (USD per million tokens)",
            {"fields": ("price_in_per_m", "price_out_per_m")},
        ),
        ("Baseline", {"fields": ("strategy",)}),
        (
            "Outside agent",
            {
                "description": "Kind \"Outside agent\": the team's agent calls the agent API "
                "with a token (issue one under API tokens); the arena never calls it. A new "
                "declared version is a new release for cohorts opened after it.",
                "fields": ("team", "contact", "link", "agent_version", "public_key"),
            },
        ),
        (None, {"fields": ("notes", "created_at", "updated_at")}),
    )

    @admin.display(description="Releases (newest first)")
    def releases(self, obj: Competitor) -> str:
        # Read-only text, not an inline: a release is made by saving the fields above.
        if obj.pk is None or not obj.releases.exists():
            return "none yet"
        items = format_html_join(
            "",
            '<li><a href="{}">release {}</a>: {} ({}){}</li>',
            (
                (
                    reverse("admin:agents_release_change", args=[r.pk]),
                    r.number,
                    r.model_id or "builtin",
                    r.base_url or "default endpoint",
                    ", used by entries" if r.is_used else "",
                )
                for r in obj.releases.order_by("-number")
            ),
        )
        return format_html("<ul>{}</ul>", items)


class AgentTokenForm(forms.ModelForm):
    class Meta:
        model = AgentToken
        fields = ("competitor", "label", "expires_at", "rate_per_minute")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "competitor" in self.fields:
            field = cast(forms.ModelChoiceField, self.fields["competitor"])
            field.queryset = Competitor.objects.filter(kind=Competitor.Kind.OUTSIDE)


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    """Issue an outside agent's token (shown once, on the page right after "Save"), see when it
    was last used, revoke it. The token itself is never stored: only its prefix and digest."""

    form = AgentTokenForm
    list_display = ("prefix", "competitor", "label", "created_at", "expires_at", "last_used_at",
                    "revoked_at", "rate_per_minute")  # fmt: skip
    list_filter = ("competitor",)
    search_fields = ("prefix", "label", "competitor__slug")
    actions = ("revoke",)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("competitor", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at")

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("competitor", "label", "expires_at", "rate_per_minute")
        return ("competitor", "prefix", "label", "rate_per_minute", "created_at", "expires_at",
                "last_used_at", "revoked_at")  # fmt: skip

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = tokens.issue(
            form.cleaned_data["competitor"],
            label=form.cleaned_data.get("label") or "",
            expires_at=form.cleaned_data.get("expires_at"),
            rate_per_minute=form.cleaned_data.get("rate_per_minute") or 30,
        )
        obj.pk = issued.row.pk
        request._arena_issued_token = issued.token  # for response_add, this request only

    def response_add(self, request, obj, post_url_continue=None):
        # The one time the token is shown: in this response's body, not in a message (messages
        # travel in a cookie or the session) and not in a URL.
        token = getattr(request, "_arena_issued_token", None)
        if token is None:
            return super().response_add(request, obj, post_url_continue)
        return TemplateResponse(
            request,
            "admin/agents/token_issued.html",
            {**self.admin_site.each_context(request), "token": token, "row": obj,
             "title": "API token issued", "opts": self.model._meta},  # fmt: skip
        )  # the admin's never_cache covers it: no-store

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for row in queryset:
            tokens.revoke(row)
        self.message_user(request, f"{queryset.count()} token(s) revoked.")
