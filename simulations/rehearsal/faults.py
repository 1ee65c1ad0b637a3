"""The rehearsal's fault schedule: what breaks when (arena time), printed before the run starts
and injected by the orchestrator as the arena's clock reaches each one.

Each fault is what an operator meets: a worker SIGKILLed in the middle of a model call, the
broker restarted (empty, no persistence), the database's connections killed, Polymarket
answering 5xx, hanging past the client's timeout or sending half a page, a model provider's 429
with Retry-After, 402 (out of credits) and a call that never answers in time. Outages (the broker
down) are recorded as wall-clock windows, which the /healthz timeline is checked against.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import connection

from core import clock

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
WORKER_KILL_STALL = 40.0  # seconds the model call is held: the worker dies meanwhile
REDIS_DOWN_SECONDS = 15.0  # longer than /healthz's check period, so a probe must see it
KILL_WAIT_SECONDS = 90.0  # for the held call to start (a decision round in flight)


class Stage(Protocol):
    """What the faults act on: the running rehearsal (simulations/rehearsal/run.py)."""

    world: Any  # WorldServer
    models: Any  # SimulatedLLMServer
    redis: Any  # PrivateRedis | None
    http_timeout: float
    llm_timeout: float

    def kill_workers(self) -> int: ...

    def restart_workers(self) -> None: ...

    def outage(self, what: str, start: float, end: float, required: bool) -> None: ...

    def staff_corrections(self) -> str | None: ...


@dataclass
class Fault:
    name: str
    at: datetime  # arena time it is injected at
    what: str  # one line for the printed schedule
    inject: Callable[[Stage], str]  # returns what happened
    injected: bool = False
    skipped: bool = False
    detail: str = ""
    wall: float = 0.0
    retry_until: datetime | None = None  # for injections that wait for something to exist

    def as_dict(self) -> dict:
        return {"name": self.name, "at": self.at.isoformat(), "what": self.what,
                "injected": self.injected, "skipped": self.skipped, "detail": self.detail}  # fmt: skip


class NotYet(Exception):  # noqa: N818 (a control-flow signal, not an error)
    """The fault cannot be injected yet (nothing to act on); try again at the next tick."""


@dataclass
class FaultSchedule:
    faults: list[Fault] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"  {f.at:%a %Y-%m-%d %H:%M} arena  {f.name:<16} {f.what}" for f in self.faults]

    def due(self, now: datetime) -> list[Fault]:
        return [f for f in self.faults if not f.injected and not f.skipped and f.at <= now]

    def run_due(self, stage: Stage, now: datetime) -> list[Fault]:
        done = []
        for fault in self.due(now):
            try:
                fault.detail = fault.inject(stage)
            except NotYet as exc:
                if fault.retry_until is not None and now < fault.retry_until:
                    continue
                fault.skipped, fault.detail = True, f"not injected: {exc}"
            else:
                fault.injected, fault.wall = True, clock.wall().timestamp()
            done.append(fault)
        return done


def schedule(first_sunday: datetime, weeks: int, *, postgres: bool, redis: bool) -> FaultSchedule:
    """The faults of a run of `weeks` weeks starting `first_sunday` (every one within the first
    two weeks, so a short run meets them all)."""
    later = first_sunday + (7 * DAY if weeks >= 2 else 3 * DAY)  # the next decision round
    s = first_sunday
    faults = [
        Fault("worker-kill", s - HOUR, "SIGKILL every worker while a model call is in flight "
              "(the first decision round), then start them again", _kill_worker),
        Fault("gamma-5xx", s + 2 * DAY, "Gamma answers 503 (Retry-After 1) twice",
              lambda st: _gamma(st, "status", times=2, status=503, retry_after="1")),
        Fault("gamma-timeout", s + 2 * DAY + 3 * HOUR, "Gamma holds a page past the client's "
              "timeout", lambda st: _gamma(st, "stall", stall=st.http_timeout + 2)),
        Fault("gamma-malformed", s + 2 * DAY + 6 * HOUR, "Gamma sends half a page (truncated "
              "JSON)", lambda st: _gamma(st, "truncated")),
        Fault("staff-corrections", s + 4 * DAY, "staff log in to the admin and correct two "
              "resolved markets: one reversal, one 50-50", _corrections,
              retry_until=s + (7 * weeks - 1) * DAY),
        Fault("model-429", later - HOUR, "a model call answered 429 with Retry-After: 1",
              lambda st: _model(st, "status", status=429, retry_after="1")),
        Fault("model-402", later - HOUR, "a model call answered 402 (out of credits)",
              lambda st: _model(st, "status", status=402)),
        Fault("model-timeout", later - HOUR, "a model call held past the client's timeout",
              lambda st: _model(st, "stall", stall=st.llm_timeout + 2)),
    ]  # fmt: skip
    if redis:
        faults.append(Fault("redis-restart", s + 3 * DAY, f"the broker (private redis-server) "
                            f"stopped for {REDIS_DOWN_SECONDS:.0f} s wall, restarted empty",
                            _restart_redis))  # fmt: skip
    else:
        faults.append(Fault("redis-restart", s + 3 * DAY, "skipped: the broker is not Redis",
                            _not_applicable("the broker is the embedded one, not Redis")))  # fmt: skip
    if postgres:
        faults.append(Fault("pg-kill", later + 10 * MINUTE, "kill every "
                            "PostgreSQL backend of the rehearsal's database (pg_terminate_backend) "
                            "mid decision round", _kill_backends))  # fmt: skip
    else:
        faults.append(Fault("pg-kill", later, "skipped: SQLite has no server connections to kill",
                            _not_applicable("the database is SQLite")))  # fmt: skip
    faults.sort(key=lambda f: f.at)
    return FaultSchedule(faults)


def _not_applicable(why: str) -> Callable[[Stage], str]:
    def skip(stage: Stage) -> str:
        raise NotYet(why)

    return skip


def _gamma(stage: Stage, kind: str, times: int = 1, **how: Any) -> str:
    stage.world.fail("/markets/keyset", kind, times=times, **how)
    return f"queued {times} x {kind} {how or ''} on /markets/keyset".strip()


def _model(stage: Stage, kind: str, **how: Any) -> str:
    stage.models.fail(kind, **how)
    return f"queued {kind} {how} on /v1/chat/completions"


def _kill_worker(stage: Stage) -> str:
    before = stage.models.faulted
    stage.models.fail("stall", stall=WORKER_KILL_STALL)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while stage.models.faulted == before:
        if time.monotonic() > deadline:
            stage.models.faults.clear()
            raise NotYet(f"no model call started within {KILL_WAIT_SECONDS:.0f} s")
        time.sleep(0.05)
    killed = stage.kill_workers()
    stage.restart_workers()
    return f"{killed} worker process(es) SIGKILLed with a model call held, restarted"


def _restart_redis(stage: Stage) -> str:
    assert stage.redis is not None
    down = clock.wall().timestamp()
    stage.redis.stop()
    time.sleep(REDIS_DOWN_SECONDS)  # the outage itself: its length is the point
    stage.redis.start()
    up = clock.wall().timestamp()
    stage.outage("broker", down, up, required=True)
    return f"redis-server down {up - down:.1f} s wall, restarted on port {stage.redis.port}"


def _kill_backends(stage: Stage) -> str:
    # The outage starts as the statement is sent: a request in flight meets it from then on.
    start = clock.wall().timestamp()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        killed = cur.fetchone()[0]
    # A killed connection is an outage of an instant: /healthz may see it, or not.
    stage.outage("database", start, clock.wall().timestamp() + 2, required=False)
    return f"{killed} backend(s) terminated"


def _corrections(stage: Stage) -> str:
    done = stage.staff_corrections()
    if done is None:
        raise NotYet("not enough markets resolved Yes or No yet for both corrections")
    return done
