from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from scoring import receivers  # noqa: F401  (connects the signal receivers)
