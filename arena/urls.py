from django.contrib import admin
from django.http import HttpRequest
from django.http.response import HttpResponseRedirectBase
from django.urls import include, path, re_path

from arena import health
from arena.admin import attention_view


class PermanentRedirectKeepingMethod(HttpResponseRedirectBase):
    status_code = 308


def moved_admin(request: HttpRequest, model: str, rest: str) -> PermanentRedirectKeepingMethod:
    """Decisions, model calls and forecasts moved from the agents app to cohorts: bookmarks and
    links to their old admin pages still arrive."""
    query = request.META.get("QUERY_STRING", "")
    target = f"/admin/cohorts/{model}/{rest}" + (f"?{query}" if query else "")
    return PermanentRedirectKeepingMethod(target)


urlpatterns = [
    path("admin/attention/", admin.site.admin_view(attention_view), name="admin-attention"),
    re_path(r"^admin/agents/(?P<model>decision|llmcall|forecast)/(?P<rest>.*)$", moved_admin),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("", include("web.urls")),
]
