"""The database itself refuses what the application refuses (cohorts migration 0018): an UPDATE
or DELETE of the key history, and an UPDATE of an entry's release once its cohort has begun,
however the statement arrives (raw SQL here, as an operator with a database shell would send
it). Writes the application makes still go through. The same tests run on PostgreSQL with a
postgres DATABASE_URL; the `postgres` ones check what only PostgreSQL says (the row's ids)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from agents.models import Release
from cohorts.decisions.claims import claim_decision
from cohorts.models import Entry
from cohorts.seals.models import SigningKey
from cohorts.universe import freeze_universe
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets

pytestmark = pytest.mark.django_db

TRIGGERS = {
    "sqlite": {
        "cohorts_signingkey_no_update",
        "cohorts_signingkey_no_delete",
        "cohorts_entry_release_pinned",
    },
    "postgresql": {"cohorts_signingkey_append_only", "cohorts_entry_release_pinned"},
}


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _refused(statement: str, params: list) -> str:
    """The database's error for `statement`, which must be refused (in a savepoint, so the
    test's transaction goes on)."""
    with pytest.raises(DatabaseError) as caught, transaction.atomic():
        _sql(statement, params)
    return str(caught.value)


def _key(n: int = 1) -> SigningKey:
    key = SigningKey(key_id=f"{n:064x}", public_key="ab" * 32, created_at=timezone.now())
    key.save()
    return key


@pytest.fixture
def cohort():
    """A cohort opened but not begun: entries pinned to their competitor's release, no frozen
    universe and no decision yet."""
    make_markets(6)
    return make_cohort([baseline_competitor(s) for s in ("favorite", "random")])


def _other_release(entry: Entry) -> Release:
    return Release.objects.create(
        competitor=entry.competitor, number=99, model_id="openai/gpt-7", provider="openai"
    )


def test_the_triggers_exist_after_migrate():
    # A later SQLite table rebuild drops a table's triggers without a word: this says so.
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        names = {row[0] for row in cursor.fetchall()}
    assert TRIGGERS[connection.vendor] <= names


def test_the_key_history_refuses_update_and_delete_in_sql():
    key = _key()
    found = _refused(
        "UPDATE cohorts_signingkey SET public_key = %s WHERE id = %s", ["cd" * 32, key.pk]
    )
    assert "cohorts_signingkey is append-only" in found, found
    found = _refused("DELETE FROM cohorts_signingkey WHERE id = %s", [key.pk])
    assert "never deleted" in found, found
    assert SigningKey.objects.get(pk=key.pk).public_key == "ab" * 32


def test_a_rotation_only_inserts_and_goes_through(settings, tmp_path, monkeypatch):
    from cohorts.seals import sign as seal_sign

    monkeypatch.delenv(seal_sign.ENV, raising=False)
    monkeypatch.delenv(seal_sign.FILE_ENV, raising=False)
    settings.VAR_DIR = tmp_path
    seal_sign.forget_key()
    try:
        from cohorts.seals import keys

        keys.ensure_first()
        call_command("arena", "rotate-key", stdout=io.StringIO())
    finally:
        seal_sign.forget_key()
    assert SigningKey.objects.count() == 2


def test_a_running_entrys_release_is_refused_in_sql(cohort):
    entry = cohort.entries.order_by("id").first()
    pinned = entry.release_id
    freeze_universe(cohort, 1, AT)  # the cohort has begun
    other = _other_release(entry)
    found = _refused("UPDATE cohorts_entry SET release_id = %s WHERE id = %s", [other.pk, entry.pk])
    assert "release never changes once its cohort has begun" in found, found
    found = _refused("UPDATE cohorts_entry SET release_id = NULL WHERE id = %s", [entry.pk])
    assert "release never changes" in found, found
    assert Entry.objects.get(pk=entry.pk).release_id == pinned
    # The entry's other columns, and its release written again unchanged, still go through.
    Entry.objects.filter(pk=entry.pk).update(cash="9000.00")
    fresh = Entry.objects.get(pk=entry.pk)
    fresh.save()
    assert str(Entry.objects.get(pk=entry.pk).cash) == "9000.00"


def test_a_decision_alone_means_begun(cohort):
    entry, neighbour = cohort.entries.order_by("id")
    assert claim_decision(neighbour.pk, 1, neighbour.release_id) is not None
    found = _refused(
        "UPDATE cohorts_entry SET release_id = %s WHERE id = %s",
        [_other_release(entry).pk, entry.pk],
    )
    assert "release never changes" in found, found


def test_before_the_cohort_begins_and_a_null_release_are_still_writable(cohort):
    entry = cohort.entries.order_by("id").first()
    other = _other_release(entry)
    # Not begun yet (fixtures, open_cohort): any change goes through.
    Entry.objects.filter(pk=entry.pk).update(release=other)
    Entry.objects.filter(pk=entry.pk).update(release=None)
    freeze_universe(cohort, 1, AT)
    # An entry with no release is pinned by its first decision (cohorts/lineage.py).
    Entry.objects.filter(pk=entry.pk, release__isnull=True).update(release=other)
    assert Entry.objects.get(pk=entry.pk).release_id == other.pk


@pytest.mark.django_db(transaction=True)
def test_flush_still_empties_the_key_history():
    _key(7)
    call_command("flush", interactive=False, verbosity=0)
    assert not SigningKey.objects.exists()


@pytest.mark.postgres
def test_postgresql_names_the_key_and_the_entry(cohort):
    key = _key(3)
    found = _refused("UPDATE cohorts_signingkey SET previous = 'x' WHERE id = %s", [key.pk])
    assert f"key {key.key_id}" in found, found
    found = _refused("DELETE FROM cohorts_signingkey WHERE id = %s", [key.pk])
    assert "never deleted" in found and f"key {key.key_id}" in found, found
    entry = cohort.entries.order_by("id").first()
    freeze_universe(cohort, 1, AT)
    found = _refused(
        "UPDATE cohorts_entry SET release_id = %s WHERE id = %s",
        [_other_release(entry).pk, entry.pk],
    )
    assert f"entry {entry.pk} runs release {entry.release_id}" in found, found
