"""`arena up`: migrate, seed the default lineup, then run web + Celery worker + beat.

The three processes run in the foreground as children; Ctrl-C (or SIGTERM) stops all of them
and waits for them to exit, so nothing is left running.
"""

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command


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
        cmds.append(("beat", [python, "-m", "celery", "-A", "arena", "beat", "--loglevel", "INFO"]))
    return cmds


def up(cmd, options) -> None:
    call_command("migrate", interactive=False, verbosity=0)
    try:
        from agents.services import ensure_default_lineup
    except ImportError:
        ensure_default_lineup = None
    if ensure_default_lineup is not None:
        created = ensure_default_lineup()
        if created:
            cmd.stdout.write(f"created the default lineup ({created} competitors)")
    if not settings.DEBUG:
        call_command("collectstatic", interactive=False, verbosity=0)

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
    children: list[tuple[str, subprocess.Popen]] = []
    for name, argv in _commands(options):
        children.append((name, subprocess.Popen(argv, env=env)))
    cmd.stdout.write(
        f"arena is up on http://{options['host']}:{options['port']}/ "
        f"({', '.join(n for n, _ in children)}); Ctrl-C stops everything"
    )
    cmd.stdout.flush()

    stopping = False

    def _stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        while not stopping:
            for name, proc in children:
                if proc.poll() is not None:
                    cmd.stderr.write(f"{name} exited with {proc.returncode}; stopping the rest")
                    stopping = True
                    break
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        _shutdown(children)


def _shutdown(children) -> None:
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
