"""`arena standin`: the Polymarket stand-in and the simulated models, on their own, for a trial.

An operator points a fresh deploy at these instead of Polymarket and real models
(`ARENA_GAMMA_URL`, `ARENA_CLOB_URL`, simulated competitors' base URL) and runs a real week end to
end offline: sync, cohort, decisions through the model path, snapshots, resolution, seals. The
world is the rehearsal's (simulations/world_server.py), seeded, its markets listed from the
current week's Sunday on and resolving over the following weeks, served on the arena's clock:
the wall clock, or the fast one ARENA_CLOCK_RATE/START/ANCHOR give every arena process.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from cohorts.services import week_start_for
from core import clock
from simulations.demo_plan import build_plan
from simulations.simllm import DEFAULT_PORT, HOST, SimulatedLLMServer
from simulations.simllm_cli import _port, latency_scale
from simulations.simmodels import CHARACTERS
from simulations.world import World
from simulations.world_server import WorldServer

DEFAULT_WORLD_PORT = 8101


def standin_arguments(parser) -> None:
    parser.add_argument("--world-port", type=_port, default=DEFAULT_WORLD_PORT,
                        help=f"port of the Polymarket stand-in on {HOST} (default "
                             f"{DEFAULT_WORLD_PORT}; 0 picks a free one)")  # fmt: skip
    parser.add_argument("--models-port", type=_port, default=DEFAULT_PORT,
                        help=f"port of the simulated models (default {DEFAULT_PORT})")  # fmt: skip
    parser.add_argument("--markets", type=int, default=60, help="markets in the world (default 60)")
    parser.add_argument("--weeks", type=int, default=2,
                        help="weeks the world's markets run for (default 2)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=7, help="the world's seed (default 7)")
    parser.add_argument("--latency-scale", type=latency_scale, default=1.0, metavar="X",
                        help="model answer time as a fraction of a realistic one (default 1)")  # fmt: skip


def standin_validate(options) -> None:
    if not 10 <= options["markets"] <= 2000:
        raise CommandError("--markets must be between 10 and 2000")
    if not 1 <= options["weeks"] <= 52:
        raise CommandError("--weeks must be between 1 and 52")


def standin(cmd, options) -> None:
    now = clock.now()
    first_sunday = week_start_for(now)
    plan = build_plan(seed=options["seed"], weeks=options["weeks"] + 1,
                      n_markets=options["markets"], start=first_sunday)  # fmt: skip
    models = SimulatedLLMServer(port=options["models_port"], latency_scale=options["latency_scale"])
    try:
        models.bind()
    except OSError as exc:
        raise CommandError(
            f"cannot listen on {HOST}:{options['models_port']}: {exc.strerror}"
        ) from exc
    try:
        world = WorldServer(World.of(plan), clock.now, port=options["world_port"])
    except OSError as exc:
        models.stop()
        raise CommandError(
            f"cannot listen on {HOST}:{options['world_port']}: {exc.strerror}"
        ) from exc
    world.start()
    rate = f"rate {clock.rate():g}" if clock.rate() != 1 else "the wall clock"
    cmd.stdout.write(f"Polymarket stand-in at {world.url}: {options['markets']} markets from "
                     f"{first_sunday:%Y-%m-%d} for {options['weeks']} week(s), on {rate}")  # fmt: skip
    cmd.stdout.write(f"simulated models at {models.base_url}: {', '.join(CHARACTERS)}")
    cmd.stdout.write(f"point the arena at them: ARENA_GAMMA_URL={world.url} "
                     f"ARENA_CLOB_URL={world.url} (Ctrl-C stops both)")  # fmt: skip
    cmd.stdout.flush()
    try:
        models.serve_forever()
    except KeyboardInterrupt:
        cmd.stdout.write("stopped")
    finally:
        world.stop()
