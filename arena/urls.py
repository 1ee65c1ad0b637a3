from django.contrib import admin
from django.urls import include, path

from arena import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("", include("arena.site_urls")),
]
