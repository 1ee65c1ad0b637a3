"""One log format for web, worker, beat and the CLI: one line per record, key=value.

    ts=2026-11-22T00:05:03.120Z level=INFO role=worker logger=cohorts.decisions.run
    cohort=12 week=1 competitor=gpt-5 decision=481 status=skipped reason="no API key: ..."
    msg="decision finished"

Fields, in this order: ts (UTC, wall clock), level, role (web/worker/beat/cli), logger, the
work the line concerns (bound with core.logcontext, or passed as `extra=`), then msg, then a
traceback as exc. Values with spaces, quotes or `=` are double-quoted; newlines are escaped, so
a line is always one line, whatever text a model or an upstream error put in it. Used by
Django's LOGGING, by Celery (arena/celery.py keeps it from installing its own), and by gunicorn
(gunicorn.conf.py at the project root).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from datetime import UTC, datetime

from core.logcontext import current

# An outside agent's API token (agents/tokens.py), wherever a line would carry one (a query
# string in the access log, an error quoting a header): never written out.
TOKEN = re.compile(r"arena_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{8,}")

# Fields a record may carry as `extra=` (or bound in core.logcontext), in the order shown.
FIELDS = ("cohort", "week", "competitor", "decision", "market", "job", "status", "reason")


def role() -> str:
    """Which process this is, for the `role` field: ARENA_ROLE, else read from the command."""
    named = os.environ.get("ARENA_ROLE")
    if named:
        return named
    argv = " ".join(sys.argv[:4])
    if "gunicorn" in argv:
        return "web"
    for kind in ("worker", "beat"):
        if "celery" in argv and kind in sys.argv:
            return kind
    return "cli"


def quote(value: object) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\\\n\r\t'):
        return text
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


class KeyValueFormatter(logging.Formatter):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.role = role()

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC)
        pairs: list[tuple[str, object]] = [
            ("ts", ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"),
            ("level", record.levelname),
            ("role", self.role),
            ("logger", record.name),
        ]
        context = current()
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is None:
                value = context.get(key)
            if value is not None and value != "":
                pairs.append((key, value))
        pairs.append(("msg", record.getMessage()))
        if record.exc_info:
            pairs.append(("exc", self.formatException(record.exc_info)))
        elif record.stack_info:
            pairs.append(("stack", record.stack_info))
        line = " ".join(f"{key}={quote(value)}" for key, value in pairs)
        return TOKEN.sub("arena_[token redacted]", line)


def logging_dict(level: str) -> dict:
    """The dictConfig of every arena process (settings.LOGGING, gunicorn's logconfig_dict)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"kv": {"()": "arena.logfmt.KeyValueFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "kv"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "WARNING"}},
    }
