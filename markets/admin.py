"""Admin for markets: browse and search, and fix resolutions with an audit trail.

Resolutions are changed only through the actions (resolve / void / reopen), which ask for a
reason on a confirmation page and call markets.corrections.set_resolution, which records the
change through markets.resolution.record_resolution: every change writes a ResolutionChange row
and settlements follow, or nothing changes. Upstream data is read-only here: the next sync
would overwrite an edit anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from markets.correction_views import FOLLOW_UPS, PREVIEW, CorrectionViews
from markets.corrections import set_resolution
from markets.models import Market, ResolutionChange

REASON_HELP = "Why: shown in the market's audit trail (who, when, from, to, why)."


class CorrectionImpact(Protocol):
    """What a recorded correction did to the books, in words for the result message, told by
    the package that keeps them (cohorts registers one in IMPACT; markets itself knows nothing
    of positions). The figures before and after come from the PREVIEW readers."""

    def result(self, change: ResolutionChange) -> str:
        """What the recorded change did, read back from the settlement rows."""
        ...


IMPACT: list[CorrectionImpact] = []


# The correction flows a market's change page links to: (action name, button label).
CORRECTIONS = (
    ("resolve_to_outcome", "Resolve to an outcome…"),
    ("void_markets", "Void (50-50)…"),
    ("reopen_markets", "Reopen…"),
)


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), help_text=REASON_HELP
    )

    def clean_reason(self) -> str:
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("A reason is required.")
        return reason


class ResolveForm(ReasonForm):
    field_order = ["outcome", "reason"]

    def __init__(self, *args, outcomes: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        # Starts empty: the current outcome preselected made "resolve" a click away from a
        # no-op, and the preview would show nothing until staff changed it.
        self.fields["outcome"] = forms.ChoiceField(
            choices=[("", "— choose —"), *((o, o) for o in outcomes)],
            help_text="The winning outcome.",
        )
        self.order_fields(self.field_order)


class ReopenForm(ReasonForm):
    status = forms.ChoiceField(
        choices=[
            (Market.Status.OPEN, "Open"),
            (Market.Status.CLOSED, "Closed, awaiting resolution"),
        ],
        initial=Market.Status.CLOSED,
        help_text="Reopening clears the outcome, reverses settlements and hands the market back "
        "to the hourly upstream check.",
    )
    field_order = ["status", "reason"]


class ResolutionChangeInline(admin.TabularInline):
    model = ResolutionChange
    extra = 0
    can_delete = False
    fields = (
        "made_at", "changed_at", "source", "changed_by", "from_status", "from_outcome",
        "to_status", "to_outcome", "reason",
    )  # fmt: skip
    readonly_fields = fields
    ordering = ("-changed_at", "-id")
    verbose_name_plural = "Resolution changes (audit trail)"

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Market)
class MarketAdmin(CorrectionViews, admin.ModelAdmin):
    list_display = (
        "short_question", "source", "kind", "status", "resolved_outcome", "prices",
        "volume", "close_time", "needs_attention", "tracked",
    )  # fmt: skip
    list_filter = (
        "status",
        "source",
        "needs_attention",
        "kind",
        "upstream_missing",
        "tracked",
        "in_top",
    )
    search_fields = ("question", "slug", "condition_id", "external_id", "event_slug")
    ordering = ("-volume", "id")
    list_per_page = 50
    inlines = [ResolutionChangeInline]
    change_form_template = "admin/markets/market/change_form_corrections.html"
    actions = ["resolve_to_outcome", "void_markets", "reopen_markets"]
    fieldsets = (
        (None, {"fields": ("question", "source", "external_id", "platform", "url", "description", "resolution_source")}),
        ("Grouping", {"fields": ("condition_id", "slug", "event_slug", "event_title", "category", "tags",
                                 "neg_risk", "neg_risk_market_id", "group_item_title", "group_item_threshold")}),
        ("Outcomes and prices", {"fields": ("kind", "outcomes", "token_ids", "ordered_outcomes", "last_prices",
                                            "last_priced_at", "volume", "liquidity")}),
        ("Resolution", {"fields": ("status", "resolved_outcome", "resolved_at", "resolution_recorded_at",
                                   "resolved_by", "settled_at", "uma_status", "open_time", "close_time",
                                   "closed_time")}),
        ("Attention", {"fields": ("needs_attention", "attention_reason", "upstream_missing", "tracked", "in_top")}),
        ("Sync", {"classes": ("collapse",), "fields": ("last_synced_at", "created_at", "updated_at", "raw")}),
    )  # fmt: skip
    # Staff may only clear or annotate the attention flag; all else comes from upstream or
    # goes through the audited actions.
    editable_fields = ("needs_attention", "attention_reason")

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Market._meta.fields if f.name not in self.editable_fields]

    def has_add_permission(self, request) -> bool:
        return False  # markets come from sync, replays and the demo generator

    def has_delete_permission(self, request, obj=None) -> bool:
        # Forecasts, positions and settlements protect every market that was ever used, and
        # the next sync would bring an unused one back: a Delete button could only be refused.
        return False

    def get_urls(self):
        own = [
            path(
                "<int:market_id>/correct/<str:action>/",
                self.admin_site.admin_view(self.correct_view),
                name="markets_market_correct",
            ),
            path(
                "correct/preview/<str:action>/",
                self.admin_site.admin_view(self.preview_view),
                name="markets_market_correct_preview",
            ),
            path(
                "correct/landed/",
                self.admin_site.admin_view(self.landed_view),
                name="markets_market_correct_landed",
            ),
        ]
        return own + super().get_urls()

    def correct_view(self, request: HttpRequest, market_id: int, action: str) -> HttpResponse:
        """One market's correction from its change page: the same confirmation page and
        service as the changelist actions, for this market only."""
        if action not in dict(CORRECTIONS) or not self.has_change_permission(request):
            raise PermissionDenied("no such correction, or no permission to change markets")
        queryset = Market.objects.filter(pk=get_object_or_404(Market, pk=market_id).pk)
        return getattr(self, action)(request, queryset)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        if self.has_change_permission(request):
            extra["corrections"] = [
                (reverse("admin:markets_market_correct", args=[object_id, name]), label)
                for name, label in CORRECTIONS
            ]
        return super().change_view(request, object_id, form_url, extra)

    @admin.display(description="question", ordering="question")
    def short_question(self, obj: Market) -> str:
        return obj.question if len(obj.question) <= 90 else obj.question[:89] + "…"

    @admin.display(description="last prices")
    def prices(self, obj: Market) -> str:
        return ", ".join(f"{k} {v}" for k, v in (obj.last_prices or {}).items())

    # -- actions --

    @admin.action(description="Resolve to an outcome…", permissions=["change"])
    def resolve_to_outcome(self, request: HttpRequest, queryset: QuerySet[Market]):
        outcomes: list[str] = []
        for market_outcomes in queryset.values_list("outcomes", flat=True):
            outcomes += [o for o in market_outcomes or [] if o not in outcomes]
        return self._resolution_action(
            request,
            queryset,
            action="resolve_to_outcome",
            title="Resolve markets to an outcome",
            make_form=lambda data=None: ResolveForm(data, outcomes=outcomes),
            change=lambda f: {"status": Market.Status.RESOLVED, "outcome": f["outcome"]},
            done="Resolved",
        )

    @admin.action(description="Void (50-50)…", permissions=["change"])
    def void_markets(self, request: HttpRequest, queryset: QuerySet[Market]):
        return self._resolution_action(
            request,
            queryset,
            action="void_markets",
            title="Void markets (50-50, cost basis refunded)",
            make_form=lambda data=None: ReasonForm(data),
            change=lambda f: {"status": Market.Status.VOID, "outcome": ""},
            done="Voided",
        )

    @admin.action(description="Reopen (clear the resolution)…", permissions=["change"])
    def reopen_markets(self, request: HttpRequest, queryset: QuerySet[Market]):
        return self._resolution_action(
            request,
            queryset,
            action="reopen_markets",
            title="Reopen markets",
            make_form=lambda data=None: ReopenForm(data),
            change=lambda f: {"status": f["status"], "outcome": ""},
            done="Reopened",
        )

    def _resolution_action(
        self,
        request: HttpRequest,
        queryset: QuerySet[Market],
        *,
        action: str,
        title: str,
        make_form: Callable[..., forms.Form],
        change: Callable[[dict], dict],
        done: str,
    ) -> TemplateResponse | None:
        """Show a confirmation page with the form; on a valid "apply" POST, change each
        market through set_resolution and report counts. Returning None goes back to the
        changelist."""
        form = make_form(request.POST) if "apply" in request.POST else make_form()
        if "apply" in request.POST and form.is_valid():
            return self._apply(
                request, queryset, change(form.cleaned_data), form.cleaned_data["reason"], done
            )
        markets = list(queryset)
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "form": form,
            "markets": markets,
            "action": action,
            "opts": self.model._meta,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "select_across": request.POST.get("select_across", "0"),
            "preview_url": reverse("admin:markets_market_correct_preview", args=[action]),
            # The preview follows the choice (never the reason: typing it changes nothing).
            "preview_trigger": ", ".join(
                ["load"] + [f"change from:#id_{f}" for f in ("outcome", "status") if f in form.fields]
            ),
        }
        return TemplateResponse(request, "admin/markets/market/resolution_action.html", context)

    def _apply(
        self, request: HttpRequest, queryset, change: dict, reason: str, done: str
    ) -> TemplateResponse:
        # Each market's change is all or nothing (set_resolution): one that cannot be carried
        # out (its settlement cannot follow) is left as it was and listed with the reason.
        markets = list(queryset)
        marks = [follow.mark() for follow in FOLLOW_UPS]
        readers = [reader for reader in PREVIEW if getattr(reader, "on_apply", False)]
        states = [reader.before(markets, float("inf")) for reader in readers]
        changed, refused, effects, changes = 0, [], [], []
        for market in markets:
            try:
                recorded = set_resolution(market, user=request.user, reason=reason, **change)
            except ValidationError as exc:
                refused.append(f"#{market.pk}: {' '.join(exc.messages)}")
                continue
            changed += 1
            changes.append(recorded)
            said = [text for reader in IMPACT if (text := reader.result(recorded))]
            effects.append(f"#{market.pk}: " + ("; ".join(said) or "no position held it"))
        if changed:
            self.message_user(
                request,
                f"{done} {changed} market(s). " + " · ".join(effects[:10]),
                messages.SUCCESS,
            )
        if refused:
            self.message_user(
                request,
                f"{len(refused)} market(s) not changed: " + "; ".join(refused[:10]),
                messages.WARNING,
            )
        changed_markets = [m for m in markets if any(c.market_id == m.pk for c in changes)]
        sections = [
            reader.after(changed_markets, state, float("inf"))
            for reader, state in zip(readers, states, strict=True)
        ]
        return self.result_page(request, changes, sections, marks)


@admin.register(ResolutionChange)
class ResolutionChangeAdmin(admin.ModelAdmin):
    # Narrow columns (from and to in one, question and reason cut with the full text on
    # hover) so the list reads without horizontal scrolling on a laptop screen.
    # Both clocks: when staff made the change, and the scope's (simulated) time it applies at.
    list_display = (
        "clocks", "short_market", "source", "changed_by", "change", "short_reason"
    )  # fmt: skip
    list_select_related = ("market", "changed_by")
    list_filter = ("source", "to_status")
    search_fields = ("market__question", "market__condition_id", "reason")
    date_hierarchy = "changed_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="made / applies at", ordering="changed_at")
    def clocks(self, obj: ResolutionChange) -> str:
        # One column for the two times keeps the list within a laptop screen: when staff made
        # the change (wall clock), then when it applies (the scope's clock; simulated scopes).
        made = f"{obj.made_at:%Y-%m-%d %H:%M}" if obj.made_at else "—"
        return format_html("{}<br>{}", made, f"{obj.changed_at:%Y-%m-%d %H:%M}")

    @admin.display(description="market", ordering="market__question")
    def short_market(self, obj: ResolutionChange) -> str:
        q = obj.market.question
        return format_html(
            '<span title="{}">#{} {}</span>', q, obj.market_id, q if len(q) <= 40 else q[:39] + "…"
        )

    @admin.display(description="from → to")
    def change(self, obj: ResolutionChange) -> str:
        def side(status: str, outcome: str) -> str:
            return f"{status} {outcome}".strip() or "—"

        return f"{side(obj.from_status, obj.from_outcome)} → {side(obj.to_status, obj.to_outcome)}"

    @admin.display(description="reason")
    def short_reason(self, obj: ResolutionChange) -> str:
        r = obj.reason
        return format_html('<span title="{}">{}</span>', r, r if len(r) <= 80 else r[:79] + "…")
