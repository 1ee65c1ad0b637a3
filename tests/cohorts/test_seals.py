"""Sealed weeks: canonical records, chains, roots, amendments, the event log, verify, publishing.

The decisions run through the real pipeline (baselines answer through the same path as models;
one test uses the fake OpenRouter server), and every tampering is done the way an operator with
database access would: through the ORM or raw SQL.
"""

from __future__ import annotations

import http.server
import json
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from cohorts.decisions.run import decide, run_decision
from cohorts.models import Cohort, Decision, Forecast, LedgerEntry, LLMCall, Settlement, Trade
from cohorts.seals import publish as seal_publish
from cohorts.seals import sealing as seals
from cohorts.seals.models import (
    AppendOnlyError,
    DecisionDigest,
    EventLogEntry,
    SealPublication,
    WeekSeal,
)
from cohorts.seals.verify import export_chunks, verify_database, verify_export
from cohorts.services import mark_decisions_retryable
from cohorts.tasks import snapshot
from cohorts.universe import freeze_universe
from markets.resolution import record_resolution
from markets.services import set_resolution
from tests.agents.helpers import (
    AT,
    answer,
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import success, unauthorized

pytestmark = pytest.mark.django_db


@pytest.fixture
def markets():
    return make_markets(6)


@pytest.fixture
def week(markets):
    """A live cohort of three baselines (two of them bet), decided and so sealed."""
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "market")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    return cohort


def _problem(report) -> str:
    assert report.problems, "verify passed but should have failed"
    return report.problems[0]


def _export(cohort=None) -> dict:
    return json.loads("".join(export_chunks(cohort)))


# --- canonical JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1"),
        (0.1, "0.1"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (1e21, "1e+21"),
        (1.2345678901234568e20, "123456789012345680000"),
        (-2.5e-10, "-2.5e-10"),
        (5e-324, "5e-324"),
        (0.0, "0"),
        (2**60, "1152921504606847000"),  # beyond 2**53 an integer is a double, as in JCS
    ],
)
def test_numbers_are_printed_as_ecmascript_does(value, text):
    assert seals.canonical(value).decode() == text


def test_canonical_json_sorts_keys_by_utf16_and_escapes_only_what_it_must():
    # U+1F600 (a surrogate pair in UTF-16) sorts before U+FB01, though its code point is higher.
    value = {"b": [True, None], "a": 'é\n"/', "\ufb01": 1, "\U0001f600": 2}
    text = seals.canonical(value).decode()
    assert text == '{"a":"é\\n\\"/","b":[true,null],"\U0001f600":2,"\ufb01":1}'
    with pytest.raises(TypeError):
        seals.canonical({"x": Decimal("1.00")})  # money is put into a string first


# --- sealing ------------------------------------------------------------------------------------


def test_a_decided_week_is_sealed_in_entry_order_and_verifies(week):
    (seal,) = WeekSeal.objects.filter(cohort=week)
    digests = list(DecisionDigest.objects.filter(cohort=week).order_by("seq"))
    entries = list(week.entries.order_by("id").values_list("id", flat=True))
    assert seal.reason == "complete" and seal.count == len(entries) == 3
    assert [d.entry_id for d in digests] == entries
    assert seal.root == digests[-1].link
    # The chain as an outsider recomputes it, from the genesis on.
    universe = week.universes.get(week=1)
    prev = seals.record_hash(seals.genesis_record(week, 1, universe.content_hash))
    for n, d in enumerate(digests, 1):
        record = json.loads(d.record_bytes())
        assert seals.record_hash(record) == d.record_hash
        assert d.prev == prev and seals.link_hash(prev, d.record_hash, n) == d.link
        prev = d.link
    record = json.loads(digests[0].record_bytes())
    assert record["decision"]["user_prompt"] and record["llm_calls"][0]["raw_response"]
    assert Trade.objects.filter(entry__cohort=week).exists()
    assert verify_database().ok


def test_rerunning_decide_and_snapshot_never_changes_a_sealed_root(week, markets):
    before = list(WeekSeal.objects.values_list("pk", "root"))
    digests = DecisionDigest.objects.count()
    decide(cohort=week, week=1, at=AT, sync=True)
    decide(cohort=week, week=1, at=AT + timedelta(hours=1), sync=True)
    snapshot()
    snapshot()
    run_decision(week.entries.first().pk, 1, AT)
    assert list(WeekSeal.objects.values_list("pk", "root")) == before
    assert DecisionDigest.objects.count() == digests
    assert verify_database().ok


