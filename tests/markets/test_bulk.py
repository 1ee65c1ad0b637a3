"""markets.bulk.insert_rows stores what the ORM would store, whatever form a value comes in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from cohorts.models import Snapshot
from markets.bulk import insert_rows
from tests.factories import make_cohort_with_entries

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 1, tzinfo=UTC)
MONEY = ("cash", "positions_value", "total", "realized_pnl", "unrealized_pnl")


def _row(entry_id: int, n: int, value) -> dict:
    return {
        "entry_id": entry_id,
        "ts": AT + timedelta(minutes=10 * n),
        **dict.fromkeys(MONEY, value),
    }


@pytest.mark.parametrize(
    "value",
    [Decimal("1234.56"), Decimal("-0.01"), Decimal("1E+3"), "98.70", 12, 0.1],
    ids=["decimal", "negative", "exponent", "text", "int", "float"],
)
def test_a_money_value_is_stored_as_the_orm_stores_it(value):
    _, (bulk, orm) = make_cohort_with_entries(2)
    insert_rows(Snapshot, [_row(bulk.pk, 0, value)])
    Snapshot.objects.create(**_row(orm.pk, 0, value))
    got = Snapshot.objects.get(entry=bulk)
    want = Snapshot.objects.get(entry=orm)
    for name in MONEY:
        assert getattr(got, name) == getattr(want, name)
        assert isinstance(getattr(got, name), Decimal)


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("Infinity"), "not money"])
def test_a_value_the_orm_refuses_is_refused_and_nothing_is_written(value):
    _, (entry, *_) = make_cohort_with_entries(1)
    with pytest.raises(ValidationError):
        insert_rows(Snapshot, [_row(entry.pk, 0, Decimal("1.00")), _row(entry.pk, 1, value)])
    assert not Snapshot.objects.filter(entry=entry).exists()
