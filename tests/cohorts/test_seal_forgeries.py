"""Every forgery an operator could try against the default demo, made for real and checked as an
auditor would: `arena verify` from the database, `--export` and `--published`, and the shipped
standard-library verifier in its own process. Each names the forgery, or, for a consistent
recompute re-signed with the arena's key, fails against checkpoints saved before it."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from agents.models import Competitor, Release
from cohorts.models import Entry, Position, Settlement
from cohorts.seals import sign as seal_sign
from cohorts.seals.canonical import link_hash, record_hash
from cohorts.seals.models import Checkpoint, SigningKey
from cohorts.seals.verify import export_chunks
from markets.models import Market
from tests import demo_snapshot
from tests.cohorts.forgery import relink, resign_export, run_verifier, sign, triggers_off
from tests.replay.test_demo import SMALL

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, tmp_path, monkeypatch):
    monkeypatch.delenv(seal_sign.ENV, raising=False)
    monkeypatch.delenv(seal_sign.FILE_ENV, raising=False)
    settings.VAR_DIR = tmp_path
    settings.ARENA_LLM_API_KEY = ""
    seal_sign.forget_key()
    demo_snapshot.demo(**SMALL)
    yield
    seal_sign.forget_key()


def arena_verify(*args: str) -> str:
    """`arena verify ARGS`: "ok: ..." or the failure's one line."""
    out = io.StringIO()
    try:
        call_command("arena", "verify", *args, stdout=out)
    except CommandError as exc:
        return str(exc)
    return out.getvalue()


def _write(path, doc) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def _export() -> dict:
    return json.loads("".join(export_chunks(kind="demo")))


def all_checkers(tmp_path, *saved: str) -> dict[str, str]:
    """The database, the export, and the shipped verifier on that export."""
    doc = _write(tmp_path / "seals.json", _export())
    published = ("--published", *saved) if saved else ()
    return {
        "database": arena_verify(*published),
        "export": arena_verify("--export", doc, *published),
        "shipped": run_verifier(tmp_path, doc, *saved)[1],
    }


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_the_untouched_demo_passes_every_checker(demo, tmp_path, client):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    found = all_checkers(tmp_path, saved)
    assert all(v.startswith("ok: ") for v in found.values()), found
    assert SigningKey.objects.count() == 1  # the first key, registered at its first signature


def test_an_entry_repointed_to_another_release_is_named(demo, tmp_path, client):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    entry = Entry.objects.filter(cohort__kind="demo", release__isnull=False).first()
    other = Release.objects.create(
        competitor=entry.competitor, number=99, model_id="openai/gpt-7", provider="openai"
    )
    # The database refuses the repoint (cohorts migration 0018): a forger with database access
    # drops the trigger first, and the seal must still name what was done.
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("DROP TRIGGER cohorts_entry_release_pinned ON cohorts_entry")
        else:
            cursor.execute("DROP TRIGGER cohorts_entry_release_pinned")
    _sql("UPDATE cohorts_entry SET release_id = %s WHERE id = %s", [other.pk, entry.pk])
    for found in (all_checkers(tmp_path), all_checkers(tmp_path, saved)):
        assert f"entry {entry.pk}" in found["database"] and "repointed" in found["database"], found
        assert "openai/gpt-7" in found["database"]
        assert f"entry {entry.pk}" in found["export"] and "verify FAILED" in found["export"], found
        assert "FAILED" in found["shipped"] and f"entry {entry.pk}" in found["shipped"], found


def test_the_application_refuses_to_repoint_a_running_entry(demo):
    entry = Entry.objects.filter(cohort__kind="demo", release__isnull=False).first()
    entry.release = Release.objects.create(
        competitor=entry.competitor, number=98, model_id="x/y", provider="x"
    )
    with pytest.raises(ValidationError, match="never changes"):
        entry.save()


def test_staff_who_may_change_entries_cannot_repoint_one_in_the_admin(
    demo, client, django_user_model
):
    from django.contrib.auth.models import Permission
    from django.urls import reverse

    entry = Entry.objects.filter(cohort__kind="demo", release__isnull=False).first()
    pinned = entry.release_id
    other = Release.objects.create(
        competitor=entry.competitor, number=97, model_id="openai/gpt-7", provider="openai"
    )
    staff = django_user_model.objects.create_user("ops", password="x", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_entry", "change_entry"])
    )
    client.force_login(staff)
    url = reverse("admin:cohorts_entry_change", args=[entry.pk])
    page = client.get(url)
    assert page.status_code == 200 and "release" not in page.context["adminform"].form.fields
    client.post(url, {"release": other.pk})
    entry.refresh_from_db()
    assert entry.release_id == pinned