# --- tampering: each edit is named by verify --------------------------------------------------


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _edit_reasoning(cohort):
    d = Decision.objects.filter(entry__cohort=cohort).order_by("id").first()
    Decision.objects.filter(pk=d.pk).update(reasoning=d.reasoning + " (edited)")
    return d.pk, "decision.reasoning"


def _edit_raw_response(cohort):
    call = LLMCall.objects.filter(decision__entry__cohort=cohort).order_by("id").last()
    call.raw_response = call.raw_response.replace("}", " }", 1)
    call.save()
    return call.decision_id, "llm_calls[0].raw_response"


def _edit_trade_amount_sql(cohort):
    trade = Trade.objects.filter(entry__cohort=cohort).order_by("id").first()
    _sql("UPDATE cohorts_trade SET amount = %s WHERE id = %s", [str(trade.amount + 1), trade.pk])
    return trade.decision_id, "trades[0].amount"


def _edit_ledger_sql(cohort):
    row = LedgerEntry.objects.filter(entry__cohort=cohort, trade__isnull=False).first()
    _sql("UPDATE cohorts_ledgerentry SET memo = %s WHERE id = %s", ["moved", row.pk])
    return row.trade.decision_id, "trades[0].ledger[0].memo"


def _reorder_forecasts_sql(cohort):
    """Swap which market two forecasts of one decision were about: same rows, new order."""
    d = Decision.objects.filter(entry__cohort=cohort, forecasts__isnull=False).first()
    a, b = Forecast.objects.filter(decision=d).order_by("id")[:2]
    table = "UPDATE agents_forecast SET market_id = %s, outcome = %s WHERE id = %s"
    _sql(table, [b.market_id, "(swapping)", a.pk])  # (decision, market, outcome) is unique
    _sql(table, [a.market_id, b.outcome, b.pk])
    _sql(table, [b.market_id, a.outcome, a.pk])
    return d.pk, "forecasts[0].market"


def _reorder_calls_sql(cohort):
    """Renumber a decision's model calls (initial and repair swapped)."""
    call = LLMCall.objects.filter(decision__entry__cohort=cohort).order_by("id").first()
    _sql("UPDATE agents_llmcall SET attempt = %s WHERE id = %s", [7, call.pk])
    return call.decision_id, "llm_calls[0].attempt"


@pytest.mark.parametrize(
    "edit",
    [
        _edit_reasoning,
        _edit_raw_response,
        _edit_trade_amount_sql,
        _edit_ledger_sql,
        _reorder_forecasts_sql,
        _reorder_calls_sql,
    ],
)
def test_any_edit_after_sealing_makes_verify_fail_naming_the_record(week, edit):
    assert verify_database().ok
    decision_id, path = edit(week)
    problem = _problem(verify_database(week.pk))
    assert f"decision {decision_id} " in problem and path in problem
    # The export built from the edited database carries the edit: an outsider sees it too.
    problem = _problem(verify_export(_export(week.pk)))
    assert f"decision {decision_id} " in problem and "does not match its sealed hash" in problem


def test_changing_an_entrys_identity_is_caught(week):
    a = week.entries.order_by("id").first()
    _sql("UPDATE cohorts_entry SET replicate = %s WHERE id = %s", [9, a.pk])
    assert "entry.replicate" in _problem(verify_database(week.pk))


def test_a_tampered_export_file_fails_without_the_database(week, tmp_path, capsys, client):
    doc = _export(week.pk)
    path = tmp_path / "seals.json"
    path.write_text(json.dumps(doc))
    call_command("arena", "verify", "--export", str(path))
    assert "ok: 1 sealed weeks" in capsys.readouterr().out
    digest = doc["cohorts"][0]["weeks"][0]["digests"][1]
    digest["record"]["decision"]["reasoning"] = "rewritten after the outcome"
    path.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=f"decision {digest['decision']} .*sealed hash"):
        call_command("arena", "verify", "--export", str(path))
    # Re-hashing the record and its links leaves a root the signed event log does not hold,
    # and one that differs from the roots published earlier.
    published = tmp_path / "published.json"
    published.write_bytes(client.get("/api/seals").content)
    _rehash(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match="is not the root the event log live sealed"):
        call_command("arena", "verify", "--export", str(path))
    with pytest.raises(CommandError, match="differs from the published one"):
        call_command("arena", "verify", "--export", str(path), "--published", str(published))


