"""Multi-row INSERT ... ON CONFLICT in one statement, on SQLite and PostgreSQL alike.

Why not `bulk_create(update_conflicts=True)`: Django 5.2 assumes SQLite's historical limit of
999 parameters per statement, so a 100-market page (~40 columns) is split into five INSERTs
and the query count grows with the page size. It also cannot express the conditional updates
a sync needs ("keep the old price when the new one is garbage", "never overwrite a resolved
status"). Both databases accept the same `ON CONFLICT (...) DO UPDATE SET ... RETURNING`
syntax (SQLite >= 3.35), and values are prepared by each field exactly as Django would.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models

# PostgreSQL's wire protocol allows 65,535 parameters per statement; SQLite's compiled-in
# limit is read from the connection (250,000 on modern builds, 32,766 at worst).
POSTGRES_MAX_PARAMS = 65_535


def insert_rows(
    model: type[models.Model],
    objs: Sequence[models.Model],
    *,
    conflict: str = "",
    returning: Sequence[str] = (),
) -> list[tuple]:
    """INSERT every obj's concrete columns (except an auto primary key) in as few statements as
    the database allows (one for any sane page), followed by `conflict` SQL verbatim.
    Returns the `returning` columns of every row written."""
    if not objs:
        return []
    fields = [f for f in model._meta.concrete_fields if not isinstance(f, models.AutoField)]
    qn = connection.ops.quote_name
    columns = ", ".join(qn(f.column) for f in fields)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    tail = f" {conflict}" if conflict else ""
    if returning:
        tail += " RETURNING " + ", ".join(qn(c) for c in returning)
    rows_per_statement = max(1, _max_params() // len(fields))
    out: list[tuple] = []
    with connection.cursor() as cursor:
        for start in range(0, len(objs), rows_per_statement):
            chunk = objs[start : start + rows_per_statement]
            params = [
                f.get_db_prep_save(getattr(obj, f.attname), connection)
                for obj in chunk
                for f in fields
            ]
            sql = (
                f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES "
                + ", ".join([row_sql] * len(chunk))
                + tail
            )
            cursor.execute(sql, params)
            if returning:
                out.extend(cursor.fetchall())
    return out


def _max_params() -> int:
    if connection.vendor == "sqlite":
        import sqlite3

        connection.ensure_connection()
        return connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return POSTGRES_MAX_PARAMS
