from django.apps import AppConfig


class CohortsConfig(AppConfig):
    name = "cohorts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from cohorts import receivers  # noqa: F401  (connects the signal receivers)
