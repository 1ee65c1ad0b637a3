"""The seal covers the release a decision called (record format arena-seal/2), while records
sealed before releases keep format arena-seal/1 and still verify, from the database, from an
export and with the standard-library example verifier."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from agents.models import Release
from cohorts.decisions.run import run_decision
from cohorts.models import Decision, Entry
from cohorts.seals import sealing as seals
from cohorts.seals.models import DecisionDigest
from cohorts.seals.verify import export_chunks, verify_database, verify_export
from cohorts.universe import freeze_universe
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets
from tests.cohorts.test_seal_bytes import _week
from tests.cohorts.test_seal_example_verifier import _run
from tests.cohorts.test_seals import _rehash

pytestmark = pytest.mark.django_db

# Recorded from the fixed week with releases 201 and 202 below.
DONE_V2_HASH = "a1cf894a994e8b7f341f1dc1ed68ab844f83f3f364a8ab78b315aa394c7b467d"
SKIPPED_V2_HASH = "a1e2c24830090b712aaea4aba63c2a8e61d49920a7b2a098e9c5c8fd343367cf"


def _releases() -> tuple[Release, Release]:
    """Fixed releases for the fixed week's two entries, attached as run_decision would."""
    model = Release.objects.create(
        pk=201,
        competitor_id=51,
        number=2,
        provider="openrouter",
        model_id="vendor/fixed-1",
        base_url="https://llm.example/v1",
        params={"temperature": 0, "max_tokens": 4000},
        context_tokens=32768,
        structured_output=True,
        price_in_per_m=Decimal("1.25"),
        price_out_per_m=Decimal("10"),
        knowledge_cutoff=date(2025, 6, 30),
    )
    baseline = Release.objects.create(pk=202, competitor_id=52, number=2, provider="builtin")
    for entry_id, decision_id, release in ((61, 81, model), (62, 82, baseline)):
        Entry.objects.filter(pk=entry_id).update(release=release)
        Decision.objects.filter(pk=decision_id).update(release=release)
    return model, baseline


def _digest(decision_id: int) -> DecisionDigest:
    return DecisionDigest.objects.get(decision_id=decision_id)


def test_a_decision_with_a_release_is_sealed_as_format_2_naming_it():
    cohort = _week()
    _releases()
    assert seals.seal_week(cohort.pk, 1) is not None
    done = json.loads(_digest(81).record_bytes())
    skipped = json.loads(_digest(82).record_bytes())
    assert done["format"] == skipped["format"] == "arena-seal/2"
    assert done["release"] == {
        "id": 201,
        "competitor": 51,
        "number": 2,
        "model_id": "vendor/fixed-1",
        "provider": "openrouter",
        "endpoint": "https://llm.example/v1",
        "params": {"temperature": 0, "max_tokens": 4000},
        "context_tokens": 32768,
        "structured_output": True,
        "price_in_per_m": "1.250000",
        "price_out_per_m": "10.000000",
        "knowledge_cutoff": "2025-06-30",
    }
    assert skipped["release"]["number"] == 2 and skipped["release"]["model_id"] == ""
    # The /2 bytes are a promise too: these hashes never move.
    assert (_digest(81).record_hash, _digest(82).record_hash) == (DONE_V2_HASH, SKIPPED_V2_HASH)


@pytest.fixture
def mixed_week():
    """A live week of three baselines decided through the real run: the first two decisions
    made as before releases (none named), the third with its release, so sealing the week
    (after its last decision) writes two /1 records and one /2; then the first two get the
    release the upgrade's data migration gives them."""
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "market")])
    entries = list(cohort.entries.order_by("id"))
    pinned = {e.pk: e.release_id for e in entries}
    # Unpinned before the cohort begins: the database refuses to change a running entry's
    # release (cohorts migration 0018); the first decision pins the same release again.
    Entry.objects.filter(pk__in=[e.pk for e in entries[:2]]).update(release=None)
    freeze_universe(cohort, 1, AT)
    for entry in entries[:2]:
        run_decision(entry.pk, 1, AT)
        assert Entry.objects.get(pk=entry.pk).release_id == pinned[entry.pk]
        Decision.objects.filter(entry=entry).update(release=None)
    assert not DecisionDigest.objects.exists()
    run_decision(entries[2].pk, 1, AT)  # the week's last decision seals it
    for entry in entries[:2]:
        Decision.objects.filter(entry=entry).update(release=pinned[entry.pk])
    return cohort


def _formats(doc) -> list[str]:
    return [d["record"]["format"] for d in doc["cohorts"][0]["weeks"][0]["digests"]]


def test_records_sealed_before_releases_keep_format_1_and_verify(mixed_week, tmp_path):
    digests = list(DecisionDigest.objects.filter(cohort=mixed_week).order_by("seq"))
    assert [json.loads(d.record_bytes())["format"] for d in digests] == [
        "arena-seal/1",
        "arena-seal/1",
        "arena-seal/2",
    ]
    report = verify_database()
    assert report.ok, report.problems
    doc = json.loads("".join(export_chunks(mixed_week.pk)))
    assert _formats(doc) == ["arena-seal/1", "arena-seal/1", "arena-seal/2"]
    assert doc["record_formats"] == [f"arena-seal/{n}" for n in (1, 2, 3, 4)]
    records = [d["record"] for d in doc["cohorts"][0]["weeks"][0]["digests"]]
    assert ["release" in r for r in records] == [False, False, True]
    assert verify_export(doc).ok
    code, out = _run(tmp_path, doc)
    assert code == 0 and out.startswith("ok: "), out


def test_an_sql_edit_of_a_sealed_release_fails_verify_naming_it(mixed_week):
    entry = mixed_week.entries.order_by("id").last()
    release = entry.release
    assert verify_database().ok
    # The database refuses it while the trigger is there...
    with (
        pytest.raises((IntegrityError, DatabaseError)),
        transaction.atomic(),
        connection.cursor() as cur,
    ):
        cur.execute("UPDATE agents_release SET provider = 'x' WHERE id = %s", [release.pk])
    # ...and an operator who drops the trigger first is caught by verify, the field named.
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("DROP TRIGGER agents_release_frozen ON agents_release")
        else:
            cur.execute("DROP TRIGGER agents_release_frozen")
        cur.execute("UPDATE agents_release SET provider = 'elsewhere' WHERE id = %s", [release.pk])
    problem = verify_database().problems[0]
    decision = entry.decisions.get()
    assert f"decision {decision.pk} (entry {entry.pk}): does not match its seal" in problem
    assert problem.endswith("release.provider differs")


def test_the_export_verifiers_refuse_a_format_2_decision_without_its_release(mixed_week, tmp_path):
    doc = json.loads("".join(export_chunks(mixed_week.pk)))
    # The release removed and every hash recomputed: consistent hashes, but not a /2 record.
    forged = json.loads(json.dumps(doc))
    del forged["cohorts"][0]["weeks"][0]["digests"][2]["record"]["release"]
    _rehash(forged)
    report = verify_export(forged)
    assert not report.ok and "without its release" in report.problems[0]
    code, out = _run(tmp_path, forged)
    assert code == 1 and "without its release" in out
    # A release added to a /1 record, and an unknown format, are refused by both too.
    for digest, change in ((0, {"release": None}), (1, {"format": "arena-seal/9"})):
        forged = json.loads(json.dumps(doc))
        forged["cohorts"][0]["weeks"][0]["digests"][digest]["record"].update(change)
        _rehash(forged)
        why = "a release in a record" if digest == 0 else "unknown record format"
        assert why in verify_export(forged).problems[0]
        code, out = _run(tmp_path, forged)
        assert code == 1 and why in out
