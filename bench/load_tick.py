"""Snapshot ticks against the load-test database while bench/load.sh measures the pages.

    uv run python bench/load_tick.py --seconds 45 [--interval 600] [--delay 15]

Runs what the 10-minute `snapshot` task does to the data — settle what lags, then one snapshot
row per entry of every running live cohort (cohorts.snapshots.take_snapshot: the real bulk upsert,
which also extends the chart series and replaces the values version) — first after --delay
seconds, then every --interval seconds (600 is production's cadence; 0 = back to back), each
tick in the next 10-minute bucket after the bench data ends, so every tick really writes. At the
end the rows it added are deleted and the series rewound to where they were (cohorts.series.write
recomputes from the first tick's time on), so the data set stays as bench/pages.py built it.
Prints "ready" once started, then ticks, rows and timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pages  # noqa: E402  (Django set up with the bench's production-like settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--interval", type=float, default=600.0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the first tick")
    args = parser.parse_args()
    ticker = pages.Ticker(settle=True)
    # A production tick runs in a long-lived worker: say when start-up (imports, first query) is
    # over, so the measurement covers ticks, not the interpreter starting.
    print("ready", flush=True)
    start = time.monotonic()
    deadline = start + args.seconds
    next_tick = start + args.delay
    try:
        while True:
            time.sleep(max(0.0, min(next_tick, deadline) - time.monotonic()))
            if time.monotonic() >= deadline:
                break
            ticker()
            next_tick += args.interval
    finally:
        ticker.close()  # the pages showed the ticks just removed: the values token moves
    durations = ticker.times
    if durations:
        print(
            f"snapshot ticks: {len(durations)} ({ticker.rows:,} rows) in {args.seconds:.0f} s, "
            f"first after {args.delay:g} s, then every {args.interval:g} s; per tick median "
            f"{statistics.median(durations):.0f} ms, max {max(durations):.0f} ms"
        )
    else:
        print("snapshot ticks: none (the run was shorter than the delay)")


if __name__ == "__main__":
    main()
