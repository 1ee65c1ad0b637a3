from django.apps import AppConfig


class CohortsConfig(AppConfig):
    name = "cohorts"
    default_auto_field = "django.db.models.BigAutoField"
