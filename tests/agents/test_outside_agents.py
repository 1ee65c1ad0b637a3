"""Outside agents as competitors and their API tokens (agents/models.py, agents/tokens.py)."""

from __future__ import annotations

import base64
import logging
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.core.exceptions import ValidationError

from agents import tokens
from agents.models import AgentToken, Competitor, Release
from arena.logfmt import KeyValueFormatter
from cohorts.models import Entry
from core import clock
from tests.agents.helpers import make_cohort

pytestmark = pytest.mark.django_db


def public_key_b64(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def outside(slug: str = "team-agent", **kw) -> Competitor:
    fields = {
        "display_name": "Team Agent",
        "kind": Competitor.Kind.OUTSIDE,
        "team": "Team <b>X</b>",
        "contact": "private@example.org",
        "link": "https://example.org/agent",
        "agent_version": "1.0",
    }
    fields.update(kw)
    return Competitor.objects.create(slug=slug, **fields)


def test_an_outside_agent_has_no_endpoint_and_a_well_formed_key():
    agent = Competitor(
        slug="a", display_name="A", kind=Competitor.Kind.OUTSIDE, base_url="http://x.example/v1"
    )
    with pytest.raises(ValidationError) as err:
        agent.full_clean()
    assert "base_url" in err.value.message_dict
    agent.base_url = ""
    agent.public_key = base64.b64encode(b"short").decode()
    with pytest.raises(ValidationError, match="32 bytes; this is 5"):
        agent.full_clean()
    agent.public_key = "not base64!"
    with pytest.raises(ValidationError, match="Not base64"):
        agent.full_clean()
    agent.public_key = public_key_b64(Ed25519PrivateKey.generate())
    agent.full_clean()
    model = Competitor(slug="m", display_name="M", kind=Competitor.Kind.LLM,
                       public_key=agent.public_key)  # fmt: skip
    with pytest.raises(ValidationError, match="Only an outside agent signs"):
        model.full_clean()


def test_the_entry_is_pinned_to_a_release_naming_the_declared_version():
    agent = outside()
    make_cohort([agent])
    entry = Entry.objects.get()
    assert (entry.release.competitor, entry.release.agent_version) == (agent, "1.0")
    agent.agent_version = "1.1"
    agent.save()
    assert [r.agent_version for r in Release.objects.filter(competitor=agent)] == ["1.0", "1.1"]
    entry.refresh_from_db()
    assert entry.release.agent_version == "1.0"  # the open cohort keeps what it started with


def test_outside_agents_are_labelled_where_competitors_are_listed(client):
    outside()
    page = client.get("/competitors/").content.decode()
    assert "outside agent</span>" in page
    detail = client.get("/competitors/team-agent/").content.decode()
    assert "Team &lt;b&gt;X&lt;/b&gt;" in detail and "<b>X</b>" not in detail
    assert "private@example.org" not in detail  # the contact is for staff only


def test_a_token_is_stored_as_its_digest_and_refused_when_wrong_revoked_or_expired():
    agent = outside()
    issued = tokens.issue(agent, label="ci")
    row = AgentToken.objects.get()
    assert issued.token.startswith(row.prefix + "_") and len(issued.token) == 58
    stored = [str(v) for v in AgentToken.objects.values_list().get()]
    assert not any(issued.token in v for v in stored)
    assert row.digest == tokens.digest(issued.token)

    assert tokens.authenticate(issued.token).competitor == agent
    assert AgentToken.objects.get().last_used_at is not None
    wrong = issued.token[:-1] + ("A" if issued.token[-1] != "A" else "B")
    for bad in (wrong, "arena_short", "", issued.token + "x"):
        with pytest.raises(tokens.TokenRefused):
            tokens.authenticate(bad)

    tokens.revoke(row)
    with pytest.raises(tokens.TokenRefused, match="revoked"):
        tokens.authenticate(issued.token)
    later = tokens.issue(agent, expires_at=clock.now() + timedelta(hours=1))
    tokens.authenticate(later.token)
    with pytest.raises(tokens.TokenRefused, match="expired"):
        tokens.authenticate(later.token, now=clock.now() + timedelta(hours=2))


def test_tokens_go_to_outside_agents_only():
    model = Competitor.objects.create(slug="m", display_name="M", kind=Competitor.Kind.LLM)
    with pytest.raises(ValueError, match="outside agents only"):
        tokens.issue(model)


def test_the_admin_shows_a_new_token_once_and_never_again(admin_client):
    agent = outside()
    response = admin_client.post(
        "/admin/agents/agenttoken/add/",
        {"competitor": agent.pk, "label": "main", "rate_per_minute": 10},
    )
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    page = response.content.decode()
    row = AgentToken.objects.get()
    start = page.index(row.prefix + "_")
    token = page[start : start + 58]
    assert tokens.authenticate(token).pk == row.pk and row.rate_per_minute == 10
    for url in ("/admin/agents/agenttoken/", f"/admin/agents/agenttoken/{row.pk}/change/"):
        later = admin_client.get(url).content.decode()
        assert row.prefix in later and token not in later
    admin_client.post(
        "/admin/agents/agenttoken/",
        {"action": "revoke", "_selected_action": [row.pk]},
    )
    assert AgentToken.objects.get().revoked_at is not None


def test_a_token_never_reaches_a_log_line():
    agent = outside()
    token = tokens.issue(agent).token
    record = logging.LogRecord(
        "gunicorn.access", logging.INFO, __file__, 1, f"GET /api/agent/v1/week?token={token}",
        None, None,
    )
    line = KeyValueFormatter().format(record)
    assert token not in line and token[6:14] not in line and "token redacted" in line
