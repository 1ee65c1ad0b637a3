"""`arena standin` as an operator runs it: a process serving the Polymarket stand-in and the
simulated models on loopback, on a fast clock when the arena's clock variables say so, stopped
by Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import requests

from simulations.simmodels import CHARACTERS
from tests.faults.conftest import wait_until
from tests.fixtures import interruptible

ROOT = Path(__file__).resolve().parents[2]


def test_the_standin_serves_markets_and_models_on_a_fast_clock_until_ctrl_c(tmp_path):
    out = tmp_path / "standin.out"
    env = {**os.environ, "ARENA_VAR_DIR": str(tmp_path), "ARENA_CLOCK_RATE": "5040",
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "arena", "standin", "--world-port", "0",
             "--models-port", "0", "--markets", "20"],
            cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=interruptible,
        )  # fmt: skip
    try:
        text = wait_until(
            lambda: "point the arena at them" in out.read_text() and out.read_text(),
            60, "the stand-in's addresses",
        )  # fmt: skip
        assert "on rate 5040" in text, text
        world = re.search(r"ARENA_GAMMA_URL=(\S+)", text).group(1)
        models = re.search(r"simulated models at (\S+):", text).group(1)

        page = requests.get(f"{world}/markets/keyset", params={"limit": 5}, timeout=10)
        assert page.status_code == 200 and page.json()["markets"]  # listed ones, open now
        model = next(iter(CHARACTERS))
        body = {"model": model, "messages": [{"role": "user", "content": "Say HOLD."}]}
        answer = requests.post(f"{models}/chat/completions", json=body, timeout=60)
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    assert "stopped" in out.read_text()


def test_a_bad_option_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "arena", "standin", "--markets", "3"],
        cwd=ROOT, env={**os.environ, "ARENA_VAR_DIR": str(tmp_path)}, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--markets must be between 10 and 2000" in done.stderr
