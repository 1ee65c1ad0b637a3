"""`arena backup PATH` / `arena restore PATH`: consistent copies of the database.

SQLite: the sqlite3 online-backup API (a consistent copy while the app keeps running; WAL safe).
PostgreSQL: pg_dump in custom format, restored with pg_restore --clean --if-exists. Both refuse to
overwrite an existing backup file and restore only after an explicit --yes. A backup file is
created readable by its owner only (0600).
"""

import os
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connections


def _db():
    return settings.DATABASES["default"]


def backup_sqlite(src: Path, dest: Path) -> None:
    with sqlite3.connect(src) as source, sqlite3.connect(dest) as target:
        source.backup(target)


def restore_sqlite(backup: Path, target: Path) -> None:
    with sqlite3.connect(backup) as source, sqlite3.connect(target) as dest:
        source.backup(dest)


def _pg_env_and_args(db: dict) -> tuple[dict, list[str]]:
    env = dict(os.environ)
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]  # never on the command line, where ps shows it
    args = ["-h", db.get("HOST") or "127.0.0.1", "-p", str(db.get("PORT") or 5432)]
    if db.get("USER"):
        args += ["-U", db["USER"]]
    return env, args


def backup_postgres(db: dict, dest: Path) -> None:
    env, args = _pg_env_and_args(db)
    subprocess.run(["pg_dump", "-Fc", "-f", str(dest), *args, db["NAME"]], env=env, check=True)


def restore_postgres(db: dict, backup: Path) -> None:
    env, args = _pg_env_and_args(db)
    subprocess.run(
        [
            "pg_restore",
            "--clean",
            "--if-exists",
            "--no-owner",
            "-d",
            db["NAME"],
            *args,
            str(backup),
        ],
        env=env,
        check=True,
    )


def _create_private(dest: Path) -> None:
    """Create `dest` empty, readable by its owner only (a backup holds password hashes and
    session keys), refusing a name that exists: the exclusive create closes the window between
    a check and the write."""
    try:
        fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError as exc:
        raise CommandError(f"{dest} exists; choose a new file name") from exc
    except OSError as exc:
        raise CommandError(f"cannot create {dest}: {exc.strerror}") from exc
    os.close(fd)


def backup(cmd, options) -> None:
    dest = Path(options["path"])
    db = _db()
    if not db["ENGINE"].endswith(("sqlite3", "postgresql")):
        raise CommandError(f"backups are not supported for {db['ENGINE']}")
    _create_private(dest)
    try:
        # Both writers keep the file's mode: sqlite fills the empty file, pg_dump truncates it.
        if db["ENGINE"].endswith("sqlite3"):
            backup_sqlite(Path(db["NAME"]), dest)
        else:
            backup_postgres(db, dest)
    except BaseException:
        dest.unlink(missing_ok=True)  # no half-written backup left under a name that looks good
        raise
    cmd.stdout.write(f"backup written to {dest} ({dest.stat().st_size:,} bytes)")


def backup_arguments(parser) -> None:
    parser.add_argument("path", help="backup file to create")


def restore(cmd, options) -> None:
    src = Path(options["path"])
    if not src.exists():
        raise CommandError(f"{src} does not exist")
    if not options["yes"]:
        raise CommandError("restore replaces the current database; pass --yes to confirm")
    db = _db()
    connections.close_all()
    if db["ENGINE"].endswith("sqlite3"):
        restore_sqlite(src, Path(db["NAME"]))
    elif db["ENGINE"].endswith("postgresql"):
        restore_postgres(db, src)
    else:
        raise CommandError(f"restore is not supported for {db['ENGINE']}")
    cmd.stdout.write(f"restored {urlparse(settings.DATABASE_URL).scheme} database from {src}")


def restore_arguments(parser) -> None:
    parser.add_argument("path", help="backup file made by `arena backup`")
    parser.add_argument("--yes", action="store_true", help="confirm replacing the database")
