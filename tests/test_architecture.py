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


def test_cohorts_is_three_rooms_and_its_rest_with_no_cycle():
    """The seals, the chart series and the decision run are sub-packages of cohorts, and the
    rooms of cohorts (those three and its root modules) never call each other back."""
    graph = _graph_module()
    subs = graph.sub_packages()
    assert {"cohorts.seals", "cohorts.series", "cohorts.decisions"} <= set(subs)
    assert not list((ROOT / "cohorts").glob("seal_*.py"))
    assert not list((ROOT / "cohorts").glob("series_*.py"))
    assert not list((ROOT / "cohorts").glob("decision_*.py"))
    rooms = graph.room_graph(graph.module_graph())
    assert graph.cycles(rooms) == []
    assert "cohorts.decisions" not in rooms["cohorts.seals"]  # the run seals, never the reverse
    assert rooms["cohorts.series"] <= {"cohorts.models"}


def test_the_checker_sees_two_rooms_calling_each_other_back(monkeypatch):
    graph = _graph_module()
    monkeypatch.setattr(graph, "sub_packages", lambda: ["cohorts.seals", "cohorts.decisions"])
    modules = {
        "cohorts.models": {"cohorts.seals.models"},
        "cohorts.seals.models": set(),
        "cohorts.seals.records": {"cohorts.models", "cohorts.decisions.calls"},
        "cohorts.decisions.calls": {"cohorts.models"},
        "cohorts.decisions.run": {"cohorts.seals.records"},
    }
    rooms = graph.room_graph(modules)
    assert rooms["cohorts.models"] == {"cohorts.seals.models"}  # models is a room of its own
    assert graph.cycles(rooms) == [["cohorts.decisions", "cohorts.seals"]]


def test_a_chart_is_read_one_way_through():
    """web/chart_reads.py reads, names, colours, shapes, annotates and encodes a chart; the
    modules it calls for each step never call back into it or into each other, and the shape
    (web/charts.py) reads nothing of the site."""
    modules = _graph_module().module_graph()
    steps = ["web.charts", "web.colours", "web.selectors", "cohorts.series.chart"]
    assert {"web.charts", "web.colours", "web.selectors"} <= modules["web.chart_reads"]
    for step in steps:
        assert not {s for s in modules[step] if s.startswith("web")} - {"web.shapes"}, step
    assert modules["cohorts.series.chart"] <= {
        "cohorts.models", "cohorts.series", "cohorts.series.grid", "cohorts.series.overview"
    }


def test_a_string_model_reference_counts_as_an_edge(tmp_path):
    """`ForeignKey("cohorts.Entry")` in agents ties agents to cohorts though nothing is imported."""
    import ast

    graph = _graph_module()
    tree = ast.parse(
        'from django.db import models\n'
        'class Decision(models.Model):\n'
        '    entry = models.ForeignKey("cohorts.Entry", on_delete=models.CASCADE)\n'
        '    market = models.OneToOneField(to="markets.Market", on_delete=models.CASCADE)\n'
    )
    assert graph._model_references(tree) == {"cohorts", "markets"}


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


@pytest.mark.django_db(transaction=True)
def test_decision_rows_survive_the_move_to_cohorts():
    """Decision, LLMCall and Forecast moved from agents to cohorts by state-only migrations: a
    database with rows from before the move keeps every row, reachable from the new models."""
    before = [("agents", "0005_alter_decision_cost_usd_alter_llmcall_cost_usd"),
              ("cohorts", "0004_backfill_chart_series")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    at = "2026-11-01T00:05:00Z"
    competitor = old.get_model("agents", "Competitor").objects.create(
        slug="old-model", display_name="Old model", kind="llm", model_id="x/y")
    cohort = old.get_model("cohorts", "Cohort").objects.create(week_start="2026-11-01T00:00:00Z")
    entry = old.get_model("cohorts", "Entry").objects.create(
        cohort=cohort, competitor=competitor, cash="10000.00")
    market = old.get_model("markets", "Market").objects.create(
        external_id="m1", question="Will it?", outcomes=["Yes", "No"])
    decision = old.get_model("agents", "Decision").objects.create(
        entry=entry, week=1, status="done", claimed_at=at, action="HOLD", reasoning="kept")
    old.get_model("agents", "LLMCall").objects.create(
        decision=decision, attempt=1, raw_response='{"action": "HOLD"}', started_at=at)
    old.get_model("agents", "Forecast").objects.create(
        decision=decision, entry=entry, market=market, outcome="Yes", probability=0.3,
        created_at=at)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from django.contrib.contenttypes.models import ContentType

    from cohorts.models import Decision, Forecast, LLMCall

    moved = Decision.objects.get(pk=decision.pk)
    assert (moved.entry_id, moved.reasoning) == (entry.pk, "kept")
    assert [c.raw_response for c in moved.llm_calls.all()] == ['{"action": "HOLD"}']
    assert Forecast.objects.get().decision_id == decision.pk
    assert LLMCall._meta.db_table == "agents_llmcall"
    assert ContentType.objects.get_for_model(Decision).app_label == "cohorts"
    assert not ContentType.objects.filter(app_label="agents", model="decision").exists()
