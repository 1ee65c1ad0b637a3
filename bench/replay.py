"""Benchmark: every ForecastBench set replayed with the baselines, and `arena demo --weeks 12`.

    uv run python bench/replay.py                       # both, scratch SQLite databases
    uv run python bench/replay.py --skip-demo           # only the replay
    uv run python bench/replay.py --data ../shared/data/forecastbench --demo-weeks 12

Replay: all sets under ../shared/data/forecastbench (relative to the repo root) go through
`simulations.replay.replay` end to end (parse, markets, cohort, baseline decisions, the replay clock's
prices/resolutions/settlements/snapshots, scoring) on a throwaway SQLite database. Printed per
set: each baseline's Brier on its forecast sample and its return, plus the Brier of the freeze
values over *all* the set's resolved market questions for reference (the `market` baseline
only forecasts the universe's seeded sample of 20).

Demo: `arena demo --weeks 12` as a subprocess on its own scratch SQLite database, wall and CPU
time against the target (<= 60 s).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEMO_TARGET_S = 60.0
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "forecastbench"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(DEFAULT_DATA), help="ForecastBench dataset root")
    p.add_argument("--demo-weeks", type=int, default=12)
    p.add_argument("--skip-demo", action="store_true")
    p.add_argument("--skip-replay", action="store_true")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    var_dir = tempfile.mkdtemp(prefix="arena-bench-replay-")
    os.environ["ARENA_VAR_DIR"] = var_dir
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir}/replay.sqlite3"
    os.environ["DJANGO_SETTINGS_MODULE"] = "arena.settings"
    os.environ.pop("OPENROUTER_API_KEY", None)
    os.environ.pop("ARENA_LLM_API_KEY", None)
    if not args.skip_replay:
        bench_replay(Path(args.data))
    if not args.skip_demo:
        bench_demo(var_dir, args.demo_weeks)


def bench_replay(data: Path) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents.models import Competitor
    from agents.services import ensure_default_lineup
    from cohorts.doctor import check_invariants
    from cohorts.models import Cohort
    from scoring.models import LeaderboardRow
    from simulations.replay import replay

    ensure_default_lineup()
    baselines = list(Competitor.objects.filter(kind=Competitor.Kind.BASELINE, active=True))
    wall, cpu = time.perf_counter(), time.process_time()
    result = replay(str(data), competitors=baselines)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n_questions = sum(len(s.questions) for s in result.sets)
    n_resolved = sum(1 for s in result.sets for q in s.questions if q.outcome)
    print(
        f"replay: {len(result.sets)} sets, {n_questions} market questions "
        f"({n_resolved} resolved), {len(baselines)} baselines: {wall:.1f} s wall, {cpu:.1f} s CPU"
    )
    violations = check_invariants()
    print(
        f"doctor: {len(violations)} violations" + (f" e.g. {violations[0]}" if violations else "")
    )

    slugs = [b.slug for b in sorted(baselines, key=lambda b: b.slug)]
    rows = LeaderboardRow.objects.filter(run_id=result.score_run_id, cohort__isnull=False)
    by_cohort: dict[int, dict[str, LeaderboardRow]] = {}
    for row in rows.select_related("competitor"):
        by_cohort.setdefault(row.cohort_id, {})[row.competitor.slug] = row
    # n res: resolved market questions in the set (freeze BS is over all of them);
    # n smp: resolved ones in the forecast sample, which the baselines' Brier is over.
    header = f"{'set':<11} {'n res':>5} {'freeze BS':>9} {'n smp':>5} | " + " | ".join(
        f"{s[:14]:>14} BS / ret%" for s in slugs
    )
    print(header)
    for rs in result.sets:
        cohort = Cohort.objects.get(kind=Cohort.Kind.REPLAY, label=rs.label)
        pairs = [
            (float(q.freeze_value), 1.0 if q.outcome == "Yes" else 0.0)
            for q in rs.questions
            if q.outcome
        ]
        freeze_bs = sum((p - o) ** 2 for p, o in pairs) / len(pairs) if pairs else None
        cells = []
        for slug in slugs:
            row = by_cohort.get(cohort.pk, {}).get(slug)
            cells.append(
                f"{_fmt(row.brier if row else None, 4):>9} / {_fmt(row.return_pct if row else None, 2):>7}"
            )
        market = by_cohort.get(cohort.pk, {}).get("market")
        n_sample = market.n_resolved if market else 0
        print(
            f"{rs.due!s:<11} {len(pairs):>5} {_fmt(freeze_bs, 4):>9} {n_sample:>5} | "
            + " | ".join(cells)
        )
    overall = LeaderboardRow.objects.filter(run_id=result.score_run_id, cohort__isnull=True)
    print("all replay cohorts:")
    for row in overall.select_related("competitor").order_by("competitor__slug"):
        print(
            f"  {row.competitor.slug:<15} Brier {_fmt(row.brier, 4)} (n={row.n_resolved}), "
            f"return {_fmt(row.return_pct, 2)}%, P/L ${row.pnl}"
        )


def _fmt(value, places: int) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def bench_demo(var_dir: str, weeks: int) -> None:
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{var_dir}/demo.sqlite3")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "manage.py", "arena", "demo", "--weeks", str(weeks)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        print(f"demo FAILED ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
        return
    print(proc.stdout.strip())
    verdict = "OK" if wall <= DEMO_TARGET_S else "OVER TARGET"
    print(
        f"demo --weeks {weeks}: {wall:.1f} s wall, {cpu:.1f} s CPU "
        f"(target <= {DEMO_TARGET_S:.0f} s wall): {verdict}; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
