"""Where a competitor's model calls may go, which env var may supply their key, and the one way
to build the client a competitor is called with (`client_for`).

Only the operator decides: ARENA_LLM_ENDPOINTS (env) lists the allowed endpoints as
comma-separated `URL` (no key: a local vLLM / Ollama / llama.cpp server) or `URL|KEY_VAR` (the
key is read from env var KEY_VAR). A competitor uses either the default endpoint
(ARENA_LLM_BASE_URL with OPENROUTER_API_KEY; blank base_url and api_key_env) or one of those
entries, picked from a list in the admin. Staff never type a URL or a variable name: free text
would let a staff account send SECRET_KEY or DATABASE_URL as a Bearer token to a listener of
its choice. A competitor whose stored endpoint is not (or no longer) allowed is not called at all;
its decision is skipped with the reason.

Time: every chat() call is one phase of a decision (initial, refit after a context refusal,
repair: PHASES_PER_DECISION at most), and each gets a total (`phase_seconds`) derived from the
claim timeout, so a decision's calls always end before another runner could take its claim over
(cohorts/decisions/run.py) and call the same model a second time.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from agents.endpoint_secrets import refuse_secrets
from agents.llm import DEADLINE_SLACK, LLMClient
from agents.models import Competitor, Release
from agents.simulated import current_endpoint, endpoint_for, recorded_url

_VAR = re.compile(r"[A-Z][A-Z0-9_]{0,99}")
# The arena's own secrets can never be a competitor's key, whatever the list says.
NEVER_KEYS = frozenset(
    {"SECRET_KEY", "DATABASE_URL", "REDIS_CACHE_URL", "CELERY_BROKER_URL", "PGPASSWORD"}
)
PHASES_PER_DECISION = 3
# Of the claim timeout, the share all model calls may use; the rest covers the server probes
# (agents/budget.py, bounded by PROBE_SHARE), database writes and a worker's start.
CALLS_SHARE = 0.8
PROBE_SHARE = 0.1


class EndpointConfigError(ValueError):
    """ARENA_LLM_ENDPOINTS holds an entry that is not `URL` or `URL|KEY_VAR`."""


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    key_env: str = ""  # "" = no key

    @property
    def value(self) -> str:
        """How the entry is written in ARENA_LLM_ENDPOINTS (and the admin's choice value)."""
        return f"{self.base_url}|{self.key_env}" if self.key_env else self.base_url

    @property
    def label(self) -> str:
        key = f"key from ${self.key_env}" if self.key_env else "no key"
        return f"{_without_userinfo(self.base_url)} ({key})"


def _without_userinfo(url: str) -> str:
    """The URL as shown in reasons and the admin (public decision pages show reasons)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc += f":{port}" if port else ""
    return parts._replace(netloc=netloc).geturl()


def _clean_url(url: str) -> str:
    return url.strip().rstrip("/")


def parse(raw: str) -> list[Endpoint]:
    try:
        refuse_secrets(raw)
    except ValueError as exc:
        raise EndpointConfigError(str(exc)) from None
    endpoints = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        url, _, var = entry.partition("|")
        url, var = _clean_url(url), var.strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EndpointConfigError(f"ARENA_LLM_ENDPOINTS: {url!r} is not an http(s) URL")
        if var and (not _VAR.fullmatch(var) or var in NEVER_KEYS):
            raise EndpointConfigError(
                f"ARENA_LLM_ENDPOINTS: {var!r} cannot hold a model key (use an UPPER_CASE "
                "variable of its own)"
            )
        endpoints.append(Endpoint(url, var))
    return endpoints


def allowed() -> list[Endpoint]:
    """The operator's list (raises EndpointConfigError for a malformed entry)."""
    return parse(getattr(settings, "ARENA_LLM_ENDPOINTS", "") or "")


def is_default(base_url: str, key_env: str) -> bool:
    return not base_url and not key_env


def check(base_url: str, key_env: str) -> str:
    """ "" when a competitor may use (base_url, key_env), else why not (one line)."""
    if is_default(base_url, key_env):
        return ""
    try:
        endpoints = allowed()
    except EndpointConfigError as exc:
        return str(exc)
    wanted = Endpoint(_clean_url(base_url or settings.ARENA_LLM_BASE_URL), key_env.strip())
    if wanted in endpoints:
        return ""
    return (
        f"endpoint {wanted.label} is not in the operator's allow-list (ARENA_LLM_ENDPOINTS); "
        "pick an allowed endpoint in the admin"
    )


def client_for(
    competitor: Competitor, release: Release | None = None
) -> tuple[LLMClient | None, str]:
    """The competitor's client, or (None, why it cannot run). With `release` (a decision
    passes its entry's), the endpoint and key variable are the release's, not the competitor's
    current ones.

    A simulated competitor calls the simulated endpoint (agents/simulated.py), loopback only and
    without any key, whatever its fields say. Any other competitor's endpoint must be the default
    one or on the operator's allow-list; a stored endpoint that is not is never called. Key
    resolution: the endpoint's env var when it names one (a missing value skips the
    competitor); no key at all for an allowed endpoint without a variable (a local
    vLLM/Ollama server); the default OpenRouter key from settings for the default endpoint.
    """
    model: Competitor | Release = release if release is not None else competitor
    if competitor.simulated:
        # Its own guard, stricter than the allow-list: loopback only and never a key, so no
        # stored field can send a secret anywhere.
        simulated_url, reason = endpoint_for(model.base_url)
        if simulated_url is None:
            return None, reason
        client = _client(simulated_url, "")
        client.states_latency = True
        if simulated_url == current_endpoint():
            client.record_base = recorded_url(simulated_url)
        return client, ""
    refused = check(model.base_url, model.api_key_env)
    if refused:
        return None, refused
    base_url = model.base_url or settings.ARENA_LLM_BASE_URL
    if model.api_key_env:
        key = os.environ.get(model.api_key_env, "")
        if not key:
            return None, f"no API key: the env var {model.api_key_env} is not set"
    elif model.base_url:
        key = ""
    else:
        key = settings.ARENA_LLM_API_KEY
        if not key:
            return None, "no API key: set OPENROUTER_API_KEY (or ARENA_LLM_API_KEY)"
    return _client(base_url, key), ""


def phase_seconds() -> float:
    """The total one phase's attempts may take: PHASES_PER_DECISION worst-case phases (each
    bounded on the wire, LLMClient.worst_case_seconds) fit in CALLS_SHARE of the claim timeout."""
    claim = float(settings.ARENA_CLAIM_TIMEOUT_SECONDS)
    derived = claim * CALLS_SHARE / PHASES_PER_DECISION - DEADLINE_SLACK
    wanted = getattr(settings, "ARENA_LLM_PHASE_SECONDS", None)
    return max(1.0, min(derived, float(wanted)) if wanted else derived)


def probe_seconds() -> float:
    """The total a decision may spend asking a server about its context and tokens."""
    return float(settings.ARENA_CLAIM_TIMEOUT_SECONDS) * PROBE_SHARE


def _client(base_url: str, key: str) -> LLMClient:
    """The operator's timeouts and retry policy (settings) around one endpoint and key."""
    return LLMClient(
        base_url,
        key or None,
        timeout=settings.ARENA_LLM_TIMEOUT,
        max_retries=getattr(settings, "ARENA_LLM_MAX_RETRIES", 3),
        backoff_base=getattr(settings, "ARENA_LLM_BACKOFF_BASE", 1.0),
        max_backoff=getattr(settings, "ARENA_LLM_MAX_BACKOFF", 30.0),
        phase_seconds=phase_seconds(),
    )
