"""Where simulated competitors send their calls, and the guards that keep them harmless.

A simulated competitor (Competitor.simulated) is answered by the project's own simulated endpoint
(simulations/simllm.py), never by a real model. Its calls go, in order of preference, to:
1. the endpoint a simulation (`arena demo`, `arena replay-forecastbench --simulated`) is serving
   in this very process, set here with `simulated_endpoint(url)` for the duration of its run;
2. the competitor's own base_url (an operator's `arena simulated-llm --port N`), loopback only.
Never the default OpenRouter URL, and never with an API key: the request carries none.

The in-process endpoint is a context variable, not a setting: it exists only while the simulation
runs, in its own thread, so a worker deciding live cohorts can never pick it up.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import urlsplit

_endpoint: ContextVar[str | None] = ContextVar("simulated_endpoint", default=None)

# The field of a simulated endpoint's answer that states how long the simulated model took at
# full scale; a simulated competitor's call records it as its latency, a real one never reads it.
SIMULATED_LATENCY_FIELD = "simulated_latency_ms"


@contextmanager
def simulated_endpoint(base_url: str) -> Iterator[None]:
    """Send simulated competitors' calls made inside the block to `base_url`."""
    token = _endpoint.set(base_url)
    try:
        yield
    finally:
        _endpoint.reset(token)


def current_endpoint() -> str | None:
    return _endpoint.get()


def recorded_url(url: str) -> str:
    """How a call to the in-process endpoint is recorded: its URL without the port, which the
    operating system picks anew for every run (so two runs of one simulation record the same
    calls). Host, scheme and path stay exactly as called."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return parts._replace(netloc=host).geturl()


def is_loopback_url(url: str) -> bool:
    """True for an http(s) URL whose host is this machine (127.0.0.0/8, ::1, localhost)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.scheme not in ("http", "https"):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_for(stored_base_url: str) -> tuple[str | None, str]:
    """(base URL, "") for a simulated competitor, or (None, why it cannot run)."""
    url = current_endpoint() or stored_base_url
    if not url:
        return None, (
            "simulated competitor without an endpoint: run `arena simulated-llm` and set its "
            "base URL (or run it inside `arena demo` / `replay-forecastbench --simulated`)"
        )
    if not is_loopback_url(url):
        return None, f"simulated competitors only call a loopback endpoint, not {url}"
    return url, ""
