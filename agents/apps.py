from django.apps import AppConfig
from django.core import checks


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(check_endpoints)


def check_endpoints(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A malformed ARENA_LLM_ENDPOINTS is reported by `manage.py check` / `arena up`, not first by
    a skipped decision."""
    from agents import endpoints

    try:
        endpoints.allowed()
    except endpoints.EndpointConfigError as exc:
        return [checks.Error(str(exc), id="agents.E001")]
    return []
