"""The clock of record: every "now" the arena reads comes from `now()`.

Live, that is the wall clock (UTC). A replay, the demo or a rehearsal runs the same services on
a time of its own by entering `running_on(clock)`: everything called inside (claims, trades,
snapshots, settlements, seals, score runs) then reads that clock, so a simulated week produces
the same rows a live one would, stamped with simulated time. The override is a context
variable, so it stays with the code that set it (one thread or task) and never leaks into a
web request or a worker serving live work at the same moment.

A whole process can also run on an accelerated clock (a rehearsal of live weeks in hours):
with ARENA_CLOCK_RATE (and optionally ARENA_CLOCK_START, ARENA_CLOCK_ANCHOR) in the environment,
the arena's time is START + RATE x (wall time since ANCHOR). Web, worker and beat given the same
three values agree on the time to the clock's precision; Celery beat evaluates its schedule on
it (arena/celery.py). Without them (live) the wall clock is used untouched. `wall()` always
stays the machine's clock, for what measures processes (timeouts, claims gone stale, heartbeats).

Nothing else in the project calls `timezone.now()` or `datetime.now()`; tests/test_clock.py
fails on a new one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

Clock = Callable[[], datetime]

_current: ContextVar[Clock | None] = ContextVar("arena_clock", default=None)


def wall() -> datetime:
    """The wall clock in UTC, whatever clock is running: for what measures the machine itself
    (how long a job took, when a login was refused), never for what a score rests on."""
    return datetime.now(UTC)


def now() -> datetime:
    """The arena's current time: the running scope's clock, else the process's clock (the
    accelerated one when the environment configures it, else the wall clock)."""
    clock = _current.get()
    if clock is not None:
        return clock()
    return _process_clock() if _process_clock is not None else wall()


def rate() -> float:
    """How many arena seconds pass per wall second in this process (1 live)."""
    return _process_clock.rate if _process_clock is not None else 1.0


class AcceleratedClock:
    """Arena time = start + rate x (wall time since anchor): a simulated instant that moves on
    its own, the same in every process that shares start, anchor and rate."""

    def __init__(self, start: datetime, anchor: datetime, rate: float) -> None:
        if start.tzinfo is None or anchor.tzinfo is None:
            raise ValueError("an accelerated clock needs aware datetimes")
        if not rate > 0:
            raise ValueError(f"the clock rate must be above 0, got {rate}")
        self.start, self.anchor, self.rate = start, anchor, rate

    def __call__(self) -> datetime:
        return self.start + (wall() - self.anchor) * self.rate


class ClockConfigError(ValueError):
    """ARENA_CLOCK_* hold a value that is not a time or a rate."""


def _instant(environ: Mapping[str, str], name: str) -> datetime | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ClockConfigError(f"{name} must be an ISO 8601 instant, got {raw!r}") from exc
    if value.tzinfo is None:
        raise ClockConfigError(
            f"{name} needs a UTC offset (e.g. 2026-11-22T00:00:00Z), got {raw!r}"
        )
    return value.astimezone(UTC)


def from_environment(environ: Mapping[str, str] = os.environ) -> AcceleratedClock | None:
    """The process clock the environment asks for, or None (the wall clock)."""
    raw_rate = environ.get("ARENA_CLOCK_RATE", "").strip()
    start = _instant(environ, "ARENA_CLOCK_START")
    anchor = _instant(environ, "ARENA_CLOCK_ANCHOR")
    if not raw_rate and start is None:
        return None
    try:
        speed = float(raw_rate) if raw_rate else 1.0
    except ValueError as exc:
        raise ClockConfigError(f"ARENA_CLOCK_RATE must be a number, got {raw_rate!r}") from exc
    if not speed > 0 or speed != speed or speed == float("inf"):
        raise ClockConfigError(f"ARENA_CLOCK_RATE must be above 0, got {raw_rate!r}")
    anchor = anchor or wall()
    return AcceleratedClock(start or anchor, anchor, speed)


def configure(process_clock: AcceleratedClock | None) -> None:
    """Set the process's clock (None: the wall clock); read from the environment at import."""
    global _process_clock
    _process_clock = process_clock


_process_clock: AcceleratedClock | None = from_environment()


class SimulatedClock:
    """A clock a simulation moves by hand: `set(at)` jumps to `at` (never backwards, so a
    mistake in a step loop cannot produce rows older than ones already written)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("a simulated clock needs an aware datetime")
        self._at = start

    def __call__(self) -> datetime:
        return self._at

    def set(self, at: datetime) -> None:
        if at < self._at:
            raise ValueError(f"the clock cannot go back from {self._at} to {at}")
        self._at = at


@contextmanager
def running_on(clock: Clock) -> Iterator[Clock]:
    """Run the enclosed code on `clock` instead of the wall clock."""
    token = _current.set(clock)
    try:
        yield clock
    finally:
        _current.reset(token)
