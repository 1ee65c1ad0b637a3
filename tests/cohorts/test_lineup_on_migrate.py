"""A new database gets the default lineup from `manage.py migrate` alone (the documented deploy
and compose's migrate service run nothing else), and `open-cohort` never opens an empty week."""

import os
import sqlite3
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.models import Competitor
from agents.services import DEFAULT_LINEUP
from cohorts.lineup import seed_lineup_after_migrate
from cohorts.models import Cohort
from cohorts.services import open_cohort
from tests.factories import make_competitor

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.own_sqlite
def test_migrate_alone_seeds_the_default_lineup_once(tmp_path):
    database = tmp_path / "fresh.sqlite3"
    env = dict(os.environ, ARENA_VAR_DIR=str(tmp_path), DATABASE_URL=f"sqlite:///{database}",
               ARENA_LINEUP_ON_MIGRATE="1")  # fmt: skip

    def migrate() -> str:
        return subprocess.run([sys.executable, "manage.py", "migrate"], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True).stdout  # fmt: skip

    def slugs() -> list[str]:
        with sqlite3.connect(database) as db:
            return sorted(r[0] for r in db.execute("SELECT slug FROM agents_competitor"))

    first = migrate()
    assert f"Created the default lineup ({len(DEFAULT_LINEUP)} competitors)" in first
    assert slugs() == sorted(spec["slug"] for spec in DEFAULT_LINEUP)
    assert "Created the default lineup" not in migrate()  # run again: nothing doubled
    assert len(slugs()) == len(DEFAULT_LINEUP)


@pytest.mark.django_db
def test_the_seed_rule_respects_what_staff_did(monkeypatch):
    monkeypatch.setenv("ARENA_LINEUP_ON_MIGRATE", "1")
    assert seed_lineup_after_migrate() == len(DEFAULT_LINEUP)
    assert seed_lineup_after_migrate() == 0  # idempotent

    Competitor.objects.filter(slug=DEFAULT_LINEUP[0]["slug"]).delete()
    assert seed_lineup_after_migrate() == 0  # one deleted by staff stays deleted

    open_cohort(competitors=[])  # a week has run (entries aside, so staff may delete them all)
    Competitor.objects.all().delete()
    # An arena that has run a week: its lineup is staff's, even when they removed everyone.
    assert seed_lineup_after_migrate() == 0
    assert not Competitor.objects.exists()

    monkeypatch.setenv("ARENA_LINEUP_ON_MIGRATE", "0")
    Cohort.objects.all().delete()
    assert seed_lineup_after_migrate() == 0  # turned off


@pytest.mark.django_db
def test_open_cohort_refuses_a_week_without_an_active_competitor():
    make_competitor(slug="retired", active=False)
    with pytest.raises(CommandError, match=r"^no active competitor: not opening the 2026-11-15 "
                       r"cohort with 0 entries \("):  # fmt: skip
        call_command("arena", "open-cohort", "--week", "2026-11-15", stdout=StringIO())
    assert not Cohort.objects.exists()


@pytest.mark.own_sqlite
def test_the_arena_verb_exits_non_zero_in_one_line_without_competitors(tmp_path):
    env = dict(os.environ, ARENA_VAR_DIR=str(tmp_path), ARENA_LINEUP_ON_MIGRATE="0",
               DATABASE_URL=f"sqlite:///{tmp_path / 'arena.sqlite3'}")  # fmt: skip
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    arena = Path(sys.executable).parent / "arena"
    result = subprocess.run([str(arena), "open-cohort", "--week", "2026-11-15"], env=env,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith("arena open-cohort: no active competitor: not opening")
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


@pytest.mark.django_db
def test_competitors_added_after_the_week_opened_are_told_they_join_the_next_one():
    make_competitor(slug="early")
    out = StringIO()
    call_command("arena", "open-cohort", "--week", "2026-11-15", stdout=out)
    assert out.getvalue().strip().endswith("with 1 entries")

    make_competitor(slug="late")
    make_competitor(slug="later")
    out = StringIO()
    call_command("arena", "open-cohort", "--week", "2026-11-15", stdout=out)
    assert (
        out.getvalue()
        .strip()
        .endswith(
            "with 1 entries; 2 active competitors without an entry (late, later) join the next "
            "week's cohort: entries are fixed when a cohort opens"
        )
    )
