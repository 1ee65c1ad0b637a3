"""The key history and an entry's pinned release are guarded by the database, not only by the
application (issue 40): SigningKey.save()/delete() and Entry._refuse_repointing() stop the ORM,
but a raw UPDATE or DELETE, a queryset update() or an admin with another code path went through.

- cohorts_signingkey is append-only: UPDATE and DELETE are refused on both engines (a rotation,
  `arena rotate-key`, only inserts). On SQLite a DELETE is let through while the seal guard says
  a deliberate wipe runs (`flush`, cohorts/management/commands/flush.py, as 0006 does for the
  sealing tables); PostgreSQL's flush is a TRUNCATE, which row triggers never see.
- cohorts_entry.release_id never changes once set and the cohort has begun, "begun" read from the
  data exactly as Entry._refuse_repointing() does: a frozen universe of the cohort, or a decision
  of any of its entries. Pinning a NULL release (an entry made outside open_cohort, pinned by its
  first decision: cohorts/lineage.py), writing the same value again (Entry.save() writes every
  column) and changing an entry of a cohort not begun yet (test fixtures, open_cohort) still work.

SQLite caveats for later migrations: a table rebuild (Django's _remake_table) of cohorts_entry or
cohorts_signingkey silently drops its trigger here, so such a migration must create it again (as
agents 0009 does for agents_release_frozen); and a rebuild of cohorts_universe or agents_decision
fails with "error in trigger cohorts_entry_release_pinned: no such table" (SQLite re-parses every
trigger on the RENAME), so such a migration drops cohorts_entry_release_pinned before the
rebuild and creates it again after. tests/cohorts/test_db_guards.py checks they are all there.
"""

from django.db import migrations

GUARD = "arena_seal_guard"  # cohorts 0006: the one-row flag `flush` sets on SQLite
KEY_UPDATE = "arena: cohorts_signingkey is append-only (UPDATE refused: a rotation is a new row)"
KEY_DELETE = "arena: cohorts_signingkey rows are never deleted (the key history is append-only)"
REPOINT = (
    "arena: an entry's release never changes once its cohort has begun "
    "(a frozen universe or a decision); a new release is for cohorts opened after it"
)
# The cohort has begun: the same two questions as Entry._refuse_repointing().
BEGUN = (
    "EXISTS (SELECT 1 FROM cohorts_universe WHERE cohort_id = OLD.cohort_id) OR EXISTS ("
    "SELECT 1 FROM agents_decision d JOIN cohorts_entry e ON e.id = d.entry_id "
    "WHERE e.cohort_id = OLD.cohort_id)"
)


def _quoted(text: str) -> str:
    """As an SQL string literal's body (the repoint message has an apostrophe)."""
    return text.replace("'", "''")


PG_KEY_FUNCTION = f"""
CREATE OR REPLACE FUNCTION arena_signingkey_append_only() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    RAISE EXCEPTION USING MESSAGE = '{KEY_UPDATE}: key ' || OLD.key_id;
  END IF;
  RAISE EXCEPTION USING MESSAGE = '{KEY_DELETE}: key ' || OLD.key_id;
END $$ LANGUAGE plpgsql;
"""

PG_ENTRY_FUNCTION = f"""
CREATE OR REPLACE FUNCTION arena_entry_release_pinned() RETURNS trigger AS $$
BEGIN
  IF {BEGUN} THEN
    RAISE EXCEPTION USING MESSAGE = '{_quoted(REPOINT)}: entry ' || OLD.id
      || ' runs release ' || OLD.release_id;
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""


def add_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_KEY_FUNCTION, params=None)
        schema_editor.execute(
            "CREATE TRIGGER cohorts_signingkey_append_only BEFORE UPDATE OR DELETE "
            "ON cohorts_signingkey FOR EACH ROW EXECUTE FUNCTION arena_signingkey_append_only()"
        )
        schema_editor.execute(PG_ENTRY_FUNCTION, params=None)
        # WHEN: only a change of a release already pinned asks whether the cohort has begun.
        schema_editor.execute(
            "CREATE TRIGGER cohorts_entry_release_pinned BEFORE UPDATE OF release_id "
            "ON cohorts_entry FOR EACH ROW WHEN (OLD.release_id IS NOT NULL "
            "AND NEW.release_id IS DISTINCT FROM OLD.release_id) "
            "EXECUTE FUNCTION arena_entry_release_pinned()"
        )
    elif vendor == "sqlite":
        schema_editor.execute(
            "CREATE TRIGGER cohorts_signingkey_no_update BEFORE UPDATE ON cohorts_signingkey "
            f"BEGIN SELECT RAISE(ABORT, '{KEY_UPDATE}'); END"
        )
        schema_editor.execute(
            "CREATE TRIGGER cohorts_signingkey_no_delete BEFORE DELETE ON cohorts_signingkey "
            f"WHEN (SELECT max(wiping) FROM {GUARD}) = 0 "
            f"BEGIN SELECT RAISE(ABORT, '{KEY_DELETE}'); END"
        )
        schema_editor.execute(
            "CREATE TRIGGER cohorts_entry_release_pinned BEFORE UPDATE OF release_id "
            "ON cohorts_entry WHEN OLD.release_id IS NOT NULL "
            f"AND NEW.release_id IS NOT OLD.release_id AND ({BEGUN}) "
            f"BEGIN SELECT RAISE(ABORT, '{_quoted(REPOINT)}'); END"
        )


def drop_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS cohorts_signingkey_append_only ON cohorts_signingkey"
        )
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS cohorts_entry_release_pinned ON cohorts_entry"
        )
        schema_editor.execute("DROP FUNCTION IF EXISTS arena_signingkey_append_only()")
        schema_editor.execute("DROP FUNCTION IF EXISTS arena_entry_release_pinned()")
    elif vendor == "sqlite":
        for name in (
            "cohorts_signingkey_no_update",
            "cohorts_signingkey_no_delete",
            "cohorts_entry_release_pinned",
        ):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("cohorts", "0017_market_text_without_invisible_characters"),
    ]

    operations = [migrations.RunPython(add_triggers, drop_triggers)]
