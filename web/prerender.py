"""Hot pages rendered on write, not on a visitor's request.

Every write replaces a version token once it commits (core/versions.py), and the next visitor of
each page that depends on it paid a cold render. The pages visitors read most are rendered again
by a Celery worker right after such a write, through the site's own request path (the page
cache middleware stores what it renders under the tokens it read first, as for any visitor),
so the visitor that follows finds them cached:

    /                      the home page (the default scope, the leaderboard and its chart)
    /cohorts/<id>/         each cohort still deciding or tracking, newest first (at most 8)
    /api/leaderboard       the leaderboard API
    /api/overview          the home chart's series
    /markets/              the first page of the market list

Who asks: a write committed in a Celery worker (ticks, decision rounds, resolutions, score runs
all run there) queues one `prerender_hot_pages` task; writes that commit while one is queued
and not yet started ride along with it, so a burst of writes costs one round of renders, and a
write during a round queues the next. Each such write also takes the hot pages' render locks
for the new tokens (`reserve`) before it publishes them (core.versions.replacing), and again
under the tokens published once they are (two writes on two threads each reserved its own new
token beside the other's old one), so no visitor
sees a new token unreserved: until the round has rendered a page, its visitors get the previous
version instead of rendering it themselves (the wait for a worker is the broker's delivery plus
the renders before it in the round: tenths of a second). Writes made in web processes (an
outside agent's submission, a staff correction) neither reserve nor queue: a web process must
not wait on the broker, so the next visitor of each hot page renders it, once per page. When no worker runs, nothing is
rendered ahead and visitors render as they do without this (the page cache still serves them).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest

from cohorts.models import Cohort
from web.cache import PRERENDER
from web.cache import reserve as reserve_page

FIXED = ("/", "/api/leaderboard", "/api/overview", "/markets/")
MAX_COHORTS = 8
QUEUED_KEY = "arena:prerender:queued"
QUEUED_SECONDS = 300  # a lost task (worker killed) lets the next write queue another after this

_handler: WSGIHandler | None = None


def hot_paths() -> list[str]:
    running = (
        Cohort.objects.exclude(status=Cohort.Status.COMPLETED)
        .order_by("-week_start", "-pk")
        .values_list("pk", flat=True)[:MAX_COHORTS]
    )
    return [*FIXED, *(f"/cohorts/{pk}/" for pk in running)]


def _environ(path: str) -> dict:
    hosts = [h for h in settings.ALLOWED_HOSTS if h not in ("*",) and not h.startswith(".")]
    host = hosts[0] if hosts else "localhost"
    secure = bool(getattr(settings, "SECURE_SSL_REDIRECT", False))
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": host,
        "SERVER_PORT": "443" if secure else "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "https" if secure else "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if secure:
        environ["HTTP_X_FORWARDED_PROTO"] = "https"  # what the proxy in front says
    return environ


def reserve(paths: Iterable[str], upcoming: Mapping[str, str] | None = None) -> int:
    """Each path's render lock for the tokens about to be published (`upcoming`; the others as
    they are), held for the round that renders it (web.cache.reserve): how many were taken."""
    return sum(reserve_page(WSGIRequest(_environ(path)), upcoming) for path in paths)


def render(paths: Iterable[str]) -> dict[str, str]:
    """Each path through the site as an anonymous GET: path -> the page cache's answer
    ("miss": rendered and stored now, "hit": already current) or the status when not 200."""
    global _handler
    if _handler is None:
        _handler = WSGIHandler()
    out: dict[str, str] = {}
    for path in paths:
        status: list[str] = []
        environ = {**_environ(path), PRERENDER: True}
        response = _handler(environ, lambda s, headers, *_, seen=status: seen.append(s))
        try:
            cached = response.get("X-Cache", "")
        finally:
            response.close()
        code = status[0].split()[0] if status else "?"
        out[path] = cached if code == "200" else code
    return out


def render_hot_pages() -> dict[str, str]:
    """The task's work: take the queued mark first, so a write committing during this round
    queues the next one, then render."""
    cache.delete(QUEUED_KEY)
    if not settings.ARENA_PAGE_CACHE:
        return {}
    return render(hot_paths())
