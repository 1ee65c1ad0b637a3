"""Public pages and the JSON API. The site issue fills this in."""

from django.urls import path

from arena import views

urlpatterns = [
    path("", views.home, name="home"),
]
