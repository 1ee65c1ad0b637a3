"""The site's Celery task: hot pages rendered on write (web/prerender.py)."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_init

_worker = False


@worker_init.connect
def _mark_worker(**_kwargs) -> None:
    global _worker
    _worker = True


def in_worker() -> bool:
    """True in a Celery worker process, where writes may queue tasks without making a web
    request wait on the broker."""
    return _worker


@shared_task(ignore_result=True)
def prerender_hot_pages() -> dict[str, str]:
    from web import prerender

    return prerender.render_hot_pages()
