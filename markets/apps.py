from django.apps import AppConfig


class MarketsConfig(AppConfig):
    name = "markets"
    default_auto_field = "django.db.models.BigAutoField"
