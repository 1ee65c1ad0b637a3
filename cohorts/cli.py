"""`arena open-cohort`, `arena snapshot`, `arena doctor` and `arena rebuild-series` (dispatched by
the arena command)."""

from __future__ import annotations

from datetime import date

from django.core.management.base import CommandError

from cohorts import doctor as doctor_checks
from cohorts import lineup, services, settlement, snapshots
from cohorts.models import Cohort
from cohorts.scope import live_path_kind
from cohorts.seals import sealing as seals
from cohorts.series import write as series
from core import clock


def open_cohort_arguments(parser) -> None:
    parser.add_argument(
        "--week", help="the Sunday the week starts, YYYY-MM-DD (default: this week)"
    )
    # Default: the live path's kind (rehearsal under ARENA_SCOPE=rehearsal, see cohorts.scope).
    parser.add_argument("--kind", default=None, choices=Cohort.Kind.values)
    parser.add_argument("--label", default="")


def _parse_week(raw: str | None) -> date | None:
    if raw is None:
        return None
    try:
        day = date.fromisoformat(raw)
    except ValueError as exc:
        raise CommandError(f"--week must be a date YYYY-MM-DD, got {raw!r}") from exc
    if day.weekday() != 6:
        raise CommandError(f"--week must be a Sunday; {day} is a {day:%A}")
    return day


def open_cohort(cmd, options) -> None:
    week = _parse_week(options.get("week"))
    try:
        cohort, created = services.open_cohort(
            week,
            kind=options.get("kind") or live_path_kind(),
            label=options.get("label") or "",
            refuse_empty=True,
        )
    except lineup.NoCompetitors as exc:
        raise CommandError(str(exc)) from exc
    verb = "opened" if created else "already open:"
    line = f"{verb} {cohort} (id {cohort.pk}) with {cohort.entries.count()} entries"
    waiting = list(lineup.entrants_waiting(cohort).values_list("slug", flat=True))
    if waiting:
        shown = ", ".join(waiting[:10]) + (
            f" and {len(waiting) - 10} more" if len(waiting) > 10 else ""
        )
        line += (
            f"; {len(waiting)} active competitor{'s' if len(waiting) != 1 else ''} without an "
            f"entry ({shown}) join the next week's cohort: entries are fixed when a cohort opens"
        )
    cmd.stdout.write(line)


def snapshot(cmd, options) -> None:
    at = clock.now()
    settled = settlement.settle_pending(at)
    written = snapshots.take_snapshot(at)
    moved = services.advance_cohorts(at)
    sealed = seals.upkeep(at)
    line = (
        f"snapshot {snapshots.bucket_for(at):%Y-%m-%d %H:%M}: {written} {live_path_kind()} "
        f"entr{'y' if written == 1 else 'ies'} marked; settled {settled['settled']} positions"
        f"{_reversed(settled)}; cohorts to tracking {moved['tracking']}, "
        f"completed {moved['completed']}; weeks sealed {sealed['sealed']}, "
        f"amended {sealed['amended']}"
    )
    simulated = Cohort.objects.exclude(kind=live_path_kind()).exclude(
        status=Cohort.Status.COMPLETED
    )
    if not written and simulated.exists():
        # Not an empty arena: replay and demo cohorts keep their own simulated clock. Their
        # runs mark them, and a staff correction snapshots the entries it changes at once.
        line += (
            f" ({simulated.count()} replay/demo cohorts run on their own simulated clock "
            "and are marked by their own runs)"
        )
    cmd.stdout.write(line)


def _reversed(settled: dict) -> str:
    n = settled.get("reversed") or 0
    return f", reversed {n}" if n else ""


def doctor(cmd, options) -> None:
    problems = doctor_checks.check_invariants()
    for problem in problems:
        cmd.stdout.write(problem)
    if problems:
        raise CommandError(f"{len(problems)} invariant violation(s)")
    cmd.stdout.write(f"ok: {len(doctor_checks.CHECKS)} invariant checks passed")


def rebuild_series(cmd, options) -> None:
    """Recompute every chart series from the snapshot table (they are kept up to date as
    snapshots are written; this is for data written around the services, e.g. a restore of an
    old dump or a manual SQL fix)."""
    n = series.rebuild_all()
    cmd.stdout.write(f"rebuilt the chart series of {n} entries")
