"""Real-process fixtures shared with the fault tests (a private redis-server, polling)."""

from tests.faults.conftest import redis_server  # noqa: F401