def test_a_forged_checkpoint_row_fails_and_is_never_served(demo, tmp_path, client):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    newest = Checkpoint.objects.filter(scope="demo").order_by("-size").first()
    forged = sign("demo", newest.size, newest.head, Ed25519PrivateKey.generate())
    triggers_off()
    _sql(
        "UPDATE cohorts_checkpoint SET key_id = %s, signature = %s WHERE id = %s",
        [forged["key_id"], forged["signature"], newest.pk],
    )
    found = arena_verify()
    assert f"checkpoint demo@{newest.size}" in found and "not in the history" in found, found
    # The export carries the forged row as its newest checkpoint, with the public key of the
    # key id it names in the history (none: the forger's key is not there), so its signature
    # does not verify, with or without saved copies.
    for found in (all_checkers(tmp_path), all_checkers(tmp_path, saved)):
        assert "not in the history" in found["database"], found
        for checker in ("export", "shipped"):
            assert f"FAILED: checkpoint demo@{newest.size}: the signature" in found[checker], found
    served = client.get("/api/seals").json()["checkpoints"]
    assert served and all(cp["key_id"] != forged["key_id"] for cp in served)
    assert all(cp["size"] < newest.size for cp in served if cp["scope"] == "demo")


def test_a_replaced_key_file_keeps_old_checkpoints_valid_and_stops_signing(demo, tmp_path, client):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    (tmp_path / seal_sign.KEY_FILE).unlink()  # lost: the next read makes another key
    seal_sign.forget_key()
    found = all_checkers(tmp_path, saved)
    assert all(v.startswith("ok: ") for v in found.values()), found  # old ones verify still
    health = client.get("/healthz").json()["signing_key"]
    assert health["status"] == "error" and "not the arena's latest key" in health["why"]
    seals = client.get("/api/seals").json()
    assert seals["checkpoints"] == [] and "not the arena's latest" in seals["checkpoints_withheld"]
    # Recorded as an unendorsed rotation: verifiers pass, loudly.
    call_command("arena", "rotate-key", "--unendorsed", stdout=io.StringIO())
    found = all_checkers(tmp_path, saved)
    assert all("ok: " in v for v in found.values()), found
    assert "UNENDORSED" in found["shipped"]


def test_an_endorsed_rotation_verifies_everywhere(demo, tmp_path, client):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    call_command("arena", "rotate-key", stdout=io.StringIO())
    assert SigningKey.objects.count() == 2
    doc = _export()
    assert [k["key_id"] for k in doc["signing_keys"]] == list(
        SigningKey.objects.values_list("key_id", flat=True)
    )
    assert doc["checkpoints"][0]["key_id"] == SigningKey.objects.last().key_id
    found = all_checkers(tmp_path, saved)
    assert all(v.startswith("ok: ") for v in found.values()), found


def test_an_export_resigned_with_another_key_fails_against_saved_checkpoints(
    demo, tmp_path, client
):
    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    doc = _export()
    log = doc["event_logs"][0]
    next(e for e in log["entries"] if e["kind"] == "settlement")["record"]["payout"] = "999.00"
    relink(log)
    thief = Ed25519PrivateKey.generate()
    raw = thief.public_key().public_bytes_raw()
    key = {"key_id": seal_sign.key_id(raw), "public_key": raw.hex()}
    doc["signing_key"] = {"algorithm": "Ed25519", **key}
    doc["signing_keys"] = [{**key, "previous": None, "endorsement": None, "created_at": "x"}]
    resign_export(doc, thief)
    path = _write(tmp_path / "forged.json", doc)
    assert arena_verify("--export", path).startswith("ok: ")  # consistent on its own
    assert "rewritten after it was saved" in arena_verify("--export", path, "--published", saved)
    # A saved checkpoint alone names the key: the thief's is not the arena's history.
    checkpoint = json.loads((tmp_path / "saved.json").read_text())["checkpoints"][0]
    cp = _write(tmp_path / "cp.json", checkpoint)
    found = arena_verify("--export", path, "--published", cp)
    assert "not in the export's key history" in found, found
    code, out = run_verifier(tmp_path, path, cp)
    assert code == 1 and "not in the export's key history" in out, out
    code, out = run_verifier(tmp_path, path, saved)
    assert code == 1 and "does not begin with the saved one" in out, out
    assert "arena's" not in found + out  # the thief's key is never called the arena's


def test_an_unsigned_tail_fails_the_export_checkers(demo, tmp_path):
    doc = _export()
    log = doc["event_logs"][0]
    last = log["entries"][-1]
    resolution = next(e for e in log["entries"] if e["kind"] == "resolution")
    forged = {**last, "seq": last["seq"] + 1, "kind": "resolution", "ref": 10**6}
    # A resolution appended after the newest checkpoint: the market reopened, as the site shows.
    forged["record"] = {**resolution["record"], "id": 10**6, "to": resolution["record"]["from"]}
    log["entries"].append(forged)
    relink(log)
    path = _write(tmp_path / "tail.json", doc)
    found = arena_verify("--export", path)
    assert "come after the newest checkpoint" in found, found
    code, out = run_verifier(tmp_path, path)
    assert code == 1 and "come after the newest checkpoint" in out, out


