"""Exports: CSV and JSON, streamed, bounded by dates and a row cap, labelled by cohort kind."""

import csv
import io
import json
from datetime import UTC, date, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F
from django.http import StreamingHttpResponse

from cohorts.models import Cohort, Decision, Forecast, Snapshot, Trade
from tests.site.conftest import build_arena
from web.exports import files as exports

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
    assert exports.bounds(limit=exports.MAX_LIMIT).limit == exports.MAX_LIMIT
    with pytest.raises(exports.ExportError, match="limit must be a whole number"):
        exports.bounds(limit=10**9)  # past the cap: said, not silently clamped
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
    "query",
    [
        "since=yesterday",
        "since=2026-02-01&until=2026-01-01",
        "limit=0",
        "limit=-1",
        "limit=abc",
        "cohort=x",
        "limit=100001",
        "until=9999-12-31",  # its day-after overflowed the date arithmetic: a 500 before
        "since=0000-01-01",
    ],
)
def test_bad_bounds_are_400(client, db, query):
    response = client.get(f"/exports/trades.csv?{query}")
    assert response.status_code == 400
    assert response.content.decode().count("\n") <= 1  # one line


@pytest.mark.parametrize("what", sorted(exports.SPECS))
@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_extreme_dates_answer_on_every_export(client, db, what, fmt):
    # Both ends of the calendar overflowed (OverflowError, a 500) on all 10 exports.
    assert client.get(f"/exports/{what}.{fmt}?until=9999-12-31").status_code == 400
    first = client.get(f"/exports/{what}.{fmt}?until=0001-01-01")
    assert first.status_code == 200
    assert b"".join(first.streaming_content)  # a header row / an empty document, not an error


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


# --- the /exports/ page, default windows, empty windows, date columns --------------------


def test_exports_page_lists_every_export_with_filters_and_caps(client, arena_world):
    build_arena(arena_world, kind=Cohort.Kind.REPLAY)
    html = client.get("/exports/").content.decode()
    for name, spec in exports.SPECS.items():
        assert f'href="/exports/{name}.csv"' in html and f'href="/exports/{name}.json"' in html
        assert f"/exports/{name}.csv?scope=replay" in html  # the replay scope, all of its time
        assert f"Dates filter <code>{spec.date_column}</code>" in html
    assert "/exports/trades.csv?scope=demo" not in html  # no demo data, no demo link
    for cap in (exports.DEFAULT_LIMIT, exports.MAX_LIMIT, exports.DEFAULT_DAYS):
        assert str(cap) in html
    # The footer leads to this page, not straight into a download.
    home = client.get("/").content.decode()
    assert '<a href="/exports/">Exports</a>' in home and "/exports/decisions.csv" not in home


def _old_cohort(world, kind: str) -> Cohort:
    """A cohort whose rows are a year older than T0: outside any 90-day window of today."""
    cohort = build_arena(world, kind=kind)
    year = cohort.week_start.replace(year=cohort.week_start.year - 1)
    shift = cohort.week_start - year
    Cohort.objects.filter(pk=cohort.pk).update(week_start=year)
    for model, field in [
        (Trade, "executed_at"),
        (Snapshot, "ts"),
        (Forecast, "created_at"),
        (Decision, "decided_at"),
    ]:
        model.objects.filter(entry__cohort=cohort).update(**{field: F(field) - shift})
    return cohort


@pytest.mark.parametrize("kind", [Cohort.Kind.REPLAY, Cohort.Kind.DEMO])
def test_replay_and_demo_exports_default_to_all_of_their_time(client, world, kind):
    cohort = _old_cohort(world, kind)
    doc = json.loads(body(client.get(f"/exports/trades.json?scope={kind}")))
    assert doc["since"] is None and doc["until_exclusive"] is None
    assert "own clock" in doc["window"] and "note" not in doc
    assert len(doc["rows"]) == Trade.objects.filter(entry__cohort=cohort).count() > 0
    by_cohort = json.loads(body(client.get(f"/exports/snapshots.json?cohort={cohort.pk}")))
    assert len(by_cohort["rows"]) == Snapshot.objects.filter(entry__cohort=cohort).count()
    assert not by_cohort["row_cap_reached"]


def test_a_window_that_excludes_everything_says_so_and_where_the_rows_are(client, world):
    _old_cohort(world, Cohort.Kind.REPLAY)
    first = Trade.objects.order_by("executed_at").first().executed_at
    response = client.get("/exports/trades.csv")  # the wall-clock default: the last 90 days
    assert body(response).count("\n") == 1  # the header only
    note = response["X-Export-Note"]
    assert note.startswith("no trades from ") and "(executed_at)" in note
    assert f"there are some from {first:%Y-%m-%d}" in note
    doc = json.loads(body(client.get("/exports/trades.json?scope=live")))
    assert doc["rows"] == [] and doc["note"] == "no trades in scope live yet"
    err = io.StringIO()
    out = io.StringIO()
    call_command("arena", "export", "--what", "trades", stdout=out, stderr=err)
    assert err.getvalue().strip() == note  # the CLI says it beside the (empty) data
    assert "executed_at" in out.getvalue()


def test_decisions_dates_filter_decided_at_the_column_shown(client, world):
    build_arena(world, kind=Cohort.Kind.REPLAY)
    decision = world.decisions[0]
    # A replay decides on its simulated clock: claimed today, decided at the question's due date.
    Decision.objects.filter(pk=decision.pk).update(decided_at=datetime(2025, 3, 2, tzinfo=UTC))
    rows = json.loads(body(client.get("/exports/decisions.json?since=2025-03-02&until=2025-03-02")))
    assert [r["decision_id"] for r in rows["rows"]] == [decision.pk]
    assert rows["rows"][0]["decided_at"].startswith("2025-03-02")
    claimed = f"{decision.claimed_at:%Y-%m-%d}"
    around_claim = client.get(f"/exports/decisions.json?since={claimed}&until={claimed}")
    assert decision.pk not in [r["decision_id"] for r in json.loads(body(around_claim))["rows"]]


def test_the_row_cap_is_reported(client, arena_world):
    doc = json.loads(body(client.get(f"/exports/snapshots.json?{WIDE}&limit=5")))
    assert doc["row_cap_reached"] is True and doc["limit"] == 5


def test_bad_scope_is_400(client, db):
    assert client.get("/exports/trades.csv?scope=moon").status_code == 400


def test_a_decisions_export_streams_in_bounded_memory(client, arena_world):
    # 8 concurrent decision exports took a worker from 673 to 1,120 MB: rows (with prompts of
    # hundreds of kB) were fetched 2,000 at a time. Now a few at a time: the peak while
    # streaming stays a small fraction of the export's size.
    import tracemalloc
    from datetime import timedelta

    from cohorts.models import Decision
    from tests.site.conftest import T0

    entry = arena_world.entries[0]
    prompt = "market line with a question and its prices\n" * 2400  # ~100 kB
    Decision.objects.bulk_create(
        Decision(entry=entry, week=100 + i, status="done", claimed_at=T0 + timedelta(minutes=i),
                 decided_at=T0 + timedelta(minutes=i), user_prompt=prompt,
                 system_prompt="You trade.")
        for i in range(120)
    )  # fmt: skip
    response = client.get("/exports/decisions.json?since=2026-10-01&until=2026-12-31")
    assert response.status_code == 200
    tracemalloc.start()
    try:
        size = sum(len(chunk) for chunk in response.streaming_content)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size > 120 * len(prompt)  # every prompt went out
    assert peak < size / 3, f"peak {peak / 1e6:.1f} MB while streaming {size / 1e6:.1f} MB"
