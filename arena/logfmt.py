"""One log format for web, worker, beat and the CLI: one line per record, key=value.

    ts=2026-11-22T00:05:03.120Z level=INFO role=worker logger=cohorts.decisions.run
    cohort=12 week=1 competitor=gpt-5 decision=481 status=skipped reason="no API key: ..."
    msg="decision finished"

Fields, in this order: ts (UTC, wall clock), level, role (web/worker/beat/cli), logger, the
work the line concerns (bound with core.logcontext, or passed as `extra=`: the Celery task id, the
worker, cohort, week, competitor, decision, ...), then msg, then a traceback as exc. Celery's own
task lines carry the task id as `task=` (and a decision task its entry and week), so one grep
for a task id follows a decision through its worker; gunicorn's access lines are fields too
(client address, what the proxy forwarded, method, path, status, bytes, duration). Values with spaces, quotes or `=` are double-quoted; newlines are escaped, so
a line is always one line, whatever text a model or an upstream error put in it. Used by
Django's LOGGING, by Celery (arena/celery.py keeps it from installing its own), and by gunicorn
(gunicorn.conf.py at the project root).
"""

from __future__ import annotations

import ast
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
FIELDS = (
    "task",
    "worker",
    "cohort",
    "entry",
    "week",
    "competitor",
    "decision",
    "seal",
    "market",
    "external_id",
    "job",
    "run",
    "status",
    "reason",
    "old_worker",
    "new_worker",
    "lost_calls",
)


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
        context = {**current(), **_celery_task(record)}
        access = _access(record)
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is None:
                value = context.get(key)
            if value is not None and value != "":
                pairs.append((key, value))
        pairs += access
        pairs.append(("msg", "request" if access else record.getMessage()))
        if record.exc_info:
            pairs.append(("exc", self.formatException(record.exc_info)))
        elif record.stack_info:
            pairs.append(("stack", record.stack_info))
        line = " ".join(f"{key}={quote(value)}" for key, value in pairs)
        return TOKEN.sub("arena_[token redacted]", line)


def _celery_task(record: logging.LogRecord) -> dict[str, object]:
    """Celery's own task lines (received, succeeded, retry, failed) as fields: the task id, and
    for a decision the entry and week it decides, so they join the decision's lines (which
    carry the task id, cohorts/decisions/tasks.py)."""
    data = getattr(record, "data", None)
    if not isinstance(data, dict) or not data.get("id"):
        return {}
    fields: dict[str, object] = {"task": data["id"]}
    if data.get("name") == "cohorts.tasks.run_decision":
        args = _literal(data.get("args"))
        if isinstance(args, list | tuple) and len(args) >= 2:
            fields.update(entry=args[0], week=args[1])
    return fields


def _literal(value: object) -> object:
    """Celery gives a task's arguments as their repr; ours are plain literals."""
    if not isinstance(value, str) or len(value) > 500:
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


# gunicorn's access atoms, as fields: the client's address (and what the proxy says it was),
# the request and its outcome.
ACCESS_FIELDS = (
    ("client", "h"),
    ("forwarded_for", "{x-forwarded-for}i"),
    ("method", "m"),
    ("path", "U"),
    ("query", "q"),
    ("status", "s"),
    ("bytes", "B"),
    ("duration_ms", "M"),
    # The page cache's answer (hit, stale, miss; none for what it does not cache): how many
    # visitors of a page paid its render is a grep away.
    ("cache", "{x-cache}o"),
)


def _access(record: logging.LogRecord) -> list[tuple[str, object]]:
    if record.name != "gunicorn.access" or not isinstance(record.args, dict):
        return []
    atoms = record.args
    out = []
    for name, atom in ACCESS_FIELDS:
        try:
            value = atoms[atom]  # gunicorn's atoms answer "-" for what the request lacks
        except KeyError:
            continue
        if value not in (None, "", "-"):
            out.append((name, value))
    return out


def logging_dict(level: str) -> dict:
    """The dictConfig of every arena process (settings.LOGGING, gunicorn's logconfig_dict)."""
    logging.captureWarnings(True)
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"kv": {"()": "arena.logfmt.KeyValueFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "kv"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.db.backends": {"level": "WARNING"},
            # Django's own handler for its loggers prints bare messages under DEBUG
            # ("Service Unavailable: /healthz"); ours only.
            "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # Python warnings (Celery's about running as root) as lines of the format.
            "py.warnings": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        },
    }