@pytest.mark.parametrize(
    "edit", ["resolution", "competitor", "model_id", "settlement_made", "settlement_reversed"]
)
def test_data_edits_are_named_by_the_export_checkers(demo, tmp_path, edit):
    if edit == "settlement_made":  # a payout the site shows, made without the application
        position = Position.objects.filter(
            entry__cohort__kind="demo", status="open", shares__gt=0, settlements__isnull=True
        ).first()
        made = Settlement.objects.create(
            position=position,
            market=position.market,
            kind="won",
            outcome=position.outcome,
            shares=position.shares,
            cost_basis=position.cost_basis,
            payout=position.shares.quantize(Decimal("0.01")),
            settled_at=position.opened_at,
        )
        what = f"settlement {made.pk}"
    elif edit == "settlement_reversed":  # a payout the site stops counting, without a reversal
        settled = Settlement.objects.filter(
            position__entry__cohort__kind="demo", reversed_at__isnull=True
        ).first()
        _sql("UPDATE cohorts_settlement SET reversed_at = settled_at WHERE id = %s", [settled.pk])
        what = f"settlement {settled.pk}"
    elif edit == "resolution":
        market = Market.objects.filter(status="resolved").exclude(resolved_outcome="").first()
        flipped = next(o for o in market.outcomes if o != market.resolved_outcome)
        _sql("UPDATE markets_market SET resolved_outcome = %s WHERE id = %s", [flipped, market.pk])
        what = f"market {market.pk}"
    else:
        entry = Entry.objects.filter(cohort__kind="demo").first()
        column, value = ("display_name", "Renamed") if edit == "competitor" else ("model_id", "m/x")
        _sql(
            f"UPDATE agents_competitor SET {column} = %s WHERE id = %s",
            [value, entry.competitor_id],
        )
        what = f"competitor {entry.competitor_id}"
    found = all_checkers(tmp_path)
    assert what in found["database"], found
    assert what in found["export"] and "verify FAILED" in found["export"], found
    assert what in found["shipped"] and "FAILED" in found["shipped"], found


def test_a_database_rolled_back_to_an_older_checkpoint_is_named_given_saved_copies(
    demo, tmp_path, client
):
    competitor = Entry.objects.filter(cohort__kind="demo").first().competitor
    before = Checkpoint.objects.filter(scope="demo").order_by("-size").first().size
    with transaction.atomic():  # what a restore of an older backup undoes
        competitor.display_name = "Renamed through the application"
        competitor.save()  # an identity record, signed at once
        saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
        transaction.set_rollback(True)
    assert Competitor.objects.get(pk=competitor.pk).display_name != competitor.display_name
    newest = json.loads((tmp_path / "saved.json").read_text())["checkpoints"]
    assert [cp["size"] for cp in newest if cp["scope"] == "demo"] == [before + 1]
    found = all_checkers(tmp_path)
    assert all(v.startswith("ok: ") for v in found.values()), found  # consistent on its own
    found = all_checkers(tmp_path, saved)
    assert all("rolled back" in v for v in found.values()), found


def _rewrite_week(week: dict) -> None:
    """Recompute a cohort-week's chain and its roots from its (edited) records."""
    prev = genesis = record_hash(week["genesis"])
    for n, d in enumerate(week["digests"], 1):
        d["record_hash"] = record_hash(d["record"])
        d["prev"], d["link"] = prev, link_hash(prev, d["record_hash"], n)
        prev = d["link"]
    for seal in week["seals"]:
        seal["root"] = week["digests"][seal["count"] - 1]["link"] if seal["count"] else genesis


@pytest.mark.parametrize("forgery", ["rewritten", "left_out"])
def test_a_week_that_is_not_the_signed_logs_is_named(demo, tmp_path, forgery):
    """The week roots are records of the signed log: a week's decisions rewritten in an export
    with its chain and root recomputed (no key needed), or a sealed week left out of it."""
    doc = _export()
    cohort = doc["cohorts"][0]
    week = cohort["weeks"][0]
    if forgery == "rewritten":
        record = next(d for d in week["digests"] if d["record"].get("type") == "decision")
        record["record"]["decision"]["reasoning"] = "what the operator wishes it had said"
        _rewrite_week(week)
        expected = f"cohort {cohort['id']} week {week['week']}: root #1 is not the root"
    else:
        cohort["weeks"].remove(week)
        expected = f"cohort {cohort['id']} week {week['week']}: root #1 is in the event log"
    path = _write(tmp_path / "forged.json", doc)
    found = arena_verify("--export", path)
    assert found.startswith("verify FAILED") and expected in found, found
    code, out = run_verifier(tmp_path, path)
    assert code == 1 and expected in out, out


