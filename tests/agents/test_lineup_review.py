"""The weekly lineup review, end to end on real servers: the beat task reads a fake OpenRouter
catalog over HTTP (recorded payloads, tests/fakes/catalogs/), proposes on /admin/attention/,
and staff approve through the admin; the running cohort's entry keeps its release while the
next cohort's entry calls the new one on the fake model server.

The same flow in a rehearsal, on the workers and over HTTP: tests/rehearsal/test_rehearse_run.py
("lineup change").
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from agents.catalog import Catalog, Filters, ListedModel, configured_catalogs
from agents.models import Competitor, LineupProposal, LineupReview, Release
from agents.tasks import review_lineup
from cohorts.decisions.run import run_decision
from cohorts.models import Decision
from cohorts.services import open_cohort
from cohorts.universe import freeze_universe
from core import clock
from core.models import JobRun
from simulations.simllm import SimulatedLLMServer, ensure_simulated_competitors
from tests.agents.helpers import (
    WEEK_START,
    answer,
    fake_model_server,
    llm_competitor,
    make_markets,
)
from tests.fakes.catalog_server import CatalogServer, load_catalog
from tests.fakes.openai_server import success

pytestmark = pytest.mark.django_db

WEEK1 = WEEK_START + timedelta(minutes=40)  # the hourly catch-up's first tick of the week
WEEK2 = WEEK1 + timedelta(days=7)
ATTENTION = ("markets.view_market", "cohorts.view_decision", "core.view_jobrun")


@pytest.fixture
def catalog(settings):
    with CatalogServer(load_catalog("openrouter_week1")) as server:
        settings.ARENA_LINEUP_CATALOGS = f"openrouter={server.base_url}"
        settings.ARENA_LINEUP_PREFIXES = "openai/,anthropic/,google/,deepseek/,x-ai/,mistralai/"
        settings.ARENA_LINEUP_MIN_CONTEXT = 32000
        settings.ARENA_LINEUP_MAX_PRICE_PER_M = Decimal("20")
        settings.ARENA_LINEUP_TIMEOUT = 5
        yield server


def staff(client, *perms: str):
    user = get_user_model().objects.create_user(f"staff{len(perms)}", is_staff=True)
    for perm in (*ATTENTION, *perms):
        app, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    client.force_login(user)
    return client


def run_review(at):
    with clock.running_on(clock.SimulatedClock(at)):
        result = review_lineup.apply()
    assert result.successful(), result.traceback
    return result.get()


def pending(**kw) -> LineupProposal:
    return LineupProposal.objects.get(status=LineupProposal.Status.PENDING, **kw)


def test_a_price_change_approved_in_the_admin_is_the_next_cohorts_release_only(
    catalog, client, settings, monkeypatch
):
    with fake_model_server(settings, monkeypatch) as models:
        make_markets(6)
        gpt = llm_competitor(
            models, slug="gpt-5-1", model_id="openai/gpt-5.1", context_tokens=400000
        )
        deepseek = llm_competitor(
            models, slug="deepseek", model_id="deepseek/deepseek-v3.2-exp",
            price_in_per_m=Decimal("0.27"), price_out_per_m=Decimal("0.40"),
        )  # fmt: skip
        first, _ = open_cohort(WEEK_START, competitors=[gpt, deepseek], at=WEEK_START)
        running = first.entries.get(competitor=gpt)
        assert running.release.number == 1

        # Week 1: the first read of the catalog. Only the model it dates within the week is
        # new; the competitors' models are listed at the prices they run at.
        summary = run_review(WEEK1)
        assert summary["openrouter"]["new_model"] == 1, summary
        assert pending().model_id == "google/gemini-3-flash-preview"
        assert run_review(WEEK1 + timedelta(hours=1)) == {
            "skipped": "the review of the week of 2026-11-22 is done or running"
        }
        assert LineupReview.objects.count() == 1

        # Week 2: GPT-5.1's completion price drops, DeepSeek V3.2 leaves the catalog, three
        # models are new (one passes the filters: Grok 5 costs more, Qwen3.5 4B is too small).
        catalog.catalog = load_catalog("openrouter_week2")
        run_review(WEEK2)
        changed = pending(kind="changed")
        assert (changed.competitor, changed.price_out_per_m) == (gpt, Decimal("8"))
        assert changed.detail == "completion price $10 → $8 per M tokens"
        assert pending(kind="new_model", model_id="deepseek/deepseek-v4").context_length == 262144
        assert not LineupProposal.objects.filter(model_id__in=["x-ai/grok-5", "qwen/qwen3.5-4b"])
        gone = LineupProposal.objects.filter(kind="disappeared").order_by("model_id")
        assert [(p.model_id, p.competitor) for p in gone] == [
            ("deepseek/deepseek-v3.2-exp", deepseek),
            ("mistralai/mistral-small-3.2-24b-instruct", None),
        ]
        assert JobRun.objects.filter(job="review_lineup", status="ok").count() == 3
        assert Competitor.objects.count() == 2 and gpt.releases.count() == 1  # nothing added

        # Staff who may make releases but not competitors: the page offers what they may do,
        # and a new competitor is refused without a trace.
        admin = staff(client, "agents.add_release", "agents.change_competitor")
        page = admin.get("/admin/attention/").content.decode()
        assert "completion price $10 → $8 per M tokens" in page
        assert "New release with these figures" in page
        assert "Add as a new competitor" not in page
        new = pending(model_id="deepseek/deepseek-v4")
        refused = admin.post(
            f"/admin/agents/lineupproposal/{new.pk}/decide/", {"action": "competitor"}
        )
        assert refused.status_code == 403
        assert Competitor.objects.count() == 2 and pending(pk=new.pk)

        # One click: a new release of GPT-5.1 at the new price.
        done = admin.post(
            f"/admin/agents/lineupproposal/{changed.pk}/decide/", {"action": "release"},
            follow=True,
        )  # fmt: skip
        assert done.status_code == 200
        assert "release 2 of gpt-5-1, for the cohorts opened from now on" in done.content.decode()
        changed.refresh_from_db()
        assert (changed.status, changed.decided_by) == ("approved", "staff2")
        assert list(gpt.releases.values_list("number", "price_out_per_m")) == [
            (1, Decimal("10")),
            (2, Decimal("8")),
        ]
        again = admin.post(
            f"/admin/agents/lineupproposal/{changed.pk}/decide/", {"action": "release"},
            follow=True,
        )  # fmt: skip
        assert "was already approved by staff2" in again.content.decode()
        assert gpt.releases.count() == 2

        # The running entry decides its week 2 on release 1; the next cohort's on release 2.
        universe = freeze_universe(first, 2, WEEK2)
        models.enqueue(success(answer(universe)))
        kept = run_decision(running.pk, 2, WEEK2)
        assert kept.status == Decision.Status.DONE
        assert kept.release.number == 1 and kept.release.price_out_per_m == Decimal("10")
        gpt.refresh_from_db()  # as the beat's open_cohort reads it
        second, _ = open_cohort(WEEK_START + timedelta(days=7), competitors=[gpt], at=WEEK2)
        entry = second.entries.get()
        models.enqueue(success(answer(freeze_universe(second, 1, WEEK2))))
        moved = run_decision(entry.pk, 1, WEEK2)
        assert moved.status == Decision.Status.DONE
        assert moved.release == Release.objects.get(competitor=gpt, number=2)
        assert moved.release.price_out_per_m == Decimal("8")
        assert models.chat_requests[-1].json["model"] == "openai/gpt-5.1"
        running.refresh_from_db()
        assert running.release.number == 1


def test_a_new_model_becomes_a_competitor_or_a_release_in_one_click(catalog, client):
    gpt = llm_competitor(None, slug="gpt-5-1", model_id="openai/gpt-5.1", context_tokens=400000)
    run_review(WEEK1)
    flash = pending(model_id="google/gemini-3-flash-preview")
    admin = staff(client, "agents.add_competitor")
    done = admin.post(f"/admin/agents/lineupproposal/{flash.pk}/decide/", {"action": "competitor"})
    assert done.status_code == 302
    made = Competitor.objects.get(model_id="google/gemini-3-flash-preview")
    assert (made.slug, made.display_name, made.provider, made.active) == (
        "google-gemini-3-flash-preview", "Google: Gemini 3 Flash Preview", "openrouter", True,
    )  # fmt: skip
    assert (made.context_tokens, made.price_in_per_m, made.price_out_per_m) == (
        1048576, Decimal("0.3"), Decimal("2.5"),
    )  # fmt: skip
    assert made.releases.count() == 1
    # The catalog is not the default endpoint here, so the competitor calls the catalog's.
    assert made.base_url == catalog.base_url

    catalog.catalog = load_catalog("openrouter_week2")
    run_review(WEEK2)
    v4 = pending(model_id="deepseek/deepseek-v4")
    releaser = staff(client, "agents.add_release", "agents.change_competitor")
    bad = releaser.post(
        f"/admin/agents/lineupproposal/{v4.pk}/decide/", {"action": "release", "competitor": "x"}
    )
    assert bad.status_code == 400 and b"competitor must be a competitor's id" in bad.content
    unknown = releaser.post(f"/admin/agents/lineupproposal/{v4.pk}/decide/", {"action": "merge"})
    assert unknown.status_code == 400
    releaser.post(
        f"/admin/agents/lineupproposal/{v4.pk}/decide/",
        {"action": "release", "competitor": str(gpt.pk)},
    )
    gpt.refresh_from_db()
    assert (gpt.model_id, gpt.context_tokens) == ("deepseek/deepseek-v4", 262144)
    assert list(gpt.releases.values_list("number", "model_id")) == [
        (1, "openai/gpt-5.1"),
        (2, "deepseek/deepseek-v4"),
    ]


def test_a_catalog_that_cannot_be_read_is_an_attention_item(catalog, settings, client):
    settings.ARENA_LINEUP_MAX_BYTES = 200_000
    settings.ARENA_LINEUP_TIMEOUT = 1
    weeks = iter(WEEK1 + timedelta(days=7 * n) for n in range(10))
    reasons = {}
    for fault in ("status", "garbage", "not_a_catalog", "huge", "trickle"):
        catalog.fault = fault
        summary = run_review(next(weeks))
        reasons[fault] = summary["openrouter"]["error"]
        item = pending(kind="unreadable")
        assert item.detail.startswith(catalog.base_url) and reasons[fault] in item.detail
        item.status = LineupProposal.Status.DISMISSED
        item.save()
    assert reasons["status"] == "GET /models: HTTP 503: Service temporarily unavailable [code 503]"
    assert reasons["garbage"] == "GET /models: response is not JSON"
    assert reasons["not_a_catalog"] == "GET /models: no `data` list in the response"
    assert reasons["huge"] == "GET /models failed: response body larger than 200000 bytes"
    assert reasons["trickle"] == "GET /models failed: no complete answer within 1s"
    assert not JobRun.objects.filter(job="review_lineup").exclude(status="ok").exists()
    assert not LineupProposal.objects.exclude(kind="unreadable").exists()

    # It waits on the attention page until staff dismiss it.
    catalog.fault = "status"
    run_review(next(weeks))
    admin = staff(client, "agents.change_lineupproposal")
    page = admin.get("/admin/attention/").content.decode()
    assert "Catalog could not be read" in page and "HTTP 503" in page
    item = pending(kind="unreadable")
    admin.post(f"/admin/agents/lineupproposal/{item.pk}/decide/", {"action": "dismiss"})
    item.refresh_from_db()
    assert item.status == "dismissed"


def test_catalog_text_is_escaped_and_odd_entries_are_skipped(catalog, client):
    hostile = load_catalog("openrouter_week1")
    flash = hostile["data"][-1]
    flash["name"] = 'Flash <script>alert("x")</script>'
    hostile["data"] += [
        {"id": 42, "name": "not an id"},
        {"id": "has a space/model", "name": "spaces"},
        "not an object",
        {**flash, "name": "a duplicate id is skipped"},
    ]
    catalog.catalog = hostile
    summary = run_review(WEEK1)
    assert summary["openrouter"]["skipped"] == 4
    admin = staff(client)
    page = admin.get("/admin/attention/").content.decode()
    assert "<script>alert" not in page
    assert "Flash &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # The router model's "-1" prices are unknown, never negative or zero.
    from agents.models import CatalogModel

    auto = CatalogModel.objects.get(model_id="openrouter/auto")
    assert (auto.price_in_per_m, auto.price_out_per_m) == (None, None)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_reviews_at_once_review_the_week_once(catalog):
    llm_competitor(None, slug="gpt-5-1", model_id="openai/gpt-5.1", context_tokens=400000)
    barrier = threading.Barrier(2)
    results: list = []

    def review() -> None:
        barrier.wait()
        try:
            with clock.running_on(clock.SimulatedClock(WEEK1)):
                results.append(review_lineup())
        finally:
            connection.close()

    threads = [threading.Thread(target=review) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 2
    skipped = [r for r in results if "skipped" in r]
    assert len(skipped) == 1, results
    assert LineupReview.objects.count() == 1 and catalog.requests == 1
    assert LineupProposal.objects.count() == 1


def test_the_simulated_endpoint_serves_a_catalog_a_review_reads(settings, client):
    """The rehearsal's stand-in model provider lists its models like OpenRouter: a review of it
    sees a repriced model and one taken out of the listing."""
    competitors = ensure_simulated_competitors()
    Competitor.objects.filter(pk__in=[c.pk for c in competitors]).update(active=True)
    repriced, unlisted = competitors[0], competitors[1]
    with SimulatedLLMServer(latency_scale=0) as server:
        settings.ARENA_LINEUP_CATALOGS = f"simulated={server.base_url}"
        settings.ARENA_LINEUP_TIMEOUT = 5
        server.reprice(repriced.model_id, "0.000001", "0.000002")
        server.unlist(unlisted.model_id)
        summary = run_review(WEEK1)
    assert summary["simulated"]["models"] == len(competitors) - 1
    change = pending(kind="changed")
    assert change.competitor == repriced
    assert change.detail == (
        "prompt price $0 → $1 per M tokens; completion price $0 → $2 per M tokens"
    )
    assert pending(kind="disappeared").competitor == unlisted
    admin = staff(client, "agents.add_release", "agents.change_competitor")
    admin.post(f"/admin/agents/lineupproposal/{change.pk}/decide/", {"action": "release"})
    latest = Release.current(Competitor.objects.get(pk=repriced.pk))
    assert (latest.number, latest.price_in_per_m) == (2, Decimal("1"))


def test_catalogs_and_filters_read_from_settings(settings):
    settings.ARENA_LINEUP_CATALOGS = (
        "https://openrouter.ai/api/v1, local=http://127.0.0.1:8080/v1?team=a "
    )
    assert configured_catalogs() == [
        Catalog("openrouter", "https://openrouter.ai/api/v1"),
        Catalog("local", "http://127.0.0.1:8080/v1?team=a"),
    ]
    settings.ARENA_LINEUP_CATALOGS = "openrouter=ftp://example.org"
    with pytest.raises(ImproperlyConfigured, match="is not name=http"):
        configured_catalogs()
    filters = Filters(("openai/",), 100000, Decimal("5"))
    model = ListedModel("openai/o9", "o9", 200000, Decimal("1"), Decimal("4"), None)
    assert filters.why_not(model) == ""
    assert filters.why_not(replace(model, model_id="x-ai/grok")) == "provider not reviewed"
    assert filters.why_not(replace(model, context_length=None)) == "context under 100000"
    assert filters.why_not(replace(model, price_out_per_m=Decimal("5.01"))).startswith("price")
    assert filters.why_not(replace(model, price_in_per_m=None)).startswith("price unknown")
