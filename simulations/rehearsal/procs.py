"""The processes of a rehearsal: web (gunicorn), Celery workers and beat, and a private
redis-server, each a real child process with its log in the rehearsal's directory.

Every child runs in its own session, so a signal meant for one (a SIGKILL of a worker in the
fault schedule) reaches only its process group, and the terminal's Ctrl-C reaches only the
orchestrator, which stops the children in order.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class RehearsalError(RuntimeError):
    """A part of the rehearsal could not start or did not answer in time (one line)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    predicate: Callable[[], T], timeout: float, what: str, *, interval: float = 0.1,
    children: tuple[Child, ...] = (),
) -> T:  # fmt: skip
    """Poll until `predicate` returns something truthy; RehearsalError after `timeout` s, or at
    once when one of `children` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for child in children:
            if not child.alive():
                raise RehearsalError(
                    f"{child.name} exited ({child.popen.returncode}) while waiting for {what}; "
                    f"its log: {child.log_path}"
                )
        if time.monotonic() > deadline:
            raise RehearsalError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Child:
    """One child process, output to `<dir>/<name>.log` (appended: a restarted child keeps one log)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path, cwd: Path):
        self.name, self.argv, self.env, self.cwd = name, argv, env, cwd
        self.log_path = log_dir / f"{name}.log"
        self.popen: subprocess.Popen = self._spawn()

    def _spawn(self) -> subprocess.Popen:
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                self.argv, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group, like a lost machine: no handler runs, nothing acks."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=15)

    def restart(self) -> None:
        self.stop()
        self.popen = self._spawn()

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM (a graceful stop), SIGKILL after `timeout`; the exit code."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.popen.returncode or 0)


def web_argv(port: int, config: Path) -> list[str]:
    return [
        sys.executable, "-m", "gunicorn", "arena.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4",
        "--access-logfile", "-", "--graceful-timeout", "5", "--config", str(config),
    ]  # fmt: skip


def worker_argv(name: str, concurrency: int) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "arena", "worker", "--pool", "threads",
        "--concurrency", str(concurrency), "-n", f"{name}@%h", "--loglevel", "INFO",
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip


def beat_argv(schedule: Path) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "arena", "-q", "beat", "--loglevel", "INFO",
            "--schedule", str(schedule)]  # fmt: skip


class PrivateRedis:
    """A redis-server of the rehearsal's own on a free port, without persistence: restarting it
    (a fault) loses what it held, the worst case for queued messages, and disturbs nobody else."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        try:
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.workdir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        except FileNotFoundError as exc:
            raise RehearsalError(
                "the broker is Redis but redis-server is not installed here: the rehearsal "
                "runs a private one (install redis-server, or use the embedded broker)"
            ) from exc
        wait_for(self.ping, 15, f"redis-server on port {self.port}")
        return self

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
