"""A Celery beat scheduler that refuses to double-schedule.

Two beat processes started by mistake would each send every periodic task. The tasks are
idempotent anyway, but we don't rely on it: a beat must hold a lock before it schedules anything.
With a Redis broker the lock is a Redis key with a TTL that the holder refreshes on every tick (so a
crashed holder is replaced within the TTL); with the embedded broker (one machine) it is an
exclusive flock on a file under var/. A second beat waits as a standby until the lock frees.
"""

import fcntl
import logging
import os
import signal
import time
import uuid
from pathlib import Path

import redis
from celery.beat import PersistentScheduler
from django.conf import settings

from core import clock

log = logging.getLogger(__name__)

LOCK_KEY = "arena:beat-lock"
# Env overrides exist for the fault tests (a killed beat's lock must expire within a test).
LOCK_TTL_SECONDS = int(os.environ.get("ARENA_BEAT_LOCK_TTL", "60"))
STANDBY_POLL_SECONDS = float(os.environ.get("ARENA_BEAT_STANDBY_POLL", "5"))
# On an accelerated clock (a rehearsal) the schedule can send more than the workers can run:
# with a limit set, a crontab entry due while that many messages already wait in the queue is not
# sent (every periodic task is a catch-up, so the next tick does its work). 0: no limit (live).
MAX_BACKLOG = int(os.environ.get("ARENA_BEAT_MAX_BACKLOG", "0"))
QUEUE = "celery"  # Celery's default queue, the only one the arena uses
# The lock store (Redis) may be unreachable for a while; beat must survive that, not crash.
LOCK_ERRORS = (redis.RedisError, OSError)


class RedisLock:
    def __init__(self, url: str, key: str = LOCK_KEY, ttl: int = LOCK_TTL_SECONDS):
        import redis

        self.client = redis.Redis.from_url(url)
        self.key = key
        self.ttl = ttl
        self.token = f"{os.getpid()}-{uuid.uuid4().hex}"

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, ex=self.ttl))

    def refresh(self) -> bool:
        # Extend only if we still own it (compare-and-set in one script). A missing key means a
        # Redis restarted without persistence (or we stalled past the TTL and nobody took over):
        # take it again, since no other beat holds it.
        script = (
            "local v = redis.call('get', KEYS[1]) "
            "if v == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) end "
            "if not v then redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1 end "
            "return 0"
        )
        return bool(self.client.eval(script, 1, self.key, self.token, self.ttl))

    def release(self) -> None:
        script = (
            "if redis.call('get', KEYS[1]) == ARGV[1] then "
            "return redis.call('del', KEYS[1]) else return 0 end"
        )
        self.client.eval(script, 1, self.key, self.token)


class FileLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def refresh(self) -> bool:
        return self.fd is not None  # the kernel holds a flock until we exit

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def make_lock():
    url = settings.CELERY_BROKER_URL
    if url.startswith(("redis://", "rediss://")):
        return RedisLock(url)
    return FileLock(Path(settings.VAR_DIR) / "beat.lock")


def _on_arena_clock(entry) -> bool:
    """A crontab of the schedule (read on the arena's clock), not the wall-clock heartbeat."""
    return getattr(entry.schedule, "nowfun", None) is clock.now


def _stop_standing_by(signum, frame) -> None:
    log.info("standby beat stopped by %s (it held no lock and scheduled nothing)",
             signal.Signals(signum).name)  # fmt: skip
    raise SystemExit(0)


class SingleBeatScheduler(PersistentScheduler):
    def __init__(self, *args, lazy: bool = False, **kwargs):
        # `celery beat` first builds a lazy instance just to print its banner, then the one that
        # schedules. Only the latter may take the lock: a lazy one holding it would make its own
        # beat stand by until the TTL ran out (Redis), or for ever (the flock is never closed).
        self._lock = None
        if not lazy:
            self._lock = make_lock()
            self._wait_for_lock()
        super().__init__(*args, lazy=lazy, **kwargs)

    def _wait_for_lock(self) -> None:
        if self._try_acquire():
            log.info("beat schedule lock acquired")
            return
        log.warning("another beat holds the schedule lock; standing by")
        # Celery's own SIGTERM/SIGINT handler saves the schedule through the service's scheduler,
        # which is this one, still being built: asking for it builds another that stands by in
        # turn, so the signal was answered with a new "standing by" and never stopped the
        # process. While standing by there is nothing to save, so a signal just ends the process.
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, _stop_standing_by)
        try:
            while not self._try_acquire():
                time.sleep(STANDBY_POLL_SECONDS)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("beat schedule lock acquired")

    def _try_acquire(self) -> bool:
        try:
            return self._lock.acquire()
        except LOCK_ERRORS as exc:
            log.warning("cannot reach the beat lock (%s); retrying", exc)
            return False

    def tick(self, *args, **kwargs):
        try:
            held = self._lock.refresh()
        except LOCK_ERRORS as exc:
            # The broker is down too (the lock lives in it): nothing could be sent anyway. Skip
            # the tick without advancing any entry, so what is due is sent once Redis is back,
            # instead of letting the exception end the beat process.
            log.warning("cannot reach the beat lock (%s); skipping this tick", exc)
            return STANDBY_POLL_SECONDS
        if not held:
            # Someone else took over (we stalled past the TTL): stop rather than double-schedule.
            raise SystemExit("beat lost its schedule lock; exiting so only one beat schedules")
        interval = super().tick(*args, **kwargs)
        if clock.rate() != 1.0:
            # An entry found not due yet is put back with a delay in its own seconds (arena
            # seconds for a crontab): look again within a wall second rather than that long.
            interval = min(interval, 1.0)
        # Wake up often enough to refresh the lock well before it expires.
        return min(interval, LOCK_TTL_SECONDS / 3)

    def apply_entry(self, entry, producer=None):
        if MAX_BACKLOG and _on_arena_clock(entry):
            waiting = self._backlog()
            if waiting is not None and waiting >= MAX_BACKLOG:
                log.info("not sending %s: %d messages already wait for a worker",
                         entry.name, waiting)  # fmt: skip
                return
        super().apply_entry(entry, producer=producer)

    def _backlog(self) -> int | None:
        """Messages waiting in the queue (None when the broker cannot say)."""
        url = settings.CELERY_BROKER_URL
        try:
            if url.startswith(("redis://", "rediss://")):
                if getattr(self, "_redis", None) is None:
                    self._redis = redis.Redis.from_url(url, socket_timeout=2)
                return int(self._redis.llen(QUEUE))
            folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("data_folder_in")
            # Messages only: a file still being written (arena/broker.py) is not one yet.
            return sum(n.endswith(".msg") for n in os.listdir(folder)) if folder else None
        except LOCK_ERRORS:
            return None

    def _when(self, entry, next_time_to_run, mktime=None):
        """When `entry` is next due, on the wall clock (Celery orders its heap by this and sleeps
        until the first one). Crontabs count on the arena's clock (arena/celery.py), so their
        seconds pass `rate` times faster than the wall's; the heartbeat counts wall seconds.
        Celery would add either to the entry's own "now", and an accelerated arena's time being
        days away from the wall's, one kind would always sort first and starve the other."""
        delay = self.adjust(next_time_to_run) or 0
        return clock.wall().timestamp() + (
            delay / clock.rate() if _on_arena_clock(entry) else delay
        )

    def close(self):
        try:
            super().close()
        finally:
            try:
                if self._lock is not None:
                    self._lock.release()
            except LOCK_ERRORS as exc:  # it expires on its own
                log.warning("could not release the beat lock (%s)", exc)
