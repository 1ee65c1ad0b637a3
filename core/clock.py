"""The clock of record: every "now" the arena reads comes from `now()`.

Live, that is the wall clock (UTC). A replay, the demo or a rehearsal runs the same services on
a time of its own by entering `running_on(clock)`: everything called inside (claims, trades,
snapshots, settlements, seals, score runs) then reads that clock, so a simulated week produces
the same rows a live one would, stamped with simulated time. The override is a context
variable, so it stays with the code that set it (one thread or task) and never leaks into a
web request or a worker serving live work at the same moment.

Nothing else in the project calls `timezone.now()` or `datetime.now()`; tests/test_clock.py
fails on a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
    """The arena's current time: the running scope's clock, else the wall clock."""
    clock = _current.get()
    return clock() if clock is not None else wall()


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