def _rehash(doc):
    for cohort in doc["cohorts"]:
        for week in cohort["weeks"]:
            prev = seals.record_hash(week["genesis"])
            for n, d in enumerate(week["digests"], 1):
                d["record_hash"] = seals.record_hash(d["record"])
                d["prev"], d["link"] = prev, seals.link_hash(prev, d["record_hash"], n)
                prev = d["link"]
            for s in week["seals"]:
                s["root"] = week["digests"][s["count"] - 1]["link"]


def test_verify_command_exits_non_zero_with_a_one_line_reason(week, tmp_path):
    call_command("arena", "verify", "--cohort", str(week.pk))
    _edit_reasoning(week)
    with pytest.raises(CommandError, match=r"verify FAILED: cohort \d+ week 1: decision \d+"):
        call_command("arena", "verify")
    with pytest.raises(CommandError, match="no cohort with id 999"):
        call_command("arena", "verify", "--cohort", "999")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="is not JSON"):
        call_command("arena", "verify", "--export", str(bad))
    bad.write_text('{"format": "something else"}')
    with pytest.raises(CommandError, match="not a usable seal export"):
        call_command("arena", "verify", "--export", str(bad))


# --- append-only ---------------------------------------------------------------------------------


def test_seal_rows_refuse_changes_through_the_orm_and_sql(week):
    seal = WeekSeal.objects.get(cohort=week)
    digest = DecisionDigest.objects.filter(cohort=week).first()
    with pytest.raises(AppendOnlyError):
        seal.save()
    with pytest.raises(AppendOnlyError):
        WeekSeal.objects.filter(pk=seal.pk).update(root="0" * 64)
    with pytest.raises(AppendOnlyError):
        digest.delete()
    with pytest.raises(AppendOnlyError):
        DecisionDigest.objects.filter(cohort=week).delete()
    with pytest.raises(DatabaseError), transaction.atomic():
        _sql("UPDATE cohorts_weekseal SET root = %s WHERE id = %s", ["0" * 64, seal.pk])
    # A sealed decision or cohort cannot be deleted out from under its seal either.
    with pytest.raises(Exception, match="protected"), transaction.atomic():
        Decision.objects.filter(pk=digest.decision_id).delete()


@pytest.mark.postgres
def test_postgres_refuses_deleting_live_seal_rows_with_raw_sql(week):
    for table in ("cohorts_weekseal", "cohorts_decisiondigest"):
        with pytest.raises(DatabaseError, match="never deleted"), transaction.atomic():
            _sql(f"DELETE FROM {table} WHERE cohort_id = %s", [week.pk])


# --- late decisions, amendments, staff re-runs --------------------------------------------------


def test_a_week_not_final_by_the_deadline_is_sealed_and_the_late_decision_amends_it(markets):
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random")])
    freeze_universe(cohort, 1, AT)
    first, late = cohort.entries.order_by("id")
    run_decision(first.pk, 1, AT)
    assert not WeekSeal.objects.exists()  # one entry still to decide
    frozen = cohort.universes.get().frozen_at
    assert seals.seal_due(frozen + timedelta(minutes=59))["sealed"] == 0  # inside the grace
    assert seals.seal_due(frozen + timedelta(minutes=61))["sealed"] == 1
    (seal,) = WeekSeal.objects.all()
    assert seal.reason == "deadline"
    assert list(DecisionDigest.objects.values_list("state", flat=True)) == ["final", "pending"]
    run_decision(late.pk, 1, AT + timedelta(hours=2))
    amendment = WeekSeal.objects.get(seq=2)
    assert amendment.reason == "amendment" and amendment.count == 3
    assert WeekSeal.objects.get(seq=1).root == seal.root  # the first root stands
    assert DecisionDigest.objects.get(seq=3).amendment
    report = verify_database()
    assert report.ok and not report.notes


def test_a_market_about_to_settle_seals_its_unsealed_week_first(markets):
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random")])
    freeze_universe(cohort, 1, AT)
    first, _ = cohort.entries.order_by("id")
    run_decision(first.pk, 1, AT)
    traded = Trade.objects.filter(entry=first).first().position.market
    # Through the one resolution service: a market resolved behind its back is itself a verify
    # failure now (test_seal_coverage.py).
    record_resolution(traded, status="resolved", outcome="Yes", by="admin", reason="settles")
    seal = WeekSeal.objects.get()
    settlement = Settlement.objects.get()
    assert seal.reason == "settlement"  # taken in the settlement's transaction, before paying
    assert list(DecisionDigest.objects.values_list("state", flat=True)) == ["final", "pending"]
    logged = EventLogEntry.objects.get(kind="settlement")
    assert logged.ref == settlement.pk and logged.scope == "live"
    assert verify_database().ok
    _sql("UPDATE cohorts_settlement SET payout = payout + 1 WHERE id = %s", [settlement.pk])
    problem = _problem(verify_database())
    assert f"settlement {settlement.pk}" in problem and "payout" in problem


