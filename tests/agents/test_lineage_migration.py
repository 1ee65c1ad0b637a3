"""Upgrading a database with rows from before releases: every competitor gets release 1 from its
fields as they were, every entry and decision is attached to it, and from then on a used
release refuses an UPDATE in the database."""

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("agents", "0007_competitor_context_budget"), ("cohorts", "0008_rehearsal_scope")]


@pytest.mark.django_db(transaction=True)
def test_existing_entries_and_decisions_get_release_1_of_their_competitor():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Competitor = old.get_model("agents", "Competitor")
    model = Competitor.objects.create(
        slug="old-model", display_name="Old model", kind="llm", provider="openrouter",
        model_id="x/old", params={"temperature": 0}, base_url="http://127.0.0.1:9/v1",
        context_tokens=8192, price_in_per_m="1.25")  # fmt: skip
    idle = Competitor.objects.create(slug="idle", display_name="Idle", kind="baseline")
    cohort = old.get_model("cohorts", "Cohort").objects.create(week_start="2026-11-01T00:00:00Z")
    entry = old.get_model("cohorts", "Entry").objects.create(
        cohort=cohort, competitor=model, cash="10000.00")  # fmt: skip
    decision = old.get_model("cohorts", "Decision").objects.create(
        entry=entry, week=1, status="done", claimed_at="2026-11-01T00:05:00Z")  # fmt: skip

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from agents.models import Release
    from cohorts.models import Decision, Entry

    release = Release.objects.get(competitor_id=model.pk)
    assert (release.number, release.model_id, release.provider) == (1, "x/old", "openrouter")
    assert (release.base_url, release.params, release.context_tokens) == (
        "http://127.0.0.1:9/v1",
        {"temperature": 0},
        8192,
    )
    assert str(release.price_in_per_m) == "1.250000"
    assert Release.objects.get(competitor_id=idle.pk).number == 1
    assert Entry.objects.get(pk=entry.pk).release_id == release.pk
    assert Decision.objects.get(pk=decision.pk).release_id == release.pk
    # Release 1 stands for the competitor's fields as they are: no second release for them.
    assert Release.current(release.competitor) == release
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic():
        Release.objects.filter(pk=release.pk).update(model_id="x/rewritten")
    assert Release.objects.get(pk=release.pk).model_id == "x/old"
