"""Snapshot retention: 10-minute rows for recent days, one row per entry per hour before that.

The row kept for an hour is the last one in that hour, left at its own timestamp, so every
remaining point is still a true value at a true time: a chart drawn from fewer points shows the
same curve at coarser resolution, never a shifted or averaged one. The latest snapshot of each
entry (the final one after settlement included) is always kept.
"""

from datetime import datetime, timedelta

from cohorts.models import Snapshot
from core import clock

DEFAULT_KEEP_DAYS = 14


def rollup_snapshots(keep_days: int = DEFAULT_KEEP_DAYS, at=None) -> int:
    """Delete older 10-minute rows that are not the last of their entry-hour. Returns rows deleted.

    Works one entry at a time so memory stays bounded on millions of rows; it is a daily job.
    """
    at = at or clock.now()
    cutoff = (at - timedelta(days=keep_days)).replace(minute=0, second=0, microsecond=0)
    old = Snapshot.objects.filter(ts__lt=cutoff)
    deleted = 0
    for entry_id in old.values_list("entry_id", flat=True).distinct().order_by("entry_id"):
        rows = old.filter(entry_id=entry_id).order_by("ts").values_list("id", "ts")
        doomed: list[int] = []
        previous: tuple[int, datetime] | None = None
        for row in rows.iterator(chunk_size=5000):
            # Rows arrive in time order: the previous row dies if this one is in the same hour.
            if previous is not None and _hour(previous[1]) == _hour(row[1]):
                doomed.append(previous[0])
            previous = row
        for i in range(0, len(doomed), 5000):
            deleted += Snapshot.objects.filter(id__in=doomed[i : i + 5000]).delete()[0]
    return deleted


def _hour(ts: datetime) -> datetime:
    return ts.replace(minute=0, second=0, microsecond=0)


def retention_arguments(parser) -> None:
    parser.add_argument("--keep-days", type=int, default=DEFAULT_KEEP_DAYS)


def retention(cmd, options) -> None:
    if options["keep_days"] < 1:
        from django.core.management.base import CommandError

        raise CommandError("--keep-days must be at least 1")
    n = rollup_snapshots(options["keep_days"])
    cmd.stdout.write(
        f"rolled up snapshots older than {options['keep_days']} days: {n} rows removed"
    )
