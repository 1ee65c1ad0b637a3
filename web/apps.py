from django.apps import AppConfig


class WebConfig(AppConfig):
    """The public site: pages, the JSON API, exports, their reads and the page cache."""

    name = "web"
    verbose_name = "Public site"

    def ready(self) -> None:
        from core import versions
        from web import tasks

        # A committed write renders the hot pages again in a worker (web/prerender.py), their
        # renders reserved for that round before the write's new tokens are published.
        versions.replacing.connect(tasks.reserve, dispatch_uid="web.tasks.reserve")
        versions.replaced.connect(tasks.queue, dispatch_uid="web.tasks.queue")
