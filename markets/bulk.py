"""Multi-row INSERT ... ON CONFLICT in one statement, on SQLite and PostgreSQL alike.

Why not `bulk_create(update_conflicts=True)`: Django 5.2 assumes SQLite's historical limit of
999 parameters per statement, so a 100-market page (~45 columns) is split into five INSERTs
and the query count grows with the page size. It also cannot express the conditional updates
a sync needs ("keep the old price when the new one is garbage", "never overwrite a resolved
status"). Both databases accept the same `ON CONFLICT (...) DO UPDATE SET ... RETURNING`
syntax (SQLite >= 3.35).

Rows are plain dicts keyed by field attname (`market_id`, not `market`); missing keys get the
field's default. Values that need adapting (JSON, decimals, datetimes) are prepared by their
field exactly as Django would; plain strings, numbers and booleans go through as they are,
which keeps a 5,000-market sync from spending its time in per-value field machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models

from core import clock

# PostgreSQL's wire protocol allows 65,535 parameters per statement; SQLite's compiled-in
# limit is read from the connection (250,000 on modern builds, 32,766 at worst).
POSTGRES_MAX_PARAMS = 65_535
# Fields whose Python values the database drivers take as they are.
PASS_THROUGH = (
    models.CharField,
    models.TextField,
    models.BooleanField,
    models.IntegerField,
    models.ForeignKey,
)


def insert_rows(
    model: type[models.Model],
    rows: Sequence[Mapping[str, Any]],
    *,
    conflict: str = "",
    returning: Sequence[str] = (),
) -> list[tuple]:
    """INSERT the rows (every concrete column except an auto primary key) in as few statements
    as the database allows (one for any sane page), followed by `conflict` SQL verbatim.
    Returns the `returning` columns of every row written."""
    if not rows:
        return []
    # The connection itself, not the `django.db.connection` proxy, whose per-access lookup
    # would dominate a loop over hundreds of thousands of values.
    connection = connections[DEFAULT_DB_ALIAS]
    fields = [f for f in model._meta.concrete_fields if not isinstance(f, models.AutoField)]
    unknown = set(rows[0]) - {f.attname for f in fields}
    if unknown:
        raise TypeError(f"{model.__name__} has no fields {sorted(unknown)}")
    columns = [(f.attname, _default(f), _prep(f, connection)) for f in fields]

    qn = connection.ops.quote_name
    head = f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column or f.attname) for f in fields)}) VALUES "
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    tail = f" {conflict}" if conflict else ""
    if returning:
        tail += " RETURNING " + ", ".join(qn(c) for c in returning)
    rows_per_statement = max(1, _max_params(connection) // len(fields))
    out: list[tuple] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), rows_per_statement):
            chunk = rows[start : start + rows_per_statement]
            params = [
                prep(row[name]) if name in row else prep(default)
                for row in chunk
                for name, default, prep in columns
            ]
            cursor.execute(head + ", ".join([row_sql] * len(chunk)) + tail, params)
            if returning:
                out.extend(cursor.fetchall())
    return out


def _default(field: models.Field) -> Any:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return clock.now()
    return field.get_default()  # "" for a non-null text field, None for a nullable one


def _prep(field: models.Field, connection) -> Callable[[Any], Any]:
    if isinstance(field, PASS_THROUGH) and not isinstance(field, models.JSONField):
        return _same
    if isinstance(field, models.DateTimeField):
        # Most timestamps in a sync are the same `now`: adapt each distinct value once.
        memo: dict[Any, Any] = {}

        def prep_datetime(value: Any) -> Any:
            if value not in memo:
                memo[value] = field.get_db_prep_save(value, connection)
            return memo[value]

        return prep_datetime
    if isinstance(field, models.DecimalField):
        # A finite Decimal comes out of Django's preparation as an equal Decimal (both backends
        # hand it to their driver unchanged): 2.5 us a value the other way, 350,000 of them in
        # the default demo's snapshots.
        def prep_decimal(value: Any) -> Any:
            if type(value) is Decimal and value.is_finite():
                return value
            return field.get_db_prep_save(value, connection)

        return prep_decimal
    return lambda value: field.get_db_prep_save(value, connection)


def _same(value: Any) -> Any:
    return value


def _max_params(connection) -> int:
    if connection.vendor == "sqlite":
        import sqlite3

        connection.ensure_connection()
        return connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return POSTGRES_MAX_PARAMS
