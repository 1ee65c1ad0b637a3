"""Build (once) the load-test database: the 2.4M-snapshot data set of bench/pages.py.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arena_bench_load uv run python bench/load_data.py
    ... --rebuild     drop the bench rows and build them again

Reuses bench/pages.py's builder (20 cohorts x 12 entries x 20 weeks of 10-minute snapshots,
COPY on PostgreSQL) so the page benchmark and the load test measure the same data. Prints the
URLs bench/load.sh should hit (one per line, `name url`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pages  # noqa: E402  (sets up Django with the bench's production-like settings)
from django.core.management import call_command  # noqa: E402

from cohorts.models import Cohort, Snapshot  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.rebuild or not pages.built():
        pages.wipe()
        pages.build()
    if args.rebuild or not pages.busy_built():
        pages.build_busy_market()  # the market page a busy real market has (bench/pages.py)
    cohorts = Cohort.objects.filter(label=pages.LABEL).order_by("week_start")
    oldest = cohorts.first()
    print(f"# {Snapshot.objects.count():,} snapshots", file=sys.stderr)
    print(f"cohort /cohorts/{oldest.pk}/")
    print(f"series /api/cohorts/{oldest.pk}/series?range=ALL")
    busy = pages.Market.objects.get(external_id=pages.BUSY)
    print(f"market /markets/{busy.pk}/")


if __name__ == "__main__":
    main()
