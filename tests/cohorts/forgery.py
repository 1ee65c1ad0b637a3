"""What an insider with the database, the host and the signing key does to make a forgery
consistent: recompute the event chain after an edit and re-sign the checkpoints with the
arena's key (in an export, or in the database's checkpoint rows)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from django.db import connection

from cohorts.seals import sign as seal_sign
from cohorts.seals.canonical import canonical, link_hash, pack, record_hash
from cohorts.seals.models import Checkpoint, EventLogEntry
from cohorts.seals.records import events_genesis_record

VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "examples" / "verify_export.py"


def relink(log: dict) -> None:
    """Recompute an exported log's hashes and links from its records."""
    prev = record_hash(events_genesis_record(log["scope"]))
    for n, e in enumerate(log["entries"], 1):
        e["record_hash"] = record_hash(e["record"])
        e["prev"], e["link"] = prev, link_hash(prev, e["record_hash"], n)
        prev = e["link"]


def sign(scope: str, size: int, head: str, key=None, signed_at="2026-12-01T00:00:00.000000Z"):
    key = key or seal_sign.private_key()
    raw = key.public_key().public_bytes_raw()
    return {
        "format": seal_sign.CHECKPOINT_FORMAT,
        "scope": scope,
        "size": size,
        "head": head,
        "signed_at": signed_at,
        "key_id": seal_sign.key_id(raw),
        "public_key": raw.hex(),
        "signature": key.sign(seal_sign.signed_body(scope, size, head, signed_at)).hex(),
    }


def resign_export(doc: dict, key=None) -> None:
    """A newest checkpoint over every log of the export, signed with `key` (the arena's)."""
    doc["checkpoints"] = [
        sign(log["scope"], len(log["entries"]), log["entries"][-1]["link"], key)
        for log in doc["event_logs"]
        if log["entries"]
    ]


def triggers_off() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
        else:
            for table in ("eventlogentry", "checkpoint"):
                cursor.execute(f"DROP TRIGGER IF EXISTS cohorts_{table}_no_update")


def rewrite_db_log(scope: str, records: dict[int, dict] | None = None) -> None:
    """Recompute the scope's log in the database from `records` (seq -> record; the others as
    stored) and re-sign every checkpoint row of it with the arena's key."""
    import json

    triggers_off()
    prev = record_hash(events_genesis_record(scope))
    links: dict[int, str] = {}
    for e in EventLogEntry.objects.filter(scope=scope).order_by("seq"):
        rec = (records or {}).get(e.seq) or json.loads(e.record_bytes())
        h = record_hash(rec)
        link = link_hash(prev, h, e.seq)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE cohorts_eventlogentry SET record = %s, record_hash = %s, prev = %s, "
                "link = %s WHERE id = %s",
                [pack(canonical(rec)), h, prev, link, e.pk],
            )
        prev = links[e.seq] = link
    for cp in Checkpoint.objects.filter(scope=scope):
        doc = sign(scope, cp.size, links[cp.size], signed_at=seal_sign.ts(cp.signed_at))
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE cohorts_checkpoint SET head = %s, signature = %s WHERE id = %s",
                [doc["head"], doc["signature"], cp.pk],
            )


def run_verifier(tmp_path: Path, doc_path: str, *saved: str) -> tuple[int, str]:
    """The shipped standard-library verifier as an outsider runs it: its own process, nothing
    of the arena importable."""
    done = subprocess.run(
        [sys.executable, "-I", str(VERIFIER), doc_path, *saved],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    return done.returncode, done.stdout + done.stderr
