"""Backups are only real once a restore has been seen to bring the data back."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ARENA = str(Path(sys.executable).parent / "arena")


def _arena(env, *args, check=True):
    return subprocess.run([ARENA, *args], env=env, capture_output=True, text=True, check=check)


def _sql(env, query: str) -> str:
    code = (
        "import django, os; django.setup(); from django.db import connection\n"
        f"c = connection.cursor(); c.execute({query!r}); print(c.fetchone()[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.mark.slow
@pytest.mark.own_sqlite
def test_sqlite_backup_and_restore_round_trip(tmp_path):
    env = dict(
        os.environ,
        ARENA_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="arena.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'live.sqlite3'}",
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        env=env,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    _sql(
        env,
        "INSERT INTO arena_jobrun (job, status, started_at, summary, error) "
        "VALUES ('sync', 'ok', '2026-01-01', '{}', '') RETURNING id",
    )
    backup = tmp_path / "arena.bak"
    _arena(env, "backup", str(backup))
    assert backup.stat().st_size > 0
    # It holds password hashes: readable by its owner only, whatever the umask.
    assert backup.stat().st_mode & 0o777 == 0o600
    # A second backup to the same name is refused rather than overwritten.
    assert _arena(env, "backup", str(backup), check=False).returncode != 0

    _sql(env, "DELETE FROM arena_jobrun RETURNING 1")  # disaster strikes
    assert _sql(env, "SELECT COUNT(*) FROM arena_jobrun") == "0"
    assert _arena(env, "restore", str(backup), check=False).returncode != 0  # needs --yes
    _arena(env, "restore", str(backup), "--yes")
    assert _sql(env, "SELECT COUNT(*) FROM arena_jobrun WHERE job = 'sync'") == "1"


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_backup_and_restore_round_trip(tmp_path):
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    name = "arena_backup_roundtrip"
    admin = dict(os.environ)
    subprocess.run(
        ["psql", f"{base}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name}"],
        env=admin,
        check=True,
    )
    subprocess.run(
        ["psql", f"{base}/postgres", "-qc", f"CREATE DATABASE {name}"], env=admin, check=True
    )
    env = dict(
        os.environ,
        ARENA_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="arena.settings",
        DATABASE_URL=f"{base}/{name}",
    )
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"],
            env=env,
            check=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        _sql(
            env,
            "INSERT INTO arena_jobrun (job, status, started_at, summary, error) "
            "VALUES ('sync', 'ok', now(), '{}', '') RETURNING id",
        )
        backup = tmp_path / "arena.dump"
        _arena(env, "backup", str(backup))
        assert backup.stat().st_mode & 0o777 == 0o600
        _sql(env, "DELETE FROM arena_jobrun RETURNING 1")
        _arena(env, "restore", str(backup), "--yes")
        assert _sql(env, "SELECT COUNT(*) FROM arena_jobrun WHERE job = 'sync'") == "1"
    finally:
        subprocess.run(
            ["psql", f"{base}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
            env=admin,
            check=False,
        )
