"""A standings table reads a row's methodology out of its details, never the whole JSON: the
same Methodology the whole details give, on either database."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from agents.models import Competitor
from scoring.models import LeaderboardRow, ScoreRun
from web.standings import row_methodology, table_rows

pytestmark = pytest.mark.django_db
AT = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "methodology",
    [{"version": "3", "hash": "abc", "cohort_versions": ["2", "3"]}, None],
)
def test_table_rows_give_the_methodology_the_whole_details_hold(methodology):
    run = ScoreRun.objects.create(
        scope="live", status="done", as_of=AT, started_at=AT, finished_at=AT,
        methodology_version="3", methodology_hash="0" * 64, engine_version="t",
        n_forecasts=1, n_resolved=1,
    )  # fmt: skip
    competitor = Competitor.objects.create(slug="tab-a", display_name="Tab A", kind="llm")
    details = {"calibration": [{"lo": 0, "hi": 0.1, "n": 3, "mean_p": 0.05, "freq": 0.0}]}
    if methodology is not None:
        details["methodology"] = methodology
    row = LeaderboardRow.objects.create(
        run=run, competitor=competitor, rank=1, n_forecasts=1, n_resolved=1,
        pnl=Decimal("0.00"), details=details,
    )  # fmt: skip

    shown = table_rows(LeaderboardRow.objects.filter(pk=row.pk)).get()

    assert "details" in shown.get_deferred_fields()
    whole = LeaderboardRow.objects.get(pk=row.pk).stored_details.methodology
    assert row_methodology(shown) == whole
    assert (whole is None) == (methodology is None)
