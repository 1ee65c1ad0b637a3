"""`arena demo [--weeks N] [--seed S] [--markets M] [--anchor WHEN] [--latency-scale X]
[--reset]`: the offline synthetic history, with baselines and simulated model competitors, up to
a fixed anchor (so the same options build the same history on any machine, at any time)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from core.progress import Progress
from simulations.demo import (
    DEFAULT_ANCHOR,
    DEFAULT_LATENCY_SCALE,
    DEFAULT_MARKETS,
    DEFAULT_SEED,
    DEFAULT_WEEKS,
    DemoError,
    run_demo,
)
from simulations.simllm_cli import latency_scale


def anchor(raw: str) -> datetime:
    """An ISO date or instant, read as UTC when it names no zone."""
    try:
        at = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--anchor must be a date or time like 2026-03-11 or 2026-03-11T12:00, got {raw!r}"
        ) from exc
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def demo_arguments(parser) -> None:
    parser.add_argument("--weeks", type=int, default=DEFAULT_WEEKS, help="weekly demo cohorts")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument(
        "--markets", type=int, default=DEFAULT_MARKETS, help="number of synthetic markets"
    )
    parser.add_argument(
        "--anchor",
        type=anchor,
        default=DEFAULT_ANCHOR,
        metavar="WHEN",
        help="where the demo's clock stops, in UTC (default "
        f"{DEFAULT_ANCHOR:%Y-%m-%dT%H:%M}, fixed so every build is the same history)",
    )
    parser.add_argument(
        "--latency-scale",
        type=latency_scale,
        default=DEFAULT_LATENCY_SCALE,
        metavar="X",
        help="simulated models' answer time as a fraction of a realistic one "
        f"(default {DEFAULT_LATENCY_SCALE}; 1 = real time, 0 = no waiting)",
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        help="delete the existing demo data (demo markets, cohorts, scores only) and rebuild",
    )


@contextmanager
def _without_query_log() -> Iterator[None]:
    """Run without DEBUG's query log (connection.queries), which is kept for a request's debug
    page: a batch of tens of thousands of statements would only pay for it, on SQLite with an
    extra query per logged statement to quote its parameters. The statements run the same."""
    connection = connections[DEFAULT_DB_ALIAS]
    connection.make_debug_cursor = connection.make_cursor  # type: ignore[method-assign]
    try:
        yield
    finally:
        del connection.make_debug_cursor


def demo(cmd, options) -> None:
    started = time.monotonic()
    # `arena demo` is the first command on a fresh offline install, before `arena up`.
    call_command("migrate", interactive=False, verbosity=0)
    try:
        with _without_query_log():
            report = run_demo(
                weeks=options["weeks"],
                seed=options["seed"],
                n_markets=options["markets"],
                reset=options["reset"],
                now=options["anchor"],
                latency_scale=options["latency_scale"],
                progress_factory=lambda total: Progress(total, "demo"),
            )
    except DemoError as exc:
        raise CommandError(str(exc)) from exc
    plan = report.plan
    cmd.stdout.write(
        f"demo (seed {plan.seed}): {len(plan.markets)} synthetic markets, {plan.weeks} weekly "
        f"cohorts from {plan.start:%Y-%m-%d}, anchored at {options['anchor']:%Y-%m-%d %H:%M} UTC "
        f"(clock at {report.end:%Y-%m-%d %H:%M} UTC); this run: "
        f"{report.ticks} ticks, {report.cohorts} cohorts opened, {report.decisions} decisions "
        f"({report.model_calls} calls to the simulated model endpoint), "
        f"{report.resolved} markets resolved, {report.snapshots} snapshot rows, "
        f"score run {report.score_run_id} ({time.monotonic() - started:.1f}s)"
    )
    cmd.stdout.write(
        "labelled as demo data everywhere (source 'demo', kind 'demo'), the simulated models as "
        "'simulated' (no real model was called, nothing billed); remove with --reset"
    )
