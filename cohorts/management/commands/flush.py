"""Django's `flush`, with the SQLite guard of the sealing tables lifted for its own statements.

On SQLite the sealing tables refuse DELETE of live rows (cohorts migration 0006) unless the
guard table says a wipe is running; `flush` empties every table on purpose (the test runner
between transactional tests, an operator starting over), so it sets the flag around the wipe.
PostgreSQL's flush is a TRUNCATE, which row triggers never see, so nothing changes there.
"""

from __future__ import annotations

from django.core.management.commands.flush import Command as DjangoFlush
from django.db import DEFAULT_DB_ALIAS, connections

GUARD = "arena_seal_guard"


class Command(DjangoFlush):
    def handle(self, **options):
        connection = connections[options.get("database") or DEFAULT_DB_ALIAS]
        if connection.vendor != "sqlite" or GUARD not in connection.introspection.table_names():
            return super().handle(**options)
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {GUARD} SET wiping = 1")
        try:
            return super().handle(**options)
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"UPDATE {GUARD} SET wiping = 0")
