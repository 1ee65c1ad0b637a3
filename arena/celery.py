"""The Celery app and the one beat schedule of the arena.

Tasks are thin wrappers over service functions (see each app's tasks.py); every task here is
safe to run twice at once because the services claim their work with unique constraints or
conditional UPDATEs.
"""

import contextlib
import logging
import os
import sys

from celery import Celery, signals
from celery.schedules import crontab as _crontab
from kombu.transport import TRANSPORT_ALIASES

from core import clock

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
# The embedded broker writes each message whole before a worker can take it (arena/broker.py).
TRANSPORT_ALIASES["filesystem"] = "arena.broker:Transport"


@signals.setup_logging.connect
def _one_log_format(loglevel=None, **kwargs) -> None:
    """Celery would install its own handlers and format on the worker's and beat's root logger;
    answering this signal keeps Django's LOGGING (arena/logfmt.py) in charge, so the worker and
    beat write the same key=value lines as the web. `--loglevel` still sets the level."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


@signals.celeryd_init.connect
def _no_banner(instance=None, **kwargs) -> None:
    """The worker's start-up banner (39 lines printed outside any log format) is off; its
    "ready" line says the same in the one format. Beat's banner is off by `celery -q`. The
    notices the worker prints when it is stopped are put into the format."""
    if instance is not None:
        instance.quiet = True
    from celery.apps import worker as worker_app

    worker_app.safe_say = _say_in_format


def _say_in_format(msg: object, f=sys.__stderr__) -> None:
    """Celery's notices from the worker's signal handlers ("worker: Warm shutdown
    (MainProcess)" on every systemd stop, the Ctrl-C warnings) are printed bare, with a blank
    line before each; here they are lines of the one format. Written with one os.write, as
    Celery's own safe_say does: a signal handler must not wait on a logging lock that the code
    it interrupted holds."""
    from celery.apps import worker as worker_app

    from arena.logfmt import KeyValueFormatter

    record = logging.LogRecord(
        "celery.apps.worker", logging.INFO, __file__, 0, str(msg).strip(), None, None
    )
    write = getattr(worker_app, "_original_os_write", os.write)  # unpatched under eventlet
    # A notice lost must never stop the shutdown it reports.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        write(f.fileno(), (KeyValueFormatter().format(record) + "\n").encode())


@signals.worker_init.connect
@signals.beat_init.connect
def _refuse_live_data(**kwargs) -> None:
    """A rehearsal's worker or beat exits before its first task when the database holds live
    cohorts (cohorts.scope.refuse_live_data)."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from cohorts.scope import exit_on_live_data

    exit_on_live_data()


@signals.worker_ready.connect
@signals.beat_init.connect
def _say_ready(**kwargs) -> None:
    """Under `arena up` (arena/up.py), a file named after this process's role once it can take
    a stop: the worker is ready and beat has its handlers by these signals."""
    folder, role = os.environ.get("ARENA_UP_READY_DIR"), os.environ.get("ARENA_ROLE")
    if folder and role:
        with contextlib.suppress(OSError):  # arena up then says the process never got ready
            open(os.path.join(folder, role), "a").close()


app = Celery("arena")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def crontab(**fields) -> _crontab:
    """A crontab read on the arena's clock (core.clock: accelerated in a rehearsal, the wall
    clock live), so beat sends Sunday's decisions when the arena's Sunday comes. Only the
    schedule uses it: countdowns and expiries stay on the wall clock the workers compare with."""
    return _crontab(nowfun=clock.now, **fields)


BEAT_SCHEDULE = {
    "sync-markets": {"task": "markets.tasks.sync_markets", "schedule": crontab(minute="*/15")},
    "resolve-markets": {"task": "markets.tasks.resolve_markets", "schedule": crontab(minute=7)},
    # Sunday 00:00 opens the week's cohort and 00:05 decides. Both also run as catch-ups (every
    # hour / every 15 minutes): they are idempotent and cheap when done, and a tick lost to a
    # broker or worker outage is made good by the next one instead of waiting a week.
    "open-cohort": {"task": "cohorts.tasks.open_cohort", "schedule": crontab(minute=0)},
    "decide": {"task": "cohorts.tasks.decide", "schedule": crontab(minute="5,20,35,50")},
    "snapshot": {"task": "cohorts.tasks.snapshot", "schedule": crontab(minute="*/10")},
    "score": {"task": "scoring.tasks.score", "schedule": crontab(minute=30)},
    "backfill-history": {
        "task": "cohorts.tasks.backfill_held_markets",
        "schedule": crontab(minute=25, hour=4),
    },
    "retention": {"task": "arena.tasks.retention", "schedule": crontab(minute=45, hour=3)},
    # The week's lineup review runs once a week (the week's row claims it); asked every hour so
    # a tick lost to an outage, or skipped on a busy rehearsal, is made good by the next one.
    "review-lineup": {"task": "agents.tasks.review_lineup", "schedule": crontab(minute=40)},
    # Worker liveness for /healthz, on the wall clock (it measures processes, not the arena);
    # expires so a backlog after an outage is not a burst of them.
    "heartbeat": {
        "task": "arena.tasks.heartbeat",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
}
app.conf.beat_schedule = BEAT_SCHEDULE
