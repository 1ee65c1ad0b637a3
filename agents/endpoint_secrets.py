"""Secrets that must never be part of an endpoint URL: a URL is shown on public pages, in the
API and in sealed, append-only records (a decision's LLM calls and its release), so a password
or key written into it would be published for good. Pure functions without models, so that
settings can refuse such an ARENA_LLM_ENDPOINTS before any process starts."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

# Query parameter names that carry credentials in the APIs the arena talks to and elsewhere.
KEY_LIKE = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session", re.IGNORECASE)


def secret_in_url(url: str) -> str:
    """What in the URL is a secret ("" when nothing is)."""
    parts = urlsplit(url.strip())
    if "@" in parts.netloc:
        return "a user name or password before the host"
    for name, _value in parse_qsl(parts.query, keep_blank_values=True):
        if KEY_LIKE.search(name):
            return f"the query parameter {name!r}"
    return ""


def without_userinfo(url: str) -> str:
    """The URL without anything before its host (how an old stored URL is shown)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def refuse_secret_in(variable: str, url: str, fix: str) -> None:
    """Raise ValueError (one line, naming `variable` and the fix, never the secret) when `url`
    carries a secret."""
    what = secret_in_url(url) if url else ""
    if what:
        shown = urlsplit(without_userinfo(url))._replace(query="").geturl()
        raise ValueError(
            f"{variable}: {shown} carries a secret in its URL ({what}), which would be "
            f"published with every call; {fix}"
        )


def refuse_secrets(raw: str) -> None:
    """Raise ValueError (one line) for the first ARENA_LLM_ENDPOINTS entry with a secret."""
    for entry in (e.strip() for e in raw.split(",")):
        refuse_secret_in(
            "ARENA_LLM_ENDPOINTS",
            entry.partition("|")[0].strip(),
            "write the entry as URL|KEY_VAR and put the key in the environment variable KEY_VAR",
        )


def refuse_default_secret(url: str) -> None:
    """The default endpoint is recorded with every call to it, as the listed ones are."""
    refuse_secret_in(
        "ARENA_LLM_BASE_URL", url, "put the key in OPENROUTER_API_KEY (or ARENA_LLM_API_KEY)"
    )
