from django.apps import AppConfig


class WebConfig(AppConfig):
    """The public site: pages, the JSON API, exports, their reads and the page cache."""

    name = "web"
    verbose_name = "Public site"
