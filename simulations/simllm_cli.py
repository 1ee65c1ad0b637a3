"""`arena simulated-llm [--port N] [--latency-scale X]`: the simulated model endpoint on loopback.

For operators testing a lineup without a real model or key: point a competitor at it (README,
"Simulated models"). It has no world, so the skilled forecaster has no outcome to peek at here.
"""

from __future__ import annotations

import argparse

from django.core.management.base import CommandError

from simulations.simllm import DEFAULT_PORT, HOST, SimulatedLLMServer
from simulations.simmodels import CHARACTERS


def latency_scale(text: str) -> float:
    """argparse type: a latency scale between 0 and 10."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"not a number between 0 and 10: {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return value


def simulated_llm_arguments(parser) -> None:
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port on {HOST} (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--latency-scale",
        type=latency_scale,
        default=1.0,
        metavar="X",
        help="answer time as a fraction of a realistic one (default 1: real time; 0: at once)",
    )


def simulated_llm(cmd, options) -> None:
    server = SimulatedLLMServer(port=options["port"], latency_scale=options["latency_scale"])
    try:
        server.bind()
    except OSError as exc:
        raise CommandError(f"cannot listen on {HOST}:{options['port']}: {exc.strerror}") from exc
    cmd.stdout.write(f"simulated model endpoint at {server.base_url} (Ctrl-C stops it)")
    cmd.stdout.write(
        "models (no API key; answers are simulated, cost $0): " + ", ".join(CHARACTERS)
    )
    cmd.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        cmd.stdout.write("stopped")
