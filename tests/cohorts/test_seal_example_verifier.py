"""The documented standard-library verifier (docs/examples/verify_export.py) passes on a demo
export and fails on each forgery, run as an outsider would: a separate Python process with
nothing of the arena importable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cohorts.seals.canonical import link_hash, record_hash
from cohorts.seals.records import events_genesis_record
from cohorts.seals.verify import export_chunks
from tests.cohorts.forgery import resign_export

pytestmark = pytest.mark.django_db

VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "examples" / "verify_export.py"


def _run(tmp_path, doc, *saved) -> tuple[int, str]:
    paths = []
    for n, item in enumerate((doc, *saved)):
        path = tmp_path / f"{n}.json"
        path.write_text(json.dumps(item))
        paths.append(str(path))
    done = subprocess.run(
        [sys.executable, "-I", str(VERIFIER), *paths],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # -I and a foreign directory: the arena's modules are not importable
    )
    return done.returncode, done.stdout + done.stderr


def _relink(entries, genesis: str) -> None:
    prev = genesis
    for n, e in enumerate(entries, 1):
        e["record_hash"] = record_hash(e["record"])
        e["prev"], e["link"] = prev, link_hash(prev, e["record_hash"], n)
        prev = e["link"]


def test_the_example_verifier_passes_a_demo_export_and_fails_each_forgery(
    small_demo, client, tmp_path
):
    doc = json.loads("".join(export_chunks(kind="demo")))
    saved = client.get("/api/seals?kind=demo").json()
    code, out = _run(tmp_path, doc, saved)
    assert code == 0 and out.startswith("ok: ") and " checkpoints" in out, out
    assert doc["checkpoints"] and saved["checkpoints"]

    # A decision's reasoning rewritten.
    forged = json.loads(json.dumps(doc))
    digest = forged["cohorts"][0]["weeks"][0]["digests"][0]
    digest["record"]["decision"]["reasoning"] = "rewritten"
    code, out = _run(tmp_path, forged)
    assert code == 1 and "does not match its hash" in out

    # A payout rewritten with the event chain recomputed: consistent on its own, but not the
    # log the saved checkpoint and head describe.
    forged = json.loads(json.dumps(doc))
    log = forged["event_logs"][0]
    settlement = next(e for e in log["entries"] if e["kind"] == "settlement")
    settlement["record"]["payout"] = "999.00"
    _relink(log["entries"], record_hash(events_genesis_record(log["scope"])))
    resign_export(forged)  # the insider holds the key
    assert _run(tmp_path, forged)[0] == 0
    code, out = _run(tmp_path, forged, saved)
    assert code == 1 and "does not begin with the saved one" in out

    # A checkpoint whose signed fields were changed.
    bad = json.loads(json.dumps(saved))
    bad["checkpoints"][0]["size"] -= 1
    bad["event_logs"] = []
    code, out = _run(tmp_path, doc, bad)
    assert code == 1 and "signature does not verify" in out


def test_the_example_verifier_accepts_score_run_events(small_demo, tmp_path):
    """The demo's score run is in its event log; the outsider's verifier checks it like any
    other record, and a published digest rewritten in the export is a broken hash."""
    doc = json.loads("".join(export_chunks(kind="demo")))
    log = next(log for log in doc["event_logs"] if log["scope"] == "demo")
    runs = [e for e in log["entries"] if e["kind"] == "score_run"]
    assert runs and runs[-1]["record"]["type"] == "score_run"
    assert set(runs[-1]["record"]["published"]) == {"run", "rows", "rows_digest", "row_hashes"}
    code, out = _run(tmp_path, doc)
    assert code == 0 and out.startswith("ok: "), out

    forged = json.loads(json.dumps(doc))
    log = next(log for log in forged["event_logs"] if log["scope"] == "demo")
    run = next(e for e in log["entries"] if e["kind"] == "score_run")
    run["record"]["published"]["rows_digest"] = "0" * 64
    code, out = _run(tmp_path, forged)
    assert code == 1 and "does not match its hash" in out, out
