"""`arena replay-forecastbench PATH_OR_URL [--due YYYY-MM-DD ...] [--simulated]`: ForecastBench
replay cohorts, answered by the active lineup or (--simulated) by the simulated models."""

from __future__ import annotations

import argparse
from datetime import date

from django.core.management import call_command
from django.core.management.base import CommandError

from core.progress import Notes, Progress
from simulations.replay import PUBLIC_BASE_URL, ReplayError, replay
from simulations.simllm import SIMULATION_LATENCY_SCALE
from simulations.simllm_cli import latency_scale


def _due(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {text!r}") from exc


def replay_forecastbench_arguments(parser) -> None:
    parser.add_argument(
        "location",
        metavar="PATH_OR_URL",
        help=(
            "a question-set file, a directory of sets (question_sets/ + resolution_sets/), or an "
            f"http(s) URL to a question-set file or the dataset root, e.g. {PUBLIC_BASE_URL}"
        ),
    )
    parser.add_argument(
        "--due",
        type=_due,
        action="append",
        default=[],
        metavar="YYYY-MM-DD",
        help="only the set due that day (repeatable); a root URL without --due reads latest-llm.json",
    )
    parser.add_argument(
        "--simulated",
        action="store_true",
        help="the simulated models answer (with the baselines) instead of the real ones, offline, "
        "in cohorts of their own labelled 'simulated models'",
    )
    parser.add_argument(
        "--latency-scale",
        type=latency_scale,
        default=SIMULATION_LATENCY_SCALE,
        metavar="X",
        help="with --simulated: answer time as a fraction of a realistic one "
        f"(default {SIMULATION_LATENCY_SCALE}; 1 = real time, 0 = at once)",
    )


def replay_forecastbench(cmd, options) -> None:
    from agents.services import ensure_default_lineup

    # May be the first command on a fresh install, like `arena demo`.
    call_command("migrate", interactive=False, verbosity=0)
    # A fresh database has no competitors yet; `arena up` would create the same lineup.
    ensure_default_lineup()
    try:
        result = replay(
            options["location"],
            options["due"],
            progress_factory=lambda total: Progress(total, "replay"),
            simulated=options["simulated"],
            latency_scale=options["latency_scale"],
        )
    except ReplayError as exc:
        raise CommandError(str(exc)) from exc
    notes = Notes(unit="sets")
    for rs, report in zip(result.sets, result.reports):
        skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(report.skipped.items()))
        decisions = ", ".join(f"{n} {s}" for s, n in sorted(report.decisions.items())) or "none"
        cmd.stdout.write(
            f"{rs.label}: cohort {report.cohort_id} ({'new' if report.created else 'existing'}), "
            f"{report.markets} markets, {report.resolved} resolved now, {report.steps} clock steps, "
            f"decisions: {decisions}" + ("" if rs.has_resolution_set else "; no resolution set yet")
        )
        if not rs.has_resolution_set:
            notes.add("no resolution set published yet: positions stay open")
        if report.decisions.get("skipped"):
            notes.add(
                "skipped decisions are LLM entries without an API key (set OPENROUTER_API_KEY "
                "to include them, or replay other sets with --simulated to see simulated models)"
            )
        if report.held:
            cmd.stdout.write(
                f"  {report.held} clock steps dated after today (up to "
                f"{report.held_until:%Y-%m-%d}) held back: rerun the import on or after that date"
            )
        if rs.has_resolution_set and rs.without_resolution:
            cmd.stdout.write(f"  {rs.without_resolution} questions have no resolution row")
        if skipped:
            cmd.stdout.write(f"  skipped rows: {skipped}")
            for name, reason in rs.skipped[:10]:
                cmd.stdout.write(f"    {name}: {reason}")
        for warning in rs.warnings[:10]:
            cmd.stdout.write(f"  warning: {warning}")
        if len(rs.warnings) > 10:
            cmd.stdout.write(f"  ... and {len(rs.warnings) - 10} more warnings")
    for line in notes.lines():
        cmd.stdout.write(line)
    if result.score_run_id:
        cmd.stdout.write(f"scored the replay scope (score run {result.score_run_id})")
