"""No secrets or staff names in public or sealed records, and the method served with the data."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from agents.endpoint_secrets import refuse_secrets, without_userinfo
from agents.endpoints import EndpointConfigError, parse
from cohorts.seals.canonical import FORMAT, record_hash
from cohorts.seals.events import event_records, log_events
from cohorts.seals.models import EventLogEntry
from cohorts.seals.verify import verify_database
from markets.models import Market
from markets.services import set_resolution

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "raw",
    ["http://user:pw@host:8000/v1|K_KEY", "https://h/v1?api_key=abc", "https://h/v1?token=x|K"],
)
def test_endpoints_with_secrets_are_refused_in_one_line(raw):
    with pytest.raises(EndpointConfigError) as found:
        parse(raw)
    message = str(found.value)
    assert "ARENA_LLM_ENDPOINTS" in message and "URL|KEY_VAR" in message
    assert "pw" not in message and "abc" not in message and "\n" not in message
    refuse_secrets("http://localhost:8000/v1|LOCAL_KEY,https://h/v1?model=x")  # fine
    assert without_userinfo("http://u:p@h:1/v1") == "http://h:1/v1"


@pytest.mark.parametrize(
    "variable, url, shown, fix",
    [
        ("ARENA_LLM_ENDPOINTS", "http://u:pw@h/v1|K_KEY", "http://h/v1", "URL|KEY_VAR"),
        # The default endpoint is recorded with every call to it too.
        ("ARENA_LLM_BASE_URL", "https://h/api/v1?api_key=pw", "https://h/api/v1", "API_KEY"),
    ],
)
def test_manage_py_check_refuses_a_secret_endpoint_before_anything_runs(
    tmp_path, variable, url, shown, fix
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env |= {"ARENA_VAR_DIR": str(tmp_path), variable: url}
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {variable}: {shown} carries a secret"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "pw" not in done.stderr
    assert fix in done.stderr


@pytest.mark.django_db
def test_staff_are_a_pseudonym_in_the_api_and_the_seal_and_old_records_still_verify(client):
    staff = get_user_model().objects.create_user("root", password="x", is_staff=True)
    market = Market.objects.create(external_id="m1", question="Will it?", outcomes=["Up", "Down"])
    set_resolution(market, status="resolved", outcome="Up", user=staff, reason="source says")
    log_events()
    shown = client.get(f"/api/markets/{market.pk}").content.decode()
    assert f'"staff {staff.pk}"' in shown and '"root"' not in shown
    page = client.get(f"/markets/{market.pk}/")  # the public page's audit trail
    assert page.status_code == 200
    assert f"(staff {staff.pk})" in page.content.decode() and "(root)" not in page.content.decode()
    entry = EventLogEntry.objects.get(kind="resolution")
    sealed = json.loads(entry.record_bytes())
    assert sealed["changed_by"] == f"staff {staff.pk}" and sealed["format"] == "arena-seal/4"
    # A resolution logged before pseudonyms (format /1, by username) still verifies as it was.
    event = event_records("resolution", [entry.ref])[entry.ref]
    assert event.legacy is not None and event.legacy["changed_by"] == "root"
    assert event.legacy["format"] == FORMAT
    assert event.as_logged(record_hash(event.legacy)) is event.legacy
    assert verify_database().ok


@pytest.mark.django_db
def test_the_method_is_served_next_to_the_data_with_its_hashes(client):
    index = client.get("/method/").content.decode()
    verifier = (ROOT / "docs" / "examples" / "verify_export.py").read_bytes()
    assert hashlib.sha256(verifier).hexdigest() in index
    raw = client.get("/method/examples/verify_export.py")
    assert raw.status_code == 200 and raw.content == verifier
    page = client.get("/method/verification").content.decode()
    assert "<h1" in page and "Verifying the arena" in page and "<script>alert" not in page
    assert client.get("/method/../arena/settings.py").status_code == 404
    assert client.get("/method/nothing.md").status_code == 404
    listed = {f["name"]: f["sha256"] for f in client.get("/api/seals").json()["method_files"]}
    assert (
        listed["verification.md"]
        == hashlib.sha256((ROOT / "docs" / "verification.md").read_bytes()).hexdigest()
    )
    assert "/method/" in client.get("/exports/").content.decode()
