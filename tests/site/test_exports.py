"""Exports: CSV and JSON, streamed, bounded by dates and a row cap, labelled by cohort kind."""

import csv
import io
import json
from datetime import date

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.http import StreamingHttpResponse

from arena import exports
from cohorts.models import Cohort
from tests.site.conftest import build_arena

pytestmark = pytest.mark.django_db
WIDE = "since=2026-01-01&until=2026-12-31"


def body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


@pytest.mark.parametrize("what", list(exports.SPECS))
def test_every_export_streams_csv_and_json(client, arena_world, what):
    csv_response = client.get(f"/exports/{what}.csv?{WIDE}")
    assert csv_response.status_code == 200
    assert csv_response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(body(csv_response))))
    assert rows, what
    assert all(r["cohort_kind"] == "live" for r in rows)
    json_response = client.get(f"/exports/{what}.json?{WIDE}")
    doc = json.loads(body(json_response))
    assert doc["export"] == what and len(doc["rows"]) == len(rows)
    assert doc["money"] == "strings with two decimals"


def test_decisions_export_includes_prompts(client, arena_world):
    rows = list(csv.DictReader(io.StringIO(body(client.get(f"/exports/decisions.csv?{WIDE}")))))
    assert rows[0]["system_prompt"] == "You are a forecaster."
    assert json.loads(rows[0]["parsed"])["action"] == "BET"


def test_exports_are_bounded_by_row_cap_and_dates(client, arena_world):
    doc = json.loads(body(client.get(f"/exports/snapshots.json?{WIDE}&limit=5")))
    assert len(doc["rows"]) == 5
    # oldest first, so the cap keeps a contiguous prefix
    assert [r["ts"] for r in doc["rows"]] == sorted(r["ts"] for r in doc["rows"])
    doc = json.loads(body(client.get("/exports/snapshots.json?since=2027-01-01&until=2027-02-01")))
    assert doc["rows"] == []
    assert exports.bounds(limit=10**9).limit == exports.MAX_LIMIT
    b = exports.bounds(today=date(2026, 11, 22))
    assert (b.until - b.since).days == exports.DEFAULT_DAYS + 1


def test_exports_filter_by_cohort_and_label_demo_rows(client, arena_world):
    demo = build_arena(arena_world, kind=Cohort.Kind.DEMO)
    rows = list(
        csv.DictReader(
            io.StringIO(body(client.get(f"/exports/trades.csv?{WIDE}&cohort={demo.pk}")))
        )
    )
    assert rows and {r["cohort_kind"] for r in rows} == {"demo"}
    assert {r["cohort_id"] for r in rows} == {str(demo.pk)}


@pytest.mark.parametrize(
    "query", ["since=yesterday", "since=2026-02-01&until=2026-01-01", "limit=0", "cohort=x"]
)
def test_bad_bounds_are_400(client, db, query):
    response = client.get(f"/exports/trades.csv?{query}")
    assert response.status_code == 400


def test_export_verb_writes_to_stdout(arena_world):
    out = io.StringIO()
    call_command(
        "arena",
        "export",
        "--what",
        "trades",
        "--format",
        "csv",
        "--since",
        "2026-01-01",
        "--until",
        "2026-12-31",
        "--limit",
        "2",
        stdout=out,
    )
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 2 and rows[0]["side"] == "BUY"
    out = io.StringIO()
    call_command(
        "arena",
        "export",
        "--what",
        "scores",
        "--format",
        "json",
        "--since",
        "2026-01-01",
        stdout=out,
    )
    assert json.loads(out.getvalue())["rows"][0]["competitor"] == "alpha-model"


def test_export_verb_fails_with_a_one_line_reason(db):
    with pytest.raises(CommandError, match="since must be a date"):
        call_command("arena", "export", "--what", "trades", "--since", "soon", stdout=io.StringIO())


def test_export_rows_stream_in_chunks(arena_world, django_assert_max_num_queries):
    # The generator does no work until iterated, and then reads with one query per chunk.
    b = exports.bounds(since="2026-01-01", until="2026-12-31")
    stream = exports.stream("snapshots", "csv", b)
    with django_assert_max_num_queries(2):
        chunks = list(stream)
    assert len(chunks) == 1 + 36  # header + 3 entries x 12 snapshots
