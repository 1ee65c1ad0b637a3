"""docs/deploy.md's single-host steps as written: the production env block is a file that
`deploy/arena-manage` (and systemd's EnvironmentFile=) reads as it stands, comments and all, and
every shell block of the single-host path and of docs/rehearsal.md is valid shell."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()
FENCE = re.compile(r"^```(?:sh)?\n(.*?)^```", re.S | re.M)
SH = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _env_block() -> str:
    blocks = FENCE.findall(_section(DEPLOY, "Production environment"))
    return next(b for b in blocks if b.startswith("DEBUG=0"))


def _manage(env_file: Path, code: str) -> dict:
    env = {**os.environ, "ARENA_ENV_FILE": str(env_file)}
    for key in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "ARENA_LLM_ENDPOINTS"):
        env.pop(key, None)  # only the file may set them
    done = subprocess.run(
        [str(ROOT / "deploy" / "arena-manage"), "shell", "-c", code],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


READ = (
    "import json, os; from django.conf import settings; print(json.dumps({'debug': "
    "settings.DEBUG, 'hosts': settings.ALLOWED_HOSTS, 'db': settings.DATABASES['default']"
    "['NAME'], 'endpoints': os.environ.get('ARENA_LLM_ENDPOINTS'), 'proxies': "
    "os.environ.get('ARENA_TRUSTED_PROXIES')}))"
)


def test_the_documented_env_file_loads_as_written(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text(_env_block())
    seen = _manage(env_file, READ)
    assert seen == {"debug": False, "hosts": ["arena.example.org"], "db": "arena",
                    "endpoints": "", "proxies": "1"}  # fmt: skip


def test_an_endpoint_list_with_a_key_variable_survives_the_loader(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text(
        _env_block().replace(
            "ARENA_LLM_ENDPOINTS=\n",
            "  # an indented comment\nARENA_LLM_ENDPOINTS=http://127.0.0.1:8001/v1|LOCAL_LLM_KEY\n",
        )
    )
    assert _manage(env_file, READ)["endpoints"] == "http://127.0.0.1:8001/v1|LOCAL_LLM_KEY"


def test_every_shell_block_of_the_single_host_path_and_the_rehearsal_is_valid_shell():
    blocks = FENCE.findall(_section(DEPLOY, "Single host"))
    rehearsal = (ROOT / "docs" / "rehearsal.md").read_text()
    blocks += FENCE.findall(rehearsal)
    assert len(blocks) >= 7
    # The ones tests/arena/test_deploy_docs_run.py runs are marked sh: every one.
    assert SH.findall(_section(DEPLOY, "Single host")) == FENCE.findall(
        _section(DEPLOY, "Single host"))
    assert SH.findall(rehearsal) == FENCE.findall(rehearsal)
    for block in blocks:
        script = block.replace("<repo>", "https://example.org/arena.git")
        done = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True,
                              check=False)  # fmt: skip
        assert done.returncode == 0, f"{done.stderr}\n{block}"
    assert "arena manage" not in rehearsal  # not a verb: ./run manage or manage.py
