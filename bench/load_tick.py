"""Snapshot ticks against the load-test database while bench/load.sh measures the pages.

    uv run python bench/load_tick.py --seconds 15 [--interval 1]

Runs what the 10-minute `snapshot` task does to the data — settle what lags, then one snapshot
row per entry of every running live cohort (cohorts.snapshots.take_snapshot, the real bulk
upsert) — one every --interval seconds (0 = back to back), each tick in the next 10-minute
bucket after the bench data ends, so every tick really writes (a repeat in one bucket would be a
cheap no-op). Once a second is 600 times production's rate: a worst case that still leaves the
CPU to the web server most of the time, as a real tick does. The rows it added are deleted at the
end, so the data set stays as bench/pages.py built it. Prints ticks, rows and timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pages  # noqa: E402  (Django set up with the bench's production-like settings)
from django.db.models import Max  # noqa: E402

from cohorts.models import Snapshot  # noqa: E402
from cohorts.settlement import settle_pending  # noqa: E402
from cohorts.snapshots import take_snapshot  # noqa: E402
from core.versions import data_changed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    data_end = Snapshot.objects.aggregate(end=Max("ts"))["end"]
    # A production tick runs in a long-lived worker: say when start-up (imports, first query) is
    # over, so the measurement covers ticks, not the interpreter starting.
    print("ready", flush=True)
    at = data_end
    durations, rows = [], 0
    deadline = time.monotonic() + args.seconds
    try:
        while time.monotonic() < deadline:
            at += timedelta(minutes=10)
            t = time.perf_counter()
            settle_pending(at)
            rows += take_snapshot(at)
            durations.append((time.perf_counter() - t) * 1000)
            time.sleep(max(0.0, args.interval - durations[-1] / 1000))
    finally:
        Snapshot.objects.filter(ts__gt=data_end).delete()
        data_changed()  # the pages showed the ticks just removed
    if durations:
        print(
            f"snapshot ticks: {len(durations)} ({rows:,} rows) in {args.seconds:.0f} s; "
            f"every {args.interval:g} s; per tick median {statistics.median(durations):.0f} ms, max {max(durations):.0f} ms"
        )
    assert pages  # imported for its Django setup


if __name__ == "__main__":
    main()
