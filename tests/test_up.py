"""`arena up` is the product's front door: launch the real command and talk to it over HTTP."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures import interruptible


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_http(url: str, proc: subprocess.Popen, timeout: float = 180.0) -> int:
    # A readiness wait, not a speed target: a CI machine at load 10+ took over 60 s to migrate,
    # start gunicorn, a worker and beat; an early exit still fails at once (proc.poll below).
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"arena up exited early with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status
        except Exception as exc:  # not up yet
            last_error = exc
            time.sleep(0.2)
    raise AssertionError(f"{url} never answered: {last_error}")


@pytest.mark.slow
@pytest.mark.own_sqlite
def test_arena_up_serves_home_and_stops_cleanly(tmp_path):
    port = _free_port()
    env = dict(os.environ)
    env.update(
        ARENA_VAR_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path / 'up.sqlite3'}",
        CELERY_BROKER_URL="filesystem://",
        DEBUG="1",
    )
    arena = Path(sys.executable).parent / "arena"
    proc = subprocess.Popen(
        [str(arena), "up", "--port", str(port)],
        preexec_fn=interruptible,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    said = bytearray()
    up = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            said.extend(line)
            if b"arena is up" in line:
                up.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert _wait_for_http(f"http://127.0.0.1:{port}/", proc) == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.status == 200
        assert (tmp_path / "up.sqlite3").exists()  # it migrated the configured database
        # The web answers before the worker and beat are ready; "arena is up" waits for them,
        # and a Ctrl-C any time after it must stop all three cleanly.
        assert up.wait(180), said.decode(errors="replace")[-3000:]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("arena up did not stop within 30 s of Ctrl-C") from None
        reader.join(10)
    text = said.decode(errors="replace")
    assert "arena is up" in text
    # Beat logs its start before the signal that says it is ready: never after "arena is up".
    assert text.index("beat: Starting") < text.index("arena is up"), text[-3000:]
    # A clean Ctrl-C says so: the children get one SIGTERM each from `up`, none is SIGKILLed.
    assert "stopping on Ctrl-C: web, worker, beat" in text, text[-3000:]
    assert "stopped cleanly: every process exited with 0" in text, text[-3000:]
    assert "SIGKILL" not in text and "Perhaps out of memory" not in text, text[-3000:]
    # One log format for all three (arena/logfmt.py), each line naming its process.
    for role in ("web", "worker", "beat"):
        assert f" role={role} " in text, (role, text[-3000:])
    access = [line for line in text.splitlines() if "logger=gunicorn.access" in line]
    assert access and access[0].startswith("ts=") and "status=200" in access[0], text[-3000:]
    # Everything it started is gone: the port is free again.
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, text[-2000:]


@pytest.mark.django_db(transaction=True)
def test_a_ctrl_c_the_instant_it_says_up_still_stops_the_children():
    """The Ctrl-C lands exactly as "arena is up" is written (someone pressing it on seeing the
    line): `up` says it is stopping, and the web server it started is gone when it returns. The
    children run in sessions of their own, so a Ctrl-C that escaped `up` (the verb's
    "interrupted") would leave them running."""
    from arena.up import up

    port = _free_port()
    said: list[str] = []

    class Terminal:
        def write(self, text: str) -> None:
            said.append(text)
            if text.startswith("arena is up"):
                raise KeyboardInterrupt

        def flush(self) -> None:
            pass

    options = {"host": "127.0.0.1", "port": port, "no_worker": True, "no_beat": True,
               "web_workers": 1}  # fmt: skip
    handler = signal.getsignal(signal.SIGTERM)
    try:
        up(SimpleNamespace(stdout=Terminal()), options)
    except KeyboardInterrupt:
        pytest.fail(f"the Ctrl-C escaped `up`, its web server left running: {said}")
    assert said[-2:] == ["stopping on Ctrl-C: web", "stopped cleanly: every process exited with 0"]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert signal.getsignal(signal.SIGTERM) == handler  # put back as it was
