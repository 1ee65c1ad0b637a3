"""`arena up`: migrate, seed the default lineup, then run web + Celery worker + beat.

The three processes run in the foreground as children, each in its own session so that the
terminal's Ctrl-C reaches only `up`: it then stops them in order with SIGTERM (gunicorn and
Celery's graceful stop) and waits, so nothing is left running and nothing is killed mid-way
(a Ctrl-C delivered to every process at once made gunicorn SIGKILL its workers and log "Perhaps
out of memory?"). Each child logs in the one key=value format with its role (web, worker, beat).
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from core import clock

LISTEN_TIMEOUT = 60  # seconds the web server may take to start listening
READY_TIMEOUT = 60  # and the worker and beat to be ready (arena.celery._say_ready)
READY_DIR_ENV = "ARENA_UP_READY_DIR"


def up_arguments(parser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-worker", action="store_true", help="do not start a Celery worker")
    parser.add_argument("--no-beat", action="store_true", help="do not start Celery beat")
    parser.add_argument("--web-workers", type=int, default=2)


def _commands(options) -> list[tuple[str, list[str]]]:
    python = sys.executable
    cmds = [
        (
            "web",
            [
                python,
                "-m",
                "gunicorn",
                "arena.wsgi:application",
                "--bind",
                f"{options['host']}:{options['port']}",
                "--workers",
                str(options["web_workers"]),
                "--threads",
                "4",
                "--access-logfile",
                "-",
                "--graceful-timeout",
                "5",
                "--config",
                str(settings.BASE_DIR / "gunicorn.conf.py"),
            ],
        )
    ]
    if not options["no_worker"]:
        # Threads suit the work (HTTP calls to models and Polymarket) and SQLite's one writer.
        cmds.append(
            (
                "worker",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "arena",
                    "worker",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "8",
                    "--loglevel",
                    "INFO",
                    "--without-gossip",
                    "--without-mingle",
                ],
            )
        )
    if not options["no_beat"]:
        cmds.append(("beat", [python, "-m", "celery", "-A", "arena", "-q", "beat", "--loglevel", "INFO"]))
    return cmds


def port_problem(host: str, port: int) -> str | None:
    """Why (host, port) cannot be listened on, or None when it is free.

    Binds the way gunicorn will (SO_REUSEADDR, so a port left in TIME_WAIT counts as free) and
    lets go at once; only another listener or a bad address makes it fail.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as exc:
        return f"{host} is not an address here ({exc})"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _listening(host: str, port: int) -> bool:
    target = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    try:
        with socket.create_connection((target, port), timeout=1):
            return True
    except OSError:
        return False


def up(cmd, options) -> None:
    host, port = options["host"], options["port"]
    problem = port_problem(host, port)
    if problem:
        raise CommandError(
            f"cannot serve on {host}:{port}: {problem} (stop what uses it, or pass --port N)"
        )
    call_command("migrate", interactive=False, verbosity=0)
    from agents.services import ensure_default_lineup

    created = ensure_default_lineup()
    if created:
        cmd.stdout.write(f"created the default lineup ({created} competitors)")
    # Every start, DEBUG or not: pages name static files by their hashed, compressed copies.
    call_command("collectstatic", interactive=False, verbosity=0)

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
    if env.get("ARENA_CLOCK_RATE") or env.get("ARENA_CLOCK_START"):
        # One anchor for web, worker and beat, so the three agree on the accelerated time.
        env.setdefault("ARENA_CLOCK_ANCHOR", clock.wall().isoformat())
    # The worker and beat each leave a file here once they can take a stop (their signal
    # handlers installed): "arena is up" is said only then, so a Ctrl-C right after it stops
    # every process cleanly instead of killing one still starting.
    ready = Path(tempfile.mkdtemp(prefix="arena-up-"))
    env[READY_DIR_ENV] = str(ready)
    children: list[tuple[str, subprocess.Popen]] = []
    stopping, announced = False, False
    failed: str | None = None
    why = "stopping on SIGTERM"
    before = None  # the SIGTERM handler to put back

    def _stop(signum, frame):
        nonlocal stopping
        stopping = True

    # One try from the first child to the last line: a Ctrl-C at any instant, even between
    # "arena is up" and the wait below, reaches the `finally` that stops the children (they
    # run in sessions of their own, so nothing else would).
    try:
        try:
            for name, argv in _commands(options):
                # Own session: the terminal's Ctrl-C is ours alone; we stop them in order.
                child = subprocess.Popen(argv, env={**env, "ARENA_ROLE": name},
                                         start_new_session=True)  # fmt: skip
                children.append((name, child))
            _wait_until_listening(children, host, port)
            _wait_until_ready(children, ready)
        finally:
            shutil.rmtree(ready, ignore_errors=True)
        before = signal.signal(signal.SIGTERM, _stop)
        announced = True
        cmd.stdout.write(
            f"arena is up on http://{options['host']}:{options['port']}/ "
            f"({', '.join(n for n, _ in children)}); Ctrl-C stops everything"
        )
        cmd.stdout.flush()
        while not stopping:
            for name, proc in children:
                if proc.poll() is not None:
                    failed = f"{name} exited with {proc.returncode}; stopped the rest"
                    stopping = True
                    break
            time.sleep(0.5)
    except KeyboardInterrupt:
        if not announced:
            raise  # still starting: the children are stopped below, the verb says "interrupted"
        why = "stopping on Ctrl-C"
    finally:
        if announced and not failed:
            cmd.stdout.write(f"{why}: {', '.join(n for n, _ in children)}")
            cmd.stdout.flush()
        codes = _shutdown(children)
        if before is not None:
            signal.signal(signal.SIGTERM, before)
    if failed:
        raise CommandError(failed)
    unclean = [f"{name} exited with {code}" for name, code in codes if code != 0]
    if unclean:
        raise CommandError(f"stopped, but {'; '.join(unclean)}")
    cmd.stdout.write("stopped cleanly: every process exited with 0")


def _wait_until_listening(children, host: str, port: int) -> None:
    """Return once the web server accepts connections; fail if a child dies first."""
    deadline = time.monotonic() + LISTEN_TIMEOUT
    while not _listening(host, port):
        for name, proc in children:
            if proc.poll() is not None:
                raise CommandError(f"{name} exited with {proc.returncode} while starting")
        if time.monotonic() > deadline:
            raise CommandError(
                f"the web server did not listen on {host}:{port} within {LISTEN_TIMEOUT} s"
            )
        time.sleep(0.2)


def _wait_until_ready(children, ready: Path) -> None:
    """Return once every child but the web server has said it is ready; fail if one dies or
    takes longer than READY_TIMEOUT."""
    deadline = time.monotonic() + READY_TIMEOUT
    waiting = [name for name, _ in children if name != "web"]
    while waiting := [name for name in waiting if not (ready / name).exists()]:
        for name, proc in children:
            if proc.poll() is not None:
                raise CommandError(f"{name} exited with {proc.returncode} while starting")
        if time.monotonic() > deadline:
            raise CommandError(f"{', '.join(waiting)} not ready within {READY_TIMEOUT} s")
        time.sleep(0.2)


def _shutdown(children) -> list[tuple[str, int]]:
    """SIGTERM every child still running, wait (SIGKILL after 15 s); their exit codes."""
    for _, proc in children:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for _, proc in children:
        remaining = max(deadline - time.monotonic(), 0.1)
        try:
            proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return [(name, proc.returncode) for name, proc in children]
