"""The `arena` console script as a person meets it: its name, its verb list, its failures."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from arena.management.commands.arena import VERBS

ARENA = Path(sys.executable).parent / "arena"


@pytest.fixture
def run_arena(tmp_path):
    env = dict(os.environ, ARENA_VAR_DIR=str(tmp_path))
    env.pop("DATABASE_URL", None)  # the verbs tried here fail before touching a database

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(ARENA), *args], env=env, capture_output=True, text=True, timeout=timeout
        )

    return run


def test_help_is_one_line_per_verb_under_the_program_name(run_arena):
    result = run_arena("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: arena [")
    assert "arena arena" not in result.stdout
    lines = result.stdout.splitlines()
    for verb, (_, _, description) in VERBS.items():
        line = next(line for line in lines if line.split()[:1] == [verb])
        assert description in line, line
    assert "--pythonpath" not in result.stdout  # Django's own options stay out of the way


def test_a_verb_help_and_errors_name_the_program(run_arena):
    assert run_arena("export", "--help").stdout.startswith("usage: arena export ")
    bad = run_arena("bogus")
    assert bad.returncode == 2
    assert "arena: error: argument VERB: invalid choice: 'bogus'" in bad.stderr
    assert "arena arena" not in bad.stderr
    failed = run_arena("export", "--what", "trades", "--since", "soon")
    assert failed.returncode == 1
    assert failed.stderr.strip() == "arena export: since must be a date YYYY-MM-DD, got 'soon'"


def test_no_verb_lists_the_verbs_and_fails(run_arena):
    result = run_arena()
    assert result.returncode == 2
    assert all(verb in result.stderr for verb in VERBS)


@pytest.mark.slow
def test_up_on_a_taken_port_fails_in_one_line_before_announcing(run_arena):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_arena("up", "--port", str(port))
    assert result.returncode == 1
    assert "arena is up" not in result.stdout
    assert result.stderr.strip() == (
        f"arena up: cannot serve on 127.0.0.1:{port}: Address already in use "
        "(stop what uses it, or pass --port N)"
    )


@pytest.mark.parametrize("verb", ["verify", "doctor", "decide", "snapshot", "backup"])
def test_a_verb_without_its_database_says_so_in_one_line_and_creates_nothing(
    run_arena, tmp_path, verb
):
    args = [verb, str(tmp_path / "copy.bak")] if verb == "backup" else [verb]
    result = run_arena(*args)
    database = tmp_path / "arena.sqlite3"
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"arena {verb}: no database at {database} (set DATABASE_URL to the arena's database, "
        "or create one with `manage.py migrate`)"
    )
    assert not database.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in {".sqlite3", ".bak"}) == []


def test_a_verb_on_an_unmigrated_database_names_it_instead_of_no_such_table(run_arena, tmp_path):
    import sqlite3

    empty = tmp_path / "arena.sqlite3"
    sqlite3.connect(empty).close()  # a database file with no tables (the wrong environment)
    result = run_arena("verify")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"arena verify: the database {empty} has no arena tables (wrong DATABASE_URL? "
        "`manage.py migrate` creates them)"
    )
    assert "no such table" not in result.stderr
