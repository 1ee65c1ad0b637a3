from django.contrib import admin
from django.urls import include, path

from arena import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("", include("arena.site_urls")),
]
