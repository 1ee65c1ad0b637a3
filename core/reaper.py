"""Runs whose process died: marked failed instead of "running" for ever.

A run row (JobRun, ScoreRun) is created "running" and finished by the process that made it. A
process killed with SIGKILL (OOM killer, `kill -9`, a lost machine) finishes nothing, and its row
said "running" for ever. Each run row records its owner (host, pid and the process's start time,
so a reused pid is not mistaken for the owner); before a new run starts, rows still "running"
whose owner is gone (same host, process no longer there) or that are older than a generous age
limit (another host's run, which cannot be checked) are marked failed with the reason.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta

from django.db.models import QuerySet

from core import clock

log = logging.getLogger(__name__)


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), "" where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Field 22; the command name (field 2) may hold spaces, so split after its ')'.
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_token() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"[:120]


def owner_gone(owner: str) -> bool:
    """True when `owner` ran on this host and that process no longer exists."""
    parts = owner.split(":")
    if len(parts) < 3:
        return False
    host, pid_text, ticks = ":".join(parts[:-2]), parts[-2], parts[-1]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, someone else's
    return bool(ticks) and _start_ticks(pid) not in ("", ticks)  # the pid was reused


def reap(running: QuerySet, *, failed_status: str, max_age: timedelta, what: str) -> int:
    """Mark the rows of `running` (a queryset of running rows with `owner`, `started_at`,
    `status`, `finished_at` and `error`) whose process is gone, or older than max_age, failed."""
    now = clock.now()
    reaped = 0
    for pk, owner, started in running.values_list("pk", "owner", "started_at"):
        if owner_gone(owner or ""):
            why = f"abandoned: its process ({owner}) is gone"
        elif started < now - max_age:
            why = f"abandoned: still running after {max_age}"
        else:
            continue
        # Conditional on still running: a run finishing right now keeps its own result.
        reaped += running.filter(pk=pk).update(status=failed_status, finished_at=now, error=why)
        log.warning("%s %s", what, why, extra={"run": pk})
    return reaped
