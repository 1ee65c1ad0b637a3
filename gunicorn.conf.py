"""gunicorn's settings file, read from the working directory by every `gunicorn` started here
(`arena up`, the systemd unit, the compose service): its error and access logs in the arena's
one key=value format (arena/logfmt.py) instead of gunicorn's own."""

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
# One key=value line per request (h: remote address, U: path, q: query, s: status, B: bytes,
# M: milliseconds); the formatter quotes the whole message as msg="...".
access_log_format = "method=%(m)s path=%(U)s query=%(q)s status=%(s)s bytes=%(B)s duration_ms=%(M)s"
