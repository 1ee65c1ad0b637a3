"""`arena rehearse --weeks N [--rate R] [--faults] [--workers K]`: run N weeks of the live path
on an accelerated clock with its own processes and stand-ins, then check and report
(simulations/rehearsal/run.py). Exits non-zero when any check fails."""

from __future__ import annotations

import argparse

from django.core.management.base import CommandError

from simulations.rehearsal import checks as rehearse_checks
from simulations.rehearsal.http import save_seals
from simulations.rehearsal.procs import RehearsalError
from simulations.rehearsal.run import DEFAULT_RATE, Options, Rehearsal


def _bounded(kind, low, high):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"not a number from {low} to {high}: {text!r}")
        return value

    return parse


def rehearse_arguments(parser) -> None:
    parser.add_argument(
        "--weeks", type=_bounded(int, 1, 52), default=2, help="arena weeks to run (default 2)"
    )
    parser.add_argument(
        "--rate",
        type=_bounded(float, 1, 100000),
        default=DEFAULT_RATE,
        help=f"arena seconds per wall second (default {DEFAULT_RATE:g}: one week "
        f"in about {7 * 86400 / DEFAULT_RATE:.0f} s)",
    )
    parser.add_argument(
        "--faults", action="store_true", help="inject the fault schedule (printed before the run)"
    )
    parser.add_argument(
        "--workers",
        type=_bounded(int, 1, 16),
        default=1,
        help="Celery worker processes (default 1)",
    )
    parser.add_argument(
        "--competitors",
        type=_bounded(int, 1, 200),
        default=8,
        help="competitors in the lineup (default 8)",
    )
    parser.add_argument(
        "--models",
        type=_bounded(int, 0, 200),
        default=3,
        help="of them, simulated models; the rest are baselines (default 3)",
    )
    parser.add_argument(
        "--markets",
        type=_bounded(int, 10, 2000),
        default=60,
        help="markets in the simulated world (default 60)",
    )
    parser.add_argument("--seed", type=_bounded(int, 0, 2**31), default=7)
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")  # fmt: skip


def rehearse(cmd, options) -> None:
    opts = Options(
        weeks=options["weeks"], rate=options["rate"], faults=options["faults"],
        workers=options["workers"], competitors=options["competitors"],
        models=options["models"], markets=options["markets"], seed=options["seed"],
    )  # fmt: skip
    try:
        rehearsal = Rehearsal(opts, out=cmd.stdout._out)
    except RehearsalError as exc:
        raise CommandError(str(exc)) from exc
    run = rehearsal.run
    try:
        try:
            rehearsal.execute()
        except RehearsalError as exc:
            raise CommandError(f"the rehearsal stopped: {exc}") from exc
        try:
            path = run.directory / "api-seals.json"
            roots = save_seals(run.base_url, path)
            run.seals_file = path
            cmd.stdout.write(f"saved /api/seals ({roots} week roots) to {path}")
        except Exception as exc:  # reported as a failed check, not a crash
            run.notes.append(f"could not save /api/seals: {exc}")
        rehearsal.note_unmet_faults()
        checks = rehearse_checks.all_checks(run)
    finally:
        rehearsal.finish()
    doc = rehearse_checks.report(run, checks, rehearse_checks.load_average())
    for line in rehearse_checks.text_report(doc):
        cmd.stdout.write(line)
    if options.get("json"):
        rehearse_checks.write_json(doc, options["json"])
        cmd.stdout.write(f"report written to {options['json']}")
    if not doc["ok"]:
        failed = [c["name"] for c in doc["checks"] if not c["ok"]]
        raise CommandError(f"rehearsal FAILED: {', '.join(failed)}")
