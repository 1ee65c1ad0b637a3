"""One deployment, two processes, two var directories: the signer (here `arena demo`) and a
process that serves /api/seals. With one configured key file both use the same key, and the
served checkpoints verify against the database with `--published`; a server given its own key
withholds checkpoints and says why on /healthz."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVE = (
    "from django.test import Client; import json, sys; c = Client(); "
    "sys.stdout.write(json.dumps({'seals': c.get('/api/seals').json(), "
    "'health': c.get('/healthz').json()}))"
)

# An export read while another connection renames a competitor through the application (a new
# identity record, signed), between the export's read of the log and of what the site shows: on
# a SQLite file, as `./run up` keeps it, the export still agrees with itself.
EXPORT_WHILE_WRITING = """
import json, threading
from django.db import connection
from cohorts.models import Entry
from cohorts.seals.verify import export_chunks, verify_export
competitor = Entry.objects.filter(cohort__kind="demo").first().competitor
chunks = export_chunks(kind="demo")
parts = []
for chunk in chunks:
    parts.append(chunk)
    if chunk.lstrip().startswith('{"scope": "demo"'):
        break
def rename():
    competitor.display_name = "Renamed while the export was read"
    competitor.save()
    connection.close()
thread = threading.Thread(target=rename)
thread.start()
thread.join()
doc = json.loads("".join([*parts, *chunks]))
shown = [c["state"]["display_name"] for c in doc["current"]["competitors"]]
print(json.dumps({"problems": verify_export(doc).problems, "shown": shown,
                  "now": type(competitor).objects.get(pk=competitor.pk).display_name}))
"""


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


@pytest.mark.own_sqlite
def test_two_processes_with_one_configured_key_verify_with_published(tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "DATABASE_URL"))}
    base["DATABASE_URL"] = f"sqlite:///{tmp_path / 'arena.sqlite3'}"
    key = tmp_path / "keys" / "seal_signing.key"
    signer = {**base, "ARENA_VAR_DIR": str(tmp_path / "a"), "ARENA_SEAL_SIGNING_KEY_FILE": str(key)}
    server = {**signer, "ARENA_VAR_DIR": str(tmp_path / "b")}
    done = _run(signer, "arena", "demo", "--weeks", "1", "--markets", "12", "--latency-scale", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    served = _run(server, "shell", "-v", "0", "-c", SERVE)
    assert served.returncode == 0, served.stderr[-2000:]
    doc = json.loads(served.stdout)
    assert doc["health"]["signing_key"]["status"] == "ok"
    assert doc["seals"]["checkpoints"], doc["seals"].get("checkpoints_withheld")
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(doc["seals"]))
    checked = _run(signer, "arena", "verify", "--published", str(saved))
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stderr

    # The export reads one snapshot while the signer's database takes a write.
    done = _run(server, "shell", "-v", "0", "-c", EXPORT_WHILE_WRITING)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["problems"] == [] and found["now"] == "Renamed while the export was read", found
    assert found["now"] not in found["shown"]

    # The same server without the configured key makes a key of its own: it serves nothing.
    alone = {**server, "ARENA_VAR_DIR": str(tmp_path / "c")}  # its own page cache too
    alone.pop("ARENA_SEAL_SIGNING_KEY_FILE")
    doc = json.loads(_run(alone, "shell", "-v", "0", "-c", SERVE).stdout)
    assert doc["seals"]["checkpoints"] == []
    assert "not the arena's latest key" in doc["health"]["signing_key"]["why"]
    assert "not the arena's latest key" in doc["seals"]["checkpoints_withheld"]


def test_compose_gives_every_arena_container_one_key_on_a_volume_of_its_own():
    """The shipped compose once let each container make its own key, anew on every recreate:
    every container built from the arena's image reads one key file, on a named volume (shared,
    kept across recreates), made once by the migrate service before the others start."""
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    arena = {name: svc for name, svc in compose["services"].items() if "build" in svc}
    assert {"migrate", "web", "worker", "beat"} <= set(arena)
    files = {svc["environment"]["ARENA_SEAL_SIGNING_KEY_FILE"] for svc in arena.values()}
    assert len(files) == 1
    folder = str(Path(files.pop()).parent)
    for name, svc in arena.items():
        mounts = {v.split(":")[1]: v.split(":")[0] for v in svc.get("volumes", [])}
        assert mounts.get(folder) in compose["volumes"], name
    assert "arena signing-key" in " ".join(arena["migrate"]["command"])
    for name in ("web", "worker", "beat"):
        assert arena[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
