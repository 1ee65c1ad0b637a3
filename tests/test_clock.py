"""One clock of record: every "now" goes through core.clock, so a scope running on its own time
(replay, demo, rehearsal) stamps its rows with that time, and nothing reads the wall clock
behind it."""

import ast
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import clock
from core.jobs import job_run
from core.models import JobRun

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["core", "markets", "agents", "cohorts", "scoring", "simulations", "web", "arena"]
WALL_READS = {("timezone", "now"), ("datetime", "now"), ("datetime", "utcnow"), ("date", "today")}
AT = datetime(2024, 3, 3, 0, 5, tzinfo=UTC)


def _wall_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (node.func.value.id, node.func.attr) in WALL_READS
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_nothing_reads_the_wall_clock_outside_the_clock_of_record():
    files = [
        f
        for pkg in PACKAGES
        for f in (ROOT / pkg).rglob("*.py")
        if "migrations" not in f.parts and f != ROOT / "core/clock.py"
    ]
    assert len(files) > 100
    assert [hit for f in files for hit in _wall_reads(f)] == []


def test_the_check_sees_a_wall_clock_read(tmp_path):
    sneaky = ROOT / "core" / "_tmp_sneaky_clock.py"
    try:
        sneaky.write_text("from django.utils import timezone\nx = timezone.now()\n")
        assert _wall_reads(sneaky) == ["core/_tmp_sneaky_clock.py:2"]
    finally:
        sneaky.unlink()


@pytest.mark.django_db
def test_services_stamp_rows_with_the_running_clock():
    simulated = clock.SimulatedClock(AT)
    with clock.running_on(simulated), job_run("rehearsal"):
        simulated.set(AT + timedelta(minutes=10))
    run = JobRun.objects.get(job="rehearsal")
    assert (run.started_at, run.finished_at) == (AT, AT + timedelta(minutes=10))
    # Outside the block the arena is back on the wall clock.
    assert abs(clock.now() - datetime.now(UTC)) < timedelta(seconds=5)


def test_a_simulated_clock_never_goes_back_and_never_leaks_to_another_thread():
    simulated = clock.SimulatedClock(AT)
    with pytest.raises(ValueError):
        simulated.set(AT - timedelta(seconds=1))
    with pytest.raises(ValueError):
        clock.SimulatedClock(datetime(2024, 3, 3))
    seen = []
    with clock.running_on(simulated):
        assert clock.now() == AT
        worker = threading.Thread(target=lambda: seen.append(clock.now()))
        worker.start()
        worker.join()
    assert seen[0] > AT + timedelta(days=365)
