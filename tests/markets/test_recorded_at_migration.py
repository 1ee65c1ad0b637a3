"""The data migration that dates each market's recorded resolution from the audit trail: the
latest ResolutionChange's changed_at, else (no audit row) the resolution time, else nothing."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("markets", "0004_rehearsal_scope")]
UPSTREAM = datetime(2026, 11, 2, 12, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_recorded_at_comes_from_the_latest_audit_row_else_the_resolution_time():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    market_model = old.get_model("markets", "Market")
    change_model = old.get_model("markets", "ResolutionChange")

    def market(n: int, **fields):
        return market_model.objects.create(
            external_id=f"m{n}", question=f"Q{n}?", outcomes=["Yes", "No"], **fields
        )

    def change(m, at: datetime, to_status: str, to_outcome: str = ""):
        change_model.objects.create(
            market=m, source="admin", changed_at=at, from_status="open", to_status=to_status,
            to_outcome=to_outcome, reason="test",
        )  # fmt: skip

    # Resolved upstream, recorded a day later, then corrected by staff three days after that.
    corrected = market(
        1, status="resolved", resolved_outcome="No", resolved_at=UPSTREAM + timedelta(days=4)
    )
    change(corrected, UPSTREAM + timedelta(days=1), "resolved", "Yes")
    change(corrected, UPSTREAM + timedelta(days=4), "resolved", "No")
    # The audit rows' insertion order is not their time order: the latest time wins.
    late_first = market(2, status="void", resolved_at=UPSTREAM)
    change(late_first, UPSTREAM + timedelta(hours=5), "void")
    change(late_first, UPSTREAM + timedelta(hours=1), "closed")
    untraced = market(3, status="resolved", resolved_outcome="Yes", resolved_at=UPSTREAM)
    reopened = market(4, status="open")
    change(reopened, UPSTREAM + timedelta(days=2), "open")
    never = market(5, status="open")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from markets.models import Market

    recorded = dict(Market.objects.values_list("external_id", "resolution_recorded_at"))
    assert recorded == {
        "m1": UPSTREAM + timedelta(days=4),
        "m2": UPSTREAM + timedelta(hours=5),
        "m3": UPSTREAM,
        "m4": UPSTREAM + timedelta(days=2),
        "m5": None,
    }
    # The resolution's own time is left as it was.
    assert Market.objects.get(pk=untraced.pk).resolved_at == UPSTREAM
    assert Market.objects.get(pk=never.pk).resolved_at is None
