from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from cohorts.seals.events import register_kind
        from scoring import receivers  # noqa: F401  (connects the signal receivers)
        from scoring.services_seal import KIND, READER

        register_kind(KIND, READER)  # `arena verify` rebuilds score-run records through it
