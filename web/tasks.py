"""The site's Celery task: hot pages rendered on write (web/prerender.py), and the receiver that
queues it when a write commits in a worker."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from celery import shared_task
from celery.signals import worker_init
from django.conf import settings
from django.core.cache import cache

from web import prerender

log = logging.getLogger(__name__)
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
    return prerender.render_hot_pages()


def _rendering_ahead() -> bool:
    return in_worker() and settings.ARENA_PAGE_CACHE and settings.ARENA_PRERENDER


def reserve(tokens: Mapping[str, str], **_kwargs) -> None:
    """Receiver of core.versions.replacing: in a Celery worker, every write reserves the hot
    pages' renders under the tokens it is about to publish, a round queued or not (a write that
    rides along with a queued round changes the tokens that round will render under)."""
    if not _rendering_ahead():
        return
    try:
        prerender.reserve(prerender.hot_paths(), tokens)
    except Exception:  # noqa: BLE001  (a cache hiccup costs the reservation, not the write)
        log.warning("could not reserve the hot pages' renders", exc_info=True)


def queue(**_kwargs) -> None:
    """Receiver of core.versions.replaced: in a Celery worker, one round per burst of writes.

    First the renders are reserved again under the tokens now published: two writes on two
    threads each reserved its own new token beside the other's old one, and the combination
    both published (each one's new token) was reserved by neither; a visitor rendered it (over a
    rehearsal, one hot-page request in 150). Whichever write publishes last reserves it here."""
    if not _rendering_ahead():
        return
    try:
        prerender.reserve(prerender.hot_paths())
    except Exception:  # noqa: BLE001  (a cache hiccup costs the reservation, not the write)
        log.warning("could not reserve the hot pages' renders", exc_info=True)
    try:
        if cache.add(prerender.QUEUED_KEY, 1, prerender.QUEUED_SECONDS):
            prerender_hot_pages.apply_async(retry=False)
    except Exception:  # noqa: BLE001  (a broker or cache hiccup costs the pre-render, not the write)
        cache.delete(prerender.QUEUED_KEY)
        log.warning("could not queue the hot pages' render", exc_info=True)
