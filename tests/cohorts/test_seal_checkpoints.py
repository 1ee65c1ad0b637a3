"""Signed checkpoints of the event logs, /api/seals' pages, and `arena verify --published`.

The forgeries are the insider's: an export (or the database) rewritten with every hash and link
recomputed, so it is consistent on its own; only what was saved earlier catches it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cohorts.decisions.run import decide
from cohorts.models import Settlement, Trade
from cohorts.seals import events as seal_events
from cohorts.seals import sign as seal_sign
from cohorts.seals.models import Checkpoint, EventLogEntry
from cohorts.seals.verify import export_chunks, verify_database, verify_export
from markets.resolution import record_resolution
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets
from tests.cohorts.forgery import relink, resign_export, rewrite_db_log

pytestmark = pytest.mark.django_db


@pytest.fixture
def key_dir(settings, tmp_path, monkeypatch):
    """A fresh var directory: the signing key is made there on first use."""
    monkeypatch.delenv(seal_sign.ENV, raising=False)
    settings.VAR_DIR = tmp_path
    seal_sign._private_key.cache_clear()
    yield tmp_path
    seal_sign._private_key.cache_clear()


@pytest.fixture
def settled(key_dir):
    """A sealed live week one of whose markets has settled."""
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "market")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    market = Trade.objects.filter(entry__cohort=cohort).first().position.market
    record_resolution(market, status="resolved", outcome="Yes", by="admin", reason="settles")
    assert Settlement.objects.exists()
    return cohort


def _export(cohort=None) -> dict:
    return json.loads("".join(export_chunks(cohort)))


def _write(path, doc) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_key_is_made_once_with_mode_0600(key_dir):
    public = seal_sign.public_key_hex()
    path = key_dir / seal_sign.KEY_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    seal_sign._private_key.cache_clear()
    assert seal_sign.public_key_hex() == public  # read back, not made again


def test_the_key_can_come_from_the_environment(key_dir, monkeypatch):
    monkeypatch.setenv(seal_sign.ENV, "11" * 32)
    seal_sign._private_key.cache_clear()
    expected = seal_sign.public_key_hex()
    assert not (key_dir / seal_sign.KEY_FILE).exists()
    monkeypatch.setenv(seal_sign.ENV, "not hex")
    seal_sign._private_key.cache_clear()
    with pytest.raises(seal_sign.SigningKeyError, match="64 hex digits"):
        seal_sign.public_key_hex()
    monkeypatch.setenv(seal_sign.ENV, "11" * 32)
    seal_sign._private_key.cache_clear()
    assert seal_sign.public_key_hex() == expected


def test_every_append_signs_the_new_head(settled):
    for scope_head in EventLogEntry.objects.filter(scope="live").order_by("-seq")[:1]:
        cp = Checkpoint.objects.get(scope="live", size=scope_head.seq)
        assert cp.head == scope_head.link
    doc = seal_sign.checkpoint_dict(Checkpoint.objects.order_by("-size").first())
    assert seal_sign.signature_ok(doc)
    assert not seal_sign.signature_ok({**doc, "size": doc["size"] - 1})
    assert seal_events.sign_all() == 0  # nothing moved: nothing new to sign


def test_api_seals_pages_with_a_total_and_a_next_link_and_the_newest_checkpoint(settled, client):
    decide(cohort=settled, week=2, at=AT.replace(day=AT.day + 7), sync=True)
    first = client.get("/api/seals?limit=1").json()
    assert first["total"] == 2 and len(first["seals"]) == 1
    assert first["next"] == "/api/seals?limit=1&offset=1"
    second = client.get(first["next"]).json()
    assert second["next"] is None and second["seals"][0]["week"] != first["seals"][0]["week"]
    # The newest checkpoint and the key are on every page, the old fields stay.
    newest = Checkpoint.objects.filter(scope="live").order_by("-size").first()
    assert second["checkpoints"][0]["size"] == newest.size
    assert second["signing_key"]["public_key"] == seal_sign.public_key_hex()
    assert {"format", "limit", "offset", "seals", "event_logs"} <= set(second)
    scoped = client.get(f"/api/seals?kind=live&cohort={settled.pk}&limit=1").json()
    assert "kind=live" in scoped["next"] and f"cohort={settled.pk}" in scoped["next"]


def _forge_settlement(doc) -> None:
    """Rewrite a payout in the export and recompute the whole event chain after it."""
    log = next(log for log in doc["event_logs"] if log["scope"] == "live")
    entry = next(e for e in log["entries"] if e["kind"] == "settlement")
    entry["record"]["payout"] = "999.00"
    relink(log)
    resign_export(doc)  # the insider holds the key: the export's own checkpoint is re-signed


def test_a_forged_settlement_with_a_recomputed_chain_fails_against_a_saved_checkpoint(
    settled, client, tmp_path
):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    doc = _export()
    _forge_settlement(doc)
    assert verify_export(doc).ok  # consistent on its own
    export = _write(tmp_path / "seals.json", doc)
    with pytest.raises(CommandError, match="the log was rewritten after it was saved"):
        call_command("arena", "verify", "--export", export, "--published", saved)
    # Only the checkpoint, saved as its own file, is enough.
    checkpoint = _write(tmp_path / "cp.json", json.loads(Path(saved).read_text())["checkpoints"][0])
    with pytest.raises(CommandError, match="checkpoint live@"):
        call_command("arena", "verify", "--export", export, "--published", checkpoint)


def test_a_checkpoint_with_a_bad_signature_fails(settled, client, tmp_path, capsys):
    response = client.get("/api/seals").json()
    good = _write(tmp_path / "good.json", response)
    call_command("arena", "verify", "--published", good)
    assert "saved roots, heads and checkpoints" in capsys.readouterr().out
    cp = response["checkpoints"][0]
    cp["signed_at"] = cp["signed_at"].replace("2026", "2025")
    bad = _write(tmp_path / "bad.json", response)
    with pytest.raises(CommandError, match="the signature does not verify"):
        call_command("arena", "verify", "--published", good, bad)


def test_a_log_rewritten_in_the_database_fails_against_a_saved_checkpoint(
    settled, client, tmp_path
):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    # The insider: triggers off, a payout rewritten, every later link recomputed in place and
    # every checkpoint row re-signed with the arena's key.
    settlement = Settlement.objects.first()
    Settlement.objects.filter(pk=settlement.pk).update(payout=settlement.payout + 1)
    from cohorts.seals.events import event_records

    forged = {
        e.seq: event_records(e.kind, [e.ref])[e.ref].record
        for e in EventLogEntry.objects.filter(scope="live", kind="settlement")
    }
    rewrite_db_log("live", forged)
    assert verify_database().ok  # the database agrees with itself...
    with pytest.raises(CommandError, match="the log was rewritten after it was saved"):
        call_command("arena", "verify", "--published", saved)


def test_a_file_that_is_not_a_saved_response_is_refused(settled, tmp_path):
    bad = _write(tmp_path / "x.json", {"something": "else"})
    with pytest.raises(CommandError, match="not a saved /api/seals response"):
        call_command("arena", "verify", "--published", bad)


def test_the_methodology_and_exports_pages_show_the_key_and_how_to_save_checkpoints(
    settled, client
):
    page = client.get("/methodology/").content.decode()
    assert f'<code class="hash">{seal_sign.public_key_hex()}</code>' in page
    assert "save these checkpoints" in page and 'href="/api/seals"' in page
    assert 'href="/exports/seals.json"' in page
    exports = client.get("/exports/").content.decode()
    assert 'href="/exports/seals.json"' in exports and 'href="/api/seals"' in exports


def test_a_simulated_cohorts_roots_say_which_clock_and_offer_the_checkpoints(key_dir, client):
    from cohorts.models import Cohort

    make_markets(4)
    demo = make_cohort([baseline_competitor("favorite")], kind=Cohort.Kind.DEMO)
    decide(cohort=demo, week=1, at=AT, sync=True)
    page = client.get(f"/cohorts/{demo.pk}/").content.decode()
    assert "Root stored (UTC, simulated clock)" in page and "own simulated clock" in page
    assert 'href="/api/seals?kind=demo" download' in page


def test_checkpoints_are_appended_to_the_publish_directory_and_verify_from_there(
    key_dir, settings, tmp_path, django_capture_on_commit_callbacks, capsys
):
    settings.ARENA_SEAL_PUBLISH_DIR = str(tmp_path / "published")
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random")])
    with django_capture_on_commit_callbacks(execute=True):
        decide(cohort=cohort, week=1, at=AT, sync=True)
    path = tmp_path / "published" / "checkpoints-live.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [cp["size"] for cp in lines] == list(
        Checkpoint.objects.filter(scope="live").order_by("size").values_list("size", flat=True)
    )
    call_command("arena", "verify", "--published", str(path))
    assert f"{len(lines)} saved roots, heads and checkpoints" in capsys.readouterr().out