def test_staff_resolution_changes_are_chained_and_checked(week, admin_user):
    market = Trade.objects.filter(entry__cohort=week).first().position.market
    set_resolution(
        market, status="resolved", outcome="No", user=admin_user, reason="source says no"
    )
    set_resolution(market, status="resolved", outcome="Yes", user=admin_user, reason="corrected")
    log = list(EventLogEntry.objects.filter(scope="live").order_by("seq"))
    kinds = [e.kind for e in log]
    assert kinds.count("resolution") == 2 and "settlement" in kinds and "reversal" in kinds
    assert verify_database().ok
    change = market.resolution_changes.order_by("id").first()
    _sql("UPDATE markets_resolutionchange SET reason = %s WHERE id = %s", ["quiet", change.pk])
    problem = _problem(verify_database())
    assert f"resolution {change.pk}" in problem and "reason" in problem


def test_a_failed_decision_rerun_by_staff_after_the_seal_is_an_amendment(model_server, markets):
    cohort = make_cohort([llm_competitor(model_server)])
    entry = cohort.entries.get()
    model_server.enqueue(unauthorized())
    assert run_decision(entry.pk, 1, AT).status == Decision.Status.FAILED
    sealed = WeekSeal.objects.get()
    failed_record = json.loads(DecisionDigest.objects.get().record_bytes())
    assert failed_record["decision"]["status"] == "failed"
    mark_decisions_retryable(Decision.objects.filter(entry=entry))
    # While it runs again, verify says so instead of failing.
    assert any("awaiting its amendment" in n for n in verify_database().notes)
    model_server.enqueue(success(answer(cohort.universes.get())))
    decision = run_decision(entry.pk, 1, AT)
    assert decision.status == Decision.Status.DONE
    amendment = WeekSeal.objects.get(seq=2)
    assert amendment.reason == "amendment" and WeekSeal.objects.get(seq=1).root == sealed.root
    new = json.loads(DecisionDigest.objects.get(seq=2).record_bytes())
    # The re-run kept the failed call: the amendment's calls extend the sealed ones.
    assert new["llm_calls"][: len(failed_record["llm_calls"])] == failed_record["llm_calls"]
    assert len(new["llm_calls"]) > len(failed_record["llm_calls"])
    assert verify_database().ok
    assert verify_export(_export()).ok


