from datetime import UTC, datetime

import pytest

from tests.factories import make_cohort_with_entries, make_market


@pytest.fixture
def now():
    # A Wednesday: inside the week starting Sunday 2026-11-15.
    return datetime(2026, 11, 18, 12, 34, 56, tzinfo=UTC)


@pytest.fixture
def entry(db, now):
    _, entries = make_cohort_with_entries(1, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    return entries[0]


@pytest.fixture
def market(db):
    return make_market(prices={"Yes": "0.60", "No": "0.40"})
