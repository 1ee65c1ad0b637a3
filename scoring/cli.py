"""`arena score`: recompute the leaderboards and print each scope's all-cohorts table."""

from __future__ import annotations

from django.core.management.base import CommandError

from cohorts.models import Cohort
from scoring.selectors import leaderboard_rows
from scoring.services import compute_scores
from scoring.tasks import scopes_with_cohorts


def score_arguments(parser) -> None:
    parser.add_argument(
        "--scope",
        choices=Cohort.Kind.values,
        action="append",
        help="score only this scope (repeatable; default: every scope that has cohorts)",
    )


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def score(cmd, options) -> None:
    scopes = options.get("scope") or scopes_with_cohorts()
    if not scopes:
        raise CommandError(
            "nothing to score: no cohorts yet (run `arena open-cohort` or `arena demo`)"
        )
    for scope in scopes:
        run = compute_scores(scope)
        assert run.finished_at is not None  # compute_scores returns a finished run
        seconds = (run.finished_at - run.started_at).total_seconds()
        cmd.stdout.write(
            f"{scope}: run {run.pk}, {run.n_forecasts} forecasts, {run.n_resolved} resolved, "
            f"{seconds:.1f}s, headline {run.details['headline']['by_cohort'].get('all', '-')}"
        )
        cmd.stdout.write(
            f"  {'#':>3} {'competitor':<28} {'n_res':>6} {'brier':>7} {'skill':>8} "
            f"{'return%':>8} {'pnl':>10} {'edge':<12} prov"
        )
        for row in leaderboard_rows(run):
            cmd.stdout.write(
                f"  {_fmt(row.rank, '>3')} {row.competitor.slug[:28]:<28} {row.n_resolved:>6} "
                f"{_fmt(row.brier, '>7.4f')} {_fmt(row.skill_vs_market, '>+8.4f')} "
                f"{_fmt(row.return_pct, '>+8.2f')} {row.pnl:>10} "
                f"{(row.details or {}).get('edge_label') or 'n/a':<12} "
                f"{'yes' if row.provisional else 'no'}"
            )
