"""`arena demo` builds the same history whenever it runs: a fixed anchor in the past (not the
wall clock), and the simulated endpoint's answers, stated latencies and recorded URLs depend on
the prompt alone. Two builds in their own processes, on arena clocks an hour (and more) apart
and with different answer waits, publish byte-identical exports."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from core import clock
from simulations import demo_cli
from simulations.demo import DEFAULT_ANCHOR

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--weeks", "2", "--markets", "40"]
# Every row export (web/exports/specs.py), positions and universes included: the scoring
# specification's recomputation reads them too.
EXPORTS = ("scores", "decisions", "trades", "forecasts", "snapshots", "positions", "universes")


def test_the_default_demo_is_anchored_in_the_past_and_the_flag_moves_it():
    import argparse

    parser = argparse.ArgumentParser()
    demo_cli.demo_arguments(parser)
    assert parser.parse_args([]).anchor == DEFAULT_ANCHOR
    assert clock.wall() - timedelta(days=30) > DEFAULT_ANCHOR
    moved = parser.parse_args(["--anchor", "2026-05-06T09:30"]).anchor
    assert moved.isoformat() == "2026-05-06T09:30:00+00:00"  # read as UTC
    with pytest.raises(SystemExit):
        parser.parse_args(["--anchor", "next tuesday"])


def _build(var: Path, clock_env: dict[str, str], latency: str) -> dict[str, bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_CLOCK_", "DATABASE_"))}
    env.update(ARENA_VAR_DIR=str(var), CELERY_BROKER_URL="filesystem://", **clock_env)
    arena = [sys.executable, "manage.py", "arena"]
    out = subprocess.run(
        [*arena, "demo", *SMALL, "--latency-scale", latency],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"anchored at {DEFAULT_ANCHOR:%Y-%m-%d %H:%M} UTC" in out.stdout
    # Every export by `arena export`, in one process of their own (a process per export would
    # start Django fourteen times for nothing this test looks at).
    script = (
        "from django.core.management import call_command\n"
        f"for what in {list(EXPORTS)!r}:\n"
        f"    with open({str(var)!r} + '/' + what + '.csv', 'w', newline='') as out:\n"
        "        call_command('arena', 'export', '--what', what, '--scope', 'demo',"
        " '--limit', '100000', stdout=out)\n"
    )
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", script],
                          env=env, cwd=ROOT, capture_output=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return {what: (var / f"{what}.csv").read_bytes() for what in EXPORTS}


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_two_default_demos_an_hour_apart_publish_identical_exports(tmp_path):
    # The first build's clock of record stands at 03:00, the second's an hour later and then
    # running an hour per second: anything stored from "now" would differ between them.
    first = _build(tmp_path / "a", {"ARENA_CLOCK_START": "2031-05-04T03:00:00Z"}, "0")
    second = _build(
        tmp_path / "b",
        {
            "ARENA_CLOCK_START": "2031-05-04T04:00:00Z",
            "ARENA_CLOCK_RATE": "3600",
            "ARENA_CLOCK_ANCHOR": clock.wall().isoformat(),
        },
        "0.02",  # the simulated models really wait this time: the records must not show it
    )
    assert first["scores"].count(b"\n") > 10 and first["decisions"].count(b"\n") > 10
    for what in EXPORTS:
        assert first[what] == second[what], f"the {what} exports of two default demos differ"
