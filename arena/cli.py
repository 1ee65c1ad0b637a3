"""`arena` console script: the same as `python manage.py arena ...`."""

import os
import sys
from pathlib import Path


def main() -> None:
    run_command([sys.argv[0], "arena", *sys.argv[1:]])


def run_command(argv: list[str]) -> None:
    """Django's command line, with a settings error said in one line (it names the variable
    and the fix) instead of a traceback."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except ImproperlyConfigured as exc:
        if "--traceback" in argv:
            raise
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(1)


# Verbs that make or replace their database themselves (or use none): the rest need one that
# exists and is migrated.
MAKES_ITS_DATABASE = {"up", "demo", "replay-forecastbench", "restore", "simulated-llm", "standin"}


def database_problem() -> str | None:
    """Why the configured database cannot serve a verb (missing, unreachable, not migrated), in
    one line, or None. Creates nothing: SQLite would make an empty file on the first connect,
    so a missing file is reported before any connection is opened."""
    from django.conf import settings
    from django.db import connection

    db = settings.DATABASES["default"]
    name = str(db["NAME"])
    sqlite = db["ENGINE"].endswith("sqlite3")
    where = name if sqlite else f"{name} on {db.get('HOST') or 'localhost'}"
    if sqlite and not name.startswith(("file:", ":memory:")) and not Path(name).exists():
        return (
            f"no database at {name} (set DATABASE_URL to the arena's database, "
            "or create one with `manage.py migrate`)"
        )
    try:
        tables = connection.introspection.table_names()
    except Exception as exc:  # the drivers' errors carry hosts and more; the kind is enough
        return f"cannot open the database {where} ({type(exc).__name__})"
    if "django_migrations" not in tables:
        return (
            f"the database {where} has no arena tables (wrong DATABASE_URL? "
            "`manage.py migrate` creates them)"
        )
    return None
