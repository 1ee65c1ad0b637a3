"""The layering of docs/architecture.md holds: checked from the code's own imports, and the
model move it needed keeps the rows of a database made before it."""

import importlib.util
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

ROOT = Path(__file__).resolve().parent.parent


def _graph_module():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packages_form_layers_and_modules_have_no_cycle():
    graph = _graph_module()
    assert graph.problems() == []
    packages = graph.package_graph(graph.module_graph())
    assert packages["core"] == set()
    assert packages["markets"] <= {"core"}  # Polymarket only, on the ground primitives
    assert "simulations" not in set().union(*(packages[p] for p in packages if p != "arena"))


def test_the_checker_sees_a_breach(tmp_path, monkeypatch):
    """The check is not vacuous: a lower package importing a higher one is reported."""
    graph = _graph_module()
    breached = {"core": set(), "markets": {"cohorts"}, "cohorts": {"markets"}}
    assert graph.layer_breaches(breached) == ["markets imports cohorts, a higher floor"]
    assert graph.cycles(breached) == [["cohorts", "markets"]]


@pytest.mark.django_db(transaction=True)
def test_jobrun_rows_survive_the_move_to_core():
    executor = MigrationExecutor(connection)
    before = [("arena", "0001_initial"), ("core", None)]
    executor.migrate(before)
    old_state = executor.loader.project_state([("arena", "0001_initial")])
    OldJobRun = old_state.apps.get_model("arena", "JobRun")
    OldJobRun.objects.create(job="sync", status="ok", started_at="2026-11-01T00:00:00Z")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from core.models import JobRun

    assert list(JobRun.objects.values_list("job", "status")) == [("sync", "ok")]
