"""The data migration that strips bidi controls from market text stored before ingest did."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@pytest.mark.django_db(transaction=True)
def test_stored_market_text_loses_its_bidi_controls_and_outcomes_are_kept():
    before = [("markets", "0002_resolution_change_on_clock")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    market_model = executor.loader.project_state(before).apps.get_model("markets", "Market")
    spoofed = market_model.objects.create(
        external_id="1",
        question="Will \u202eseY\u202c win?",
        description="Rules\u2067 here",
        outcomes=["\u202eseY", "No"],
    )
    plain = market_model.objects.create(external_id="2", question="Plain?", outcomes=["Yes", "No"])

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from markets.models import Market

    cleaned = Market.objects.get(pk=spoofed.pk)
    assert (cleaned.question, cleaned.description) == ("Will seY win?", "Rules here")
    assert cleaned.outcomes == ["\u202eseY", "No"]  # referred to by name elsewhere
    assert Market.objects.get(pk=plain.pk).question == "Plain?"
