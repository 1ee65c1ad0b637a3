"""Sealing raced on PostgreSQL: two sealers of one week, two settlements appending to one log.

Each thread has its own connection, so the races happen inside the database; the unique
(cohort, week, seq) and (scope, seq) constraints decide them.
"""

import json

import pytest

from agents.models import Competitor
from cohorts.decisions.run import run_decision
from cohorts.seals import sealing as seals
from cohorts.seals.models import DecisionDigest, EventLogEntry, WeekSeal
from cohorts.seals.verify import export_chunks, verify_database, verify_export
from cohorts.universe import freeze_universe
from markets.resolution import record_resolution
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets
from tests.cohorts.test_concurrency_pg import at_once, twice_at_once

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def decided():
    """A decided but unsealed week (the decisions ran before the seal hook could act)."""
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "longshot-fader")])
    freeze_universe(cohort, 1, AT)
    for entry in cohort.entries.order_by("id"):
        run_decision(entry.pk, 1, AT)
    return cohort


def test_two_sealers_of_one_week_leave_one_chain(decided):
    assert WeekSeal.objects.count() == 1  # the last decision sealed it; racing the catch-up
    # and an explicit forced seal against each other adds nothing.
    results = at_once(seals.seal_due, lambda: seals.seal_week(decided.pk, 1, force="deadline"))
    assert [exc for _, exc in results] == [None, None]
    assert WeekSeal.objects.count() == 1 and DecisionDigest.objects.count() == 3
    assert verify_database().ok


def test_a_week_sealed_twice_at_once_is_sealed_once():
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random")])
    freeze_universe(cohort, 1, AT)
    results = twice_at_once(lambda: seals.seal_week(cohort.pk, 1, force="deadline"))
    assert [exc for _, exc in results] == [None, None]
    assert sum(seal is not None for seal, _ in results) == 1
    assert list(WeekSeal.objects.values_list("seq", flat=True)) == [1]
    assert DecisionDigest.objects.count() == 2


def test_two_settlements_at_once_append_one_unbroken_log(decided):
    held = sorted(set(decided.entries.values_list("positions__market_id", flat=True)) - {None})[:2]
    assert len(held) == 2
    # Through the one resolution service (a market resolved behind it fails verify).
    results = at_once(
        *(
            lambda pk=pk: record_resolution(
                pk, status="resolved", outcome="Yes", by="admin", reason="race"
            )
            for pk in held
        )
    )
    assert [exc for _, exc in results] == [None, None]
    seqs = list(
        EventLogEntry.objects.filter(scope="live").order_by("seq").values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 2
    assert verify_database().ok


def test_an_export_read_while_the_arena_writes_agrees_with_itself(decided):
    """The export reads its cohorts, its logs and what the site shows (`current`) one after the
    other; a competitor renamed through the application in between (a new identity record,
    signed) must not make an honest export fail its own checks."""
    competitor = Competitor.objects.filter(entries__cohort=decided).first()
    chunks = export_chunks(decided.pk)
    parts = []
    for chunk in chunks:
        parts.append(chunk)
        if chunk.lstrip().startswith('{"scope": "live"'):
            break  # the live log is read; `current` is not yet

    def rename():
        competitor.display_name = "Renamed while the export was read"
        competitor.save()

    assert at_once(rename) == [(None, None)]
    doc = json.loads("".join([*parts, *chunks]))
    report = verify_export(doc)
    assert report.ok, report.problems
    shown = {c["id"]: c["state"] for c in doc["current"]["competitors"]}
    assert shown[competitor.pk]["display_name"] != "Renamed while the export was read"
    # The rename is committed and logged: the next export shows it, and agrees with itself too.
    assert EventLogEntry.objects.filter(scope="live", kind="identity").count() > sum(
        e["kind"] == "identity" for e in doc["event_logs"][0]["entries"]
    )
    assert verify_export(json.loads("".join(export_chunks(decided.pk)))).ok
