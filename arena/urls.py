from django.contrib import admin
from django.urls import include, path

from arena import health
from arena.admin import attention_view

urlpatterns = [
    path("admin/attention/", admin.site.admin_view(attention_view), name="admin-attention"),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("", include("arena.site_urls")),
]
