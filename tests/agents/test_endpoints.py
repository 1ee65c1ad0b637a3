"""agents.endpoints.client_for: the one way a competitor's client is built (endpoint and key)."""

from __future__ import annotations

from agents.endpoints import client_for
from agents.models import Competitor

LOCAL = "http://127.0.0.1:8000/v1"
REMOTE = "https://api.example.com/v1"


def _model(**kw) -> Competitor:
    return Competitor(slug="m", kind=Competitor.Kind.LLM, model_id="x/y", **kw)


def test_the_default_endpoint_uses_the_operators_key_or_is_skipped(settings):
    settings.ARENA_LLM_BASE_URL = "https://openrouter.example/api/v1/"
    settings.ARENA_LLM_API_KEY = ""
    client, reason = client_for(_model())
    assert client is None and "OPENROUTER_API_KEY" in reason
    settings.ARENA_LLM_API_KEY = "sk-default"
    settings.ARENA_LLM_TIMEOUT, settings.ARENA_LLM_MAX_RETRIES = 7, 1
    client, reason = client_for(_model())
    assert client is not None and reason == ""
    assert client.base_url == "https://openrouter.example/api/v1"
    assert client.headers["Authorization"] == "Bearer sk-default"
    assert (client.timeout, client.max_retries) == (7, 1)  # the operator's policy


def test_an_allowed_endpoint_gets_its_own_key_or_none(settings, monkeypatch):
    settings.ARENA_LLM_API_KEY = "sk-default"
    settings.ARENA_LLM_ENDPOINTS = f"{LOCAL},{REMOTE}|EXAMPLE_KEY"
    local, _ = client_for(_model(base_url=LOCAL))
    assert local is not None and "Authorization" not in local.headers  # never the default key
    monkeypatch.delenv("EXAMPLE_KEY", raising=False)
    client, reason = client_for(_model(base_url=REMOTE, api_key_env="EXAMPLE_KEY"))
    assert client is None and "EXAMPLE_KEY is not set" in reason
    monkeypatch.setenv("EXAMPLE_KEY", "sk-example")
    client, _ = client_for(_model(base_url=REMOTE, api_key_env="EXAMPLE_KEY"))
    assert client is not None and client.headers["Authorization"] == "Bearer sk-example"


def test_an_endpoint_off_the_allow_list_is_never_called(settings, monkeypatch):
    settings.ARENA_LLM_ENDPOINTS = LOCAL
    monkeypatch.setenv("EXAMPLE_KEY", "sk-example")
    client, reason = client_for(_model(base_url=REMOTE, api_key_env="EXAMPLE_KEY"))
    assert client is None and "not in the operator's allow-list" in reason
