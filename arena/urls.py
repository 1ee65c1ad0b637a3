from django.contrib import admin
from django.http import HttpRequest
from django.http.response import HttpResponseRedirectBase
from django.urls import include, path, register_converter

from arena import health
from arena.admin import attention_view


class PermanentRedirectKeepingMethod(HttpResponseRedirectBase):
    status_code = 308


class MovedModel:
    """The decision audit's models, whose admin pages moved from the agents app to cohorts."""

    regex = "decision|llmcall|forecast"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(MovedModel, "moved")


def moved_admin(request: HttpRequest, model: str, rest: str = "") -> PermanentRedirectKeepingMethod:
    """Decisions, model calls and forecasts moved from the agents app to cohorts: bookmarks and
    links to their old admin pages still arrive."""
    query = request.META.get("QUERY_STRING", "")
    target = f"/admin/cohorts/{model}/{rest}" + (f"?{query}" if query else "")
    return PermanentRedirectKeepingMethod(target)


# A database that fails mid-request is a 503 (retry), not a 500 (web/unavailable.py).
handler500 = "web.unavailable.server_error"

urlpatterns = [
    path("admin/attention/", admin.site.admin_view(attention_view), name="admin-attention"),
    path("admin/agents/<moved:model>/", moved_admin),
    path("admin/agents/<moved:model>/<path:rest>", moved_admin),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("", include("web.urls")),
]
