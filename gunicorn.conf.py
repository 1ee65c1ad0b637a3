"""gunicorn's settings file, read from the working directory by every `gunicorn` started here
(`arena up`, the systemd unit, the compose service): its error and access logs in the arena's
one key=value format (arena/logfmt.py) instead of gunicorn's own."""

import gc
import os

from arena.logfmt import logging_dict

logconfig_dict = logging_dict(os.environ.get("LOG_LEVEL", "INFO"))
# Named, so dictConfig replaces the handlers gunicorn attached to them with its own format.
logconfig_dict["loggers"].update(
    {
        "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
    }
)
# One line per request; arena/logfmt.py writes its atoms as fields (client address, the
# proxy's X-Forwarded-For, method, path, query, status, bytes, milliseconds).
access_log_format = "method=%(m)s path=%(U)s query=%(q)s status=%(s)s bytes=%(B)s duration_ms=%(M)s"


def post_worker_init(worker):
    """Once the worker has loaded the site, move everything loaded so far (Django, the URL
    map, templates, models: over 100,000 objects) out of the garbage collector's sight. They
    live as long as the worker, and otherwise every full collection walks them all: a pause
    of about a hundred milliseconds that lands on whichever request is running."""
    gc.collect()
    gc.freeze()
