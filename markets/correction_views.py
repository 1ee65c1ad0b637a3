"""The market admin's correction pages beyond the form: the preview of one choice (a dry run,
fetched by htmx as staff change the choice), the result page after a correction, and the link
to the rescore once it lands.

What a correction changes is told by the packages that keep it, registered here: PREVIEW
readers (markets.corrections.PreviewReader; cohorts: settlements, cash and P/L; scoring: ranks
and headline scores) and FOLLOW_UPS (scoring: the new score run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode

from markets.corrections import PreviewReader, preview_resolution, scope_time
from markets.models import Market, ResolutionChange

# A preview's readers get this long between them (settings.ARENA_CORRECTION_PREVIEW_S);
# scoring says so and steps aside when a dry run of the scores would not fit.
PREVIEW_BUDGET_S = 4.0
MAX_PREVIEW_MARKETS = 50
IDS = "_selected_action"  # django.contrib.admin.helpers.ACTION_CHECKBOX_NAME

PREVIEW: list[PreviewReader] = []


class FollowUp(Protocol):
    """Work a correction sets off after it commits (scoring: the rescore), linked from the
    result page once it lands."""

    def mark(self) -> str:
        """An opaque token of the state before the change."""
        ...

    def landed(self, markets: list[Market], mark: str) -> list[tuple[str, str]]:
        """(label, url) of what has landed since `mark` for these markets ([] while pending)."""
        ...


FOLLOW_UPS: list[FollowUp] = []

REOPEN_STATUSES = (Market.Status.OPEN, Market.Status.CLOSED)


def chosen_change(action: str, params: Any) -> tuple[str, str] | None:
    """(status, outcome) the action's form asks for, or None while the choice is incomplete.
    Raises ValueError for a choice the form could never send."""
    if action == "resolve_to_outcome":
        outcome = (params.get("outcome") or "").strip()
        return (Market.Status.RESOLVED, outcome) if outcome else None
    if action == "void_markets":
        return Market.Status.VOID, ""
    if action == "reopen_markets":
        status = params.get("status") or Market.Status.CLOSED
        if status not in REOPEN_STATUSES:
            raise ValueError(f"a reopened market is open or closed, not {status!r}")
        return status, ""
    raise ValueError(f"no such correction {action!r}")


def clocks(change: ResolutionChange) -> dict[str, Any]:
    """Both times of a staff change, for templates: when it was made (wall clock) and, for a
    simulated scope, the scope's time it applies at."""
    simulated = change.made_at is not None and abs(
        (change.made_at - change.changed_at).total_seconds()
    ) >= 1
    return {"made_at": change.made_at or change.changed_at, "applies_at": change.changed_at,
            "simulated": simulated}  # fmt: skip


class CorrectionViews:
    """Mixed into MarketAdmin (which supplies admin_site and has_change_permission)."""

    admin_site: Any

    if TYPE_CHECKING:  # MarketAdmin's own; a stub here would shadow it at run time

        def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool: ...

    def _markets(self, request: HttpRequest) -> list[Market] | HttpResponse:
        raw = request.GET.getlist(IDS)
        if not raw or len(raw) > MAX_PREVIEW_MARKETS or not all(v.isdigit() for v in raw):
            return HttpResponseBadRequest(
                f"Give 1 to {MAX_PREVIEW_MARKETS} market ids as {IDS}.", content_type="text/plain"
            )
        markets = list(Market.objects.filter(pk__in=[int(v) for v in raw]).order_by("pk"))
        if not markets:
            return HttpResponseBadRequest("No such market.", content_type="text/plain")
        return markets

    def preview_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """The dry run of one choice, as an HTML fragment the form swaps in."""
        if not self.has_change_permission(request):
            raise PermissionDenied("no permission to change markets")
        markets = self._markets(request)
        if isinstance(markets, HttpResponse):
            return markets
        try:
            change = chosen_change(action, request.GET)
        except ValueError as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain")
        context: dict[str, Any] = {"markets": markets, "change": change}
        if change is not None:
            status, outcome = change
            context["preview"] = preview_resolution(
                markets, status=status, outcome=outcome, readers=PREVIEW,
                budget_s=getattr(settings, "ARENA_CORRECTION_PREVIEW_S", PREVIEW_BUDGET_S),
            )  # fmt: skip
            context["refused"] = [
                (m, context["preview"].refused[m.pk])
                for m in markets
                if m.pk in context["preview"].refused
            ]
        return TemplateResponse(request, "admin/markets/market/correction_preview.html", context)

    def result_page(
        self,
        request: HttpRequest,
        changes: list[ResolutionChange],
        sections: list[Any],
        marks: list[str],
    ) -> TemplateResponse:
        """What the correction did, with the same figures as its preview, and where the rescore
        will be linked once it lands."""
        landed = reverse("admin:markets_market_correct_landed") + "?" + urlencode(
            [(IDS, c.market_id) for c in changes] + [("mark", m) for m in marks]
        )
        context = {
            **self.admin_site.each_context(request),
            "title": "Correction applied" if changes else "Nothing changed",
            "opts": Market._meta,
            "changes": [
                (c, clocks(c), scope_time(c.market) is not None)
                for c in ResolutionChange.objects.filter(pk__in=[c.pk for c in changes])
                .select_related("market", "changed_by")
                .order_by("pk")
            ],
            "sections": sections,
            "landed_url": landed if changes and FOLLOW_UPS else "",
        }
        return TemplateResponse(request, "admin/markets/market/correction_result.html", context)

    def landed_view(self, request: HttpRequest) -> HttpResponse:
        """The follow-ups' links once they land, polled by the result page until then."""
        if not self.has_change_permission(request):
            raise PermissionDenied("no permission to change markets")
        markets = self._markets(request)
        if isinstance(markets, HttpResponse):
            return markets
        marks = request.GET.getlist("mark")
        if len(marks) != len(FOLLOW_UPS):
            return HttpResponseBadRequest("One mark per follow-up.", content_type="text/plain")
        try:
            links = [
                link for f, m in zip(FOLLOW_UPS, marks, strict=True) for link in f.landed(markets, m)
            ]
        except ValueError as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain")
        context = {"links": links, "poll_url": request.get_full_path()}
        return TemplateResponse(request, "admin/markets/market/correction_landed.html", context)
