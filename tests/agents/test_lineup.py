"""The default lineup (seeded by `arena up`), the admin re-run action's service, `arena decide`."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import Competitor
from agents.services import DEFAULT_LINEUP, ensure_default_lineup
from cohorts.models import Decision
from cohorts.services import mark_decisions_retryable
from tests.agents.helpers import AT, baseline_competitor, make_cohort, make_markets

pytestmark = pytest.mark.django_db


def test_default_lineup_has_seven_llm_families_and_five_baselines():
    created = ensure_default_lineup()

    assert created == len(DEFAULT_LINEUP) == 12
    llms = Competitor.objects.filter(kind=Competitor.Kind.LLM)
    assert sorted(llms.values_list("family", flat=True)) == sorted(
        ["GPT", "Gemini", "Grok", "Claude", "DeepSeek", "Kimi", "Qwen"]
    )
    for c in llms:
        assert "/" in c.model_id and c.provider == "openrouter"
        assert c.params["temperature"] == 0 and c.params["max_tokens"] > 0
        assert c.price_in_per_m > 0 and c.price_out_per_m > 0
        assert c.base_url == "" and c.api_key_env == ""  # the default endpoint and key
    strategies = Competitor.objects.filter(kind=Competitor.Kind.BASELINE).values_list(
        "strategy", flat=True
    )
    assert sorted(strategies) == sorted(Competitor.Strategy.values)


def test_lineup_is_idempotent_and_respects_staff_edits():
    ensure_default_lineup()
    Competitor.objects.filter(slug="grok-4").delete()

    assert ensure_default_lineup() == 0
    assert not Competitor.objects.filter(slug="grok-4").exists()


def test_mark_retryable_only_touches_failed_or_skipped():
    make_markets(2)
    cohort = make_cohort([baseline_competitor("cash"), baseline_competitor("market")])
    e1, e2 = cohort.entries.order_by("id")
    Decision.objects.create(entry=e1, week=1, status="failed", claimed_at=AT)
    Decision.objects.create(entry=e2, week=1, status="done", claimed_at=AT)

    assert mark_decisions_retryable(Decision.objects.all()) == 1
    assert set(Decision.objects.values_list("status", flat=True)) == {"retryable", "done"}


def test_arena_decide_sync_runs_every_entry(settings):
    make_markets(30)
    cohort = make_cohort([baseline_competitor("favorite"), baseline_competitor("cash")])
    out = StringIO()

    call_command("arena", "decide", "--cohort", str(cohort.pk), "--week", "1", "--sync", stdout=out)

    assert "decided 2 entries: 2 done" in out.getvalue()
    assert Decision.objects.filter(entry__cohort=cohort, status="done").count() == 2


def test_arena_decide_rejects_unknown_cohort():
    with pytest.raises(CommandError, match="no cohort with id 999"):
        call_command("arena", "decide", "--cohort", "999", stdout=StringIO())


def test_admin_shows_competitors_and_failed_decisions_with_their_calls(admin_client):
    from cohorts.models import LLMCall

    ensure_default_lineup()
    make_markets(2)
    cohort = make_cohort([baseline_competitor("cash")])
    decision = Decision.objects.create(
        entry=cohort.entries.get(), week=1, status="failed", claimed_at=AT, error="HTTP 401: nope"
    )
    LLMCall.objects.create(
        decision=decision,
        attempt=1,
        http_status=401,
        error="HTTP 401: No auth credentials found",
        started_at=AT,
    )
    competitor = Competitor.objects.get(slug="claude-sonnet-4-5")

    assert admin_client.get(f"/admin/agents/competitor/{competitor.pk}/change/").status_code == 200
    listing = admin_client.get("/admin/cohorts/decision/?status__exact=failed")
    assert listing.status_code == 200 and str(decision.pk) in listing.content.decode()
    page = admin_client.get(f"/admin/cohorts/decision/{decision.pk}/change/").content.decode()
    assert "No auth credentials found" in page
    assert admin_client.get("/admin/cohorts/llmcall/?http_status=401").status_code == 200
    assert admin_client.get("/admin/cohorts/forecast/").status_code == 200


def test_admin_rerun_action_leaves_an_audit_row(admin_client):
    from django.contrib.admin.models import LogEntry

    make_markets(2)
    cohort = make_cohort([baseline_competitor("cash")])
    failed = Decision.objects.create(
        entry=cohort.entries.get(), week=1, status="failed", claimed_at=AT, error="HTTP 401"
    )
    resp = admin_client.post(
        "/admin/cohorts/decision/",
        {"action": "rerun", "_selected_action": [failed.pk]},
    )
    assert resp.status_code == 302
    failed.refresh_from_db()
    assert failed.status == "retryable"
    entry = LogEntry.objects.get(object_id=str(failed.pk))
    assert entry.user.username == "admin" and "retryable" in entry.get_change_message()


def test_the_admin_offers_only_the_operators_endpoints(admin_client, settings):
    settings.ARENA_LLM_ENDPOINTS = (
        "http://127.0.0.1:11434/v1,https://api.example.com/v1|EXAMPLE_KEY"
    )
    page = admin_client.get("/admin/agents/competitor/add/").content.decode()
    assert 'name="base_url"' not in page and 'name="api_key_env"' not in page  # no free text
    assert "https://api.example.com/v1 (key from $EXAMPLE_KEY)" in page
    form = {"slug": "local", "display_name": "Local", "kind": "llm", "replicates": 1,
            "params": "{}", "active": "on"}  # fmt: skip
    # A value not on the list (as a forged POST would send) is refused ...
    forged = admin_client.post("/admin/agents/competitor/add/",
                               {**form, "endpoint": "http://evil.example:9|SECRET_KEY"})  # fmt: skip
    assert forged.status_code == 200 and not Competitor.objects.filter(slug="local").exists()
    # ... an allowed one is stored as the pair.
    admin_client.post("/admin/agents/competitor/add/",
                      {**form, "endpoint": "https://api.example.com/v1|EXAMPLE_KEY"})  # fmt: skip
    local = Competitor.objects.get(slug="local")
    assert (local.base_url, local.api_key_env) == ("https://api.example.com/v1", "EXAMPLE_KEY")


def test_a_stored_endpoint_off_the_list_shows_as_not_allowed_and_cannot_be_kept(
    admin_client, settings
):
    settings.ARENA_LLM_ENDPOINTS = ""
    old = Competitor.objects.create(slug="old", display_name="Old", kind="llm",
                                    base_url="http://10.9.9.9:8000/v1", api_key_env="SECRET_KEY")  # fmt: skip
    page = admin_client.get(f"/admin/agents/competitor/{old.pk}/change/").content.decode()
    assert "Not allowed: endpoint http://10.9.9.9:8000/v1 (key from $SECRET_KEY)" in page
    form = {"slug": "old", "display_name": "Old", "kind": "llm", "replicates": 1,
            "params": "{}", "endpoint": "not-allowed"}  # fmt: skip
    response = admin_client.post(f"/admin/agents/competitor/{old.pk}/change/", form)
    assert "pick an allowed one" in response.content.decode()
    admin_client.post(f"/admin/agents/competitor/{old.pk}/change/", {**form, "endpoint": ""})
    old.refresh_from_db()
    assert (old.base_url, old.api_key_env) == ("", "")  # back on the default endpoint


def test_a_simulated_competitor_cannot_be_given_a_remote_endpoint(admin_client, settings):
    # The model refuses a simulated competitor off loopback or with a key, on fields the form
    # does not have: the refusal must land on `endpoint`, not raise (a ValueError, a 500).
    settings.ARENA_LLM_ENDPOINTS = "https://api.example.com/v1|EXAMPLE_KEY,http://127.0.0.1:8765/v1"
    form = {"slug": "sim", "display_name": "Sim", "kind": "llm", "replicates": 1,
            "params": "{}", "simulated": "on"}  # fmt: skip
    remote = admin_client.post("/admin/agents/competitor/add/",
                               {**form, "endpoint": "https://api.example.com/v1|EXAMPLE_KEY"})  # fmt: skip
    assert remote.status_code == 200 and not Competitor.objects.filter(slug="sim").exists()
    assert "only calls a loopback endpoint" in remote.content.decode()
    assert "never gets an API key" in remote.content.decode()
    admin_client.post("/admin/agents/competitor/add/",
                      {**form, "endpoint": "http://127.0.0.1:8765/v1"})  # fmt: skip
    sim = Competitor.objects.get(slug="sim")
    assert sim.simulated and sim.base_url == "http://127.0.0.1:8765/v1" and not sim.api_key_env


def test_decision_audit_admin_urls_from_before_the_move_still_lead_there(admin_client):
    """The decision audit's admin pages live under cohorts; bookmarks of the agents admin URLs
    follow with their query string, and a POST keeps its method (308)."""
    old = admin_client.get("/admin/agents/decision/?status__exact=failed")
    assert old.status_code == 308
    assert old["Location"] == "/admin/cohorts/decision/?status__exact=failed"
    assert admin_client.get("/admin/agents/llmcall/7/change/")["Location"] == (
        "/admin/cohorts/llmcall/7/change/"
    )
    assert admin_client.get("/admin/agents/competitor/").status_code == 200