def test_the_shipped_verifier_reads_the_publish_directorys_json_lines(
    demo, tmp_path, settings, django_capture_on_commit_callbacks
):
    settings.ARENA_SEAL_PUBLISH_DIR = str(tmp_path / "published")
    competitor = Entry.objects.filter(cohort__kind="demo").first().competitor
    for name in ("Renamed once", "Renamed twice"):  # two appends, two signed checkpoints
        competitor.display_name = name
        with django_capture_on_commit_callbacks(execute=True):
            competitor.save()
    jsonl = tmp_path / "published" / "checkpoints-demo.jsonl"
    assert len(jsonl.read_text().splitlines()) == 2  # what made the verifier's json.load fail
    doc = _write(tmp_path / "seals.json", _export())
    code, out = run_verifier(tmp_path, doc, str(jsonl))
    assert code == 0 and out.startswith("ok: "), out
    assert arena_verify("--published", str(jsonl)).startswith("ok: ")
    assert arena_verify("--export", doc, "--published", str(jsonl)).startswith("ok: ")


def _sealed_forecast():
    """A forecast of a done decision whose record the seal rebuilds from the live rows."""
    from cohorts.models import Forecast

    return (
        Forecast.objects.filter(decision__entry__cohort__kind="demo", decision__status="done")
        .select_related("decision__entry")
        .order_by("pk")
        .first()
    )


@pytest.mark.parametrize("edit", ["forecast", "deleted_week", "payout", "score", "recompute"])
def test_the_forgeries_caught_before_stay_caught_by_every_checker(demo, tmp_path, client, edit):
    """Plain SQL edits of a forecast, a deleted sealed week, a payout and a published score, and
    a consistent recompute re-signed with the arena's key (caught by copies saved before it)."""
    from cohorts.seals.events import event_records
    from cohorts.seals.models import EventLogEntry, WeekSeal
    from scoring.models import LeaderboardRow
    from tests.cohorts.forgery import rewrite_db_log

    saved = _write(tmp_path / "saved.json", client.get("/api/seals").json())
    if edit == "forecast":
        forecast = _sealed_forecast()
        table = type(forecast)._meta.db_table
        _sql(f"UPDATE {table} SET probability = 0.999 WHERE id = %s", [forecast.pk])
        what = [f"cohort {forecast.decision.entry.cohort_id} week {forecast.decision.week}"]
    elif edit == "deleted_week":
        seal = WeekSeal.objects.filter(scope="demo").order_by("-pk").first()
        triggers_off()
        for table in ("cohorts_decisiondigest", "cohorts_weekseal"):
            _sql(
                f"DELETE FROM {table} WHERE cohort_id = %s AND week = %s",
                [seal.cohort_id, seal.week],
            )
        # The database names the week that has no seal; an export, the log's missing seal.
        what = [f"cohort {seal.cohort_id} week {seal.week}: no seal", "event log demo"]
    elif edit == "payout":
        _sql("UPDATE cohorts_settlement SET payout = payout + 1 WHERE id = %s",
             [Settlement.objects.filter(payout__gt=0).first().pk])  # fmt: skip
        what = ["event log demo"]
    elif edit == "score":
        row = LeaderboardRow.objects.filter(brier__isnull=False).order_by("-run_id", "pk").first()
        _sql("UPDATE scoring_leaderboardrow SET brier = brier + 0.01 WHERE id = %s", [row.pk])
        assert f"leaderboard row {row.pk} was edited" in arena_verify(), "the database"
        assert "published figures differ" in arena_verify("--scores"), "the exports"
        return  # the seal export carries the run's digest, not its rows: --scores checks them
    else:
        settlement = Settlement.objects.filter(payout__gt=0).first()
        Settlement.objects.filter(pk=settlement.pk).update(payout=settlement.payout + 1)
        rows = EventLogEntry.objects.filter(scope="demo", kind="settlement")
        rewrite_db_log("demo", {e.seq: event_records(e.kind, [e.ref])[e.ref].record for e in rows})
        found = all_checkers(tmp_path)
        assert all(v.startswith("ok: ") for v in found.values()), found  # consistent alone
        found = all_checkers(tmp_path, saved)
        assert "rewritten after it was saved" in found["database"], found
        assert "rewritten after it was saved" in found["export"], found
        assert "does not begin with the saved one" in found["shipped"], found
        return
    for found in (all_checkers(tmp_path), all_checkers(tmp_path, saved)):
        assert all("FAILED" in v and any(w in v for w in what) for v in found.values()), found