def test_a_skip_retried_by_the_catch_up_changes_nothing_until_it_runs(markets, settings):
    # The endpoint is allowed; its key variable is unset, so the entry is skipped for that.
    settings.ARENA_LLM_ENDPOINTS = f"{settings.ARENA_LLM_BASE_URL}|ARENA_TEST_MISSING_KEY"
    cohort = make_cohort([llm_competitor(None, api_key_env="ARENA_TEST_MISSING_KEY")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    assert Decision.objects.get().status == Decision.Status.SKIPPED
    assert "ARENA_TEST_MISSING_KEY" in Decision.objects.get().error
    decide(cohort=cohort, week=1, at=AT + timedelta(minutes=15), sync=True)  # skipped again
    assert WeekSeal.objects.count() == 1 and DecisionDigest.objects.count() == 1
    assert verify_database().ok


# --- exports, API and pages ------------------------------------------------------------------------


def _streamed(response) -> bytes:
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def test_every_export_carries_the_seal_hashes(week, client):
    digest = DecisionDigest.objects.filter(cohort=week).order_by("seq").first()
    seal = WeekSeal.objects.get(cohort=week)
    span = "since=2026-01-01&until=2026-12-31"
    rows = json.loads(_streamed(client.get(f"/exports/decisions.json?{span}")))["rows"]
    row = next(r for r in rows if r["decision_id"] == digest.decision_id)
    assert row["record_hash"] == digest.record_hash and row["week_root"] == seal.root
    for what in ("trades", "forecasts"):
        rows = json.loads(_streamed(client.get(f"/exports/{what}.json?{span}")))["rows"]
        assert rows and all(r["decision_hash"] for r in rows)
    snapshot()  # the tick runs with the wall clock, after this 2026 week: snapshots exist
    text = _streamed(client.get(f"/exports/snapshots.json?cohort={week.pk}&{span}"))
    rows = json.loads(text)["rows"]
    assert rows and {r["cohort_root"] for r in rows} == {seals.cohort_root(week.pk)}
    header = _streamed(client.get(f"/exports/snapshots.csv?{span}")).splitlines()[0]
    assert header.endswith(b",cohort_root")
    assert client.get("/exports/seals.csv").status_code == 400
    doc = json.loads(_streamed(client.get(f"/exports/seals.json?cohort={week.pk}")))
    assert verify_export(doc).ok


def test_seals_feed_cohort_page_and_decision_page_show_the_hashes(week, client):
    seal = WeekSeal.objects.get(cohort=week)
    digest = DecisionDigest.objects.filter(cohort=week).order_by("seq").first()
    feed = client.get("/api/seals").json()
    (item,) = feed["seals"]
    assert item["root"] == seal.root and item["cohort"] == {"id": week.pk, "kind": "live"}
    assert [d["record_hash"] for d in item["digests"]][0] == digest.record_hash
    assert client.get("/api/seals?kind=demo").json()["seals"] == []
    assert client.get("/api/seals?cohort=abc").json() == {
        "error": f"cohort must be a whole number from 1 to {2**62}"
    }
    assert client.get("/api/seals?kind=moon").status_code == 400
    page = client.get(f"/cohorts/{week.pk}/").content.decode()
    assert f'<code class="hash">{seal.root}</code>' in page
    page = client.get(f"/decisions/{digest.decision_id}/").content.decode()
    assert f'<code class="hash">{digest.record_hash}</code>' in page
    api = client.get(f"/api/decisions/{digest.decision_id}").json()
    assert api["seal"]["record_hash"] == digest.record_hash
    assert api["seal"]["roots"][0]["root"] == seal.root


# --- publishing --------------------------------------------------------------------------------


class _Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((json.loads(body), self.headers.get("Authorization")))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    httpd.received, httpd.statuses = [], []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def test_new_roots_are_posted_to_the_configured_url(
    receiver, settings, markets, django_capture_on_commit_callbacks
):
    settings.ARENA_SEAL_PUBLISH_URL = f"http://127.0.0.1:{receiver.server_address[1]}/roots"
    settings.ARENA_SEAL_PUBLISH_TOKEN = "t0ken"
    settings.ARENA_SEAL_PUBLISH_BACKOFF = 0.01
    receiver.statuses = [503]  # one transient failure, then accepted
    cohort = make_cohort([baseline_competitor("favorite")])
    with django_capture_on_commit_callbacks(execute=True):
        decide(cohort=cohort, week=1, at=AT, sync=True)
    seal = WeekSeal.objects.get()
    body, auth = receiver.received[-1]
    assert len(receiver.received) == 2 and auth == "Bearer t0ken"
    assert body["root"] == seal.root and body["cohort"] == cohort.pk and body["seq"] == 1
    # The scope's newest signed checkpoint rides along, and its log holds this root.
    assert body["checkpoint"]["scope"] == "live" and body["checkpoint"]["size"] >= 1
    pub = SealPublication.objects.get()
    assert pub.published_at is not None and pub.attempts == 2 and pub.error == ""
    assert seal_publish.publish_pending() == {"published": 0, "failed": 0}  # once only


def test_a_refused_publication_is_retried_by_the_tick(receiver, settings, markets):
    settings.ARENA_SEAL_PUBLISH_URL = f"http://127.0.0.1:{receiver.server_address[1]}/roots"
    settings.ARENA_SEAL_PUBLISH_BACKOFF = 0.01
    receiver.statuses = [400]
    cohort = make_cohort([baseline_competitor("favorite")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    assert seal_publish.publish_pending() == {"published": 0, "failed": 1}
    assert "HTTP 400" in SealPublication.objects.get().error
    assert seals.upkeep()["published"] == {"published": 1, "failed": 0}
    assert SealPublication.objects.get().published_at is not None


def test_publishing_is_off_by_default(week):
    assert seal_publish.publish_pending() == {"published": 0, "failed": 0}
    assert not SealPublication.objects.exists()


def test_cohort_kind_scopes_are_kept_apart(markets):
    demo = make_cohort([baseline_competitor("favorite")], kind=Cohort.Kind.DEMO)
    decide(cohort=demo, week=1, at=AT, sync=True)
    assert WeekSeal.objects.get().scope == "demo"
    # the digest and the seal; the seal's event, the cohort's state, the competitor's identity
    # and the entry with their three events, and the log's signed checkpoint
    assert seals.delete_sealed("demo") == 10
    with pytest.raises(ValueError):
        seals.delete_sealed("live")
