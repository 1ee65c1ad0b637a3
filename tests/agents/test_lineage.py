"""Lineage: an entry is pinned to the release its cohort opened with, against real fake servers.

A competitor's model id, endpoint and parameters are changed mid-cohort; the open cohort's entry
keeps calling the old model on the old server, a cohort opened afterwards calls the new one.
"""

from datetime import date, timedelta

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from agents.models import Release, ReleaseInUse
from cohorts.decisions.run import run_decision
from cohorts.models import Cohort, Decision, Entry
from cohorts.services import open_cohort
from cohorts.universe import freeze_universe
from tests.agents.helpers import (
    AT,
    KEY_ENV,
    WEEK_START,
    answer,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import FakeOpenAIServer, success

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_llm(settings, monkeypatch):
    settings.ARENA_LLM_TIMEOUT = 5
    settings.ARENA_LLM_BACKOFF_BASE = 0.01
    settings.ARENA_LLM_MAX_BACKOFF = 0.05
    monkeypatch.setenv(KEY_ENV, "sk-or-v1-test")


@pytest.fixture
def servers(settings):
    with FakeOpenAIServer() as old, FakeOpenAIServer() as new:
        settings.ARENA_LLM_ENDPOINTS = f"{old.base_url}|{KEY_ENV},{new.base_url}|{KEY_ENV}"
        yield old, new


def test_a_model_change_mid_cohort_applies_only_to_cohorts_opened_after_it(servers):
    old, new = servers
    make_markets(6)
    competitor = llm_competitor(old, model_id="openai/gpt-old", params={"temperature": 0})
    first = make_cohort([competitor])
    entry = first.entries.get()
    assert entry.release is not None and entry.release.number == 1
    universe = freeze_universe(first, 1, AT)
    old.enqueue(success(answer(universe)))
    week1 = run_decision(entry.pk, 1, AT)
    assert week1.status == Decision.Status.DONE and week1.release_id == entry.release_id

    # Staff move the competitor to another model, endpoint and temperature mid-cohort.
    competitor.model_id, competitor.base_url = "openai/gpt-new", new.base_url
    competitor.params = {"temperature": 0.7}
    competitor.save()
    assert list(competitor.releases.values_list("number", "model_id")) == [
        (1, "openai/gpt-old"),
        (2, "openai/gpt-new"),
    ]

    week2_at = AT + timedelta(days=7)
    universe2 = freeze_universe(first, 2, week2_at)
    old.enqueue(success(answer(universe2)))
    week2 = run_decision(entry.pk, 2, week2_at)

    assert week2.status == Decision.Status.DONE
    assert week2.release_id == entry.release_id  # still release 1
    sent = old.chat_requests[-1].json
    assert (sent["model"], sent["temperature"]) == ("openai/gpt-old", 0)
    assert len(old.chat_requests) == 2 and new.chat_requests == []
    assert week2.llm_calls.get().request["model"] == "openai/gpt-old"

    # The next cohort opened runs release 2, on the new endpoint.
    second, _ = open_cohort(WEEK_START + timedelta(days=7), competitors=[competitor], at=week2_at)
    new_entry = second.entries.get()
    assert new_entry.release.number == 2
    new_universe = freeze_universe(second, 1, week2_at)
    new.enqueue(success(answer(new_universe)))
    decision = run_decision(new_entry.pk, 1, week2_at)
    assert decision.status == Decision.Status.DONE
    sent = new.chat_requests[-1].json
    assert (sent["model"], sent["temperature"]) == ("openai/gpt-new", 0.7)
    assert decision.release.number == 2
    assert len(old.chat_requests) == 2


def test_an_unchanged_save_makes_no_release_and_a_queryset_update_is_caught(servers):
    old, _ = servers
    competitor = llm_competitor(old)
    competitor.display_name = "Renamed"  # not a model field
    competitor.save()
    assert competitor.releases.count() == 1
    # Values typed as text are the stored ones: "1.25" is the price already registered.
    competitor.price_in_per_m, competitor.knowledge_cutoff = "1.25", "2025-06-30"
    competitor.save()
    competitor.save()
    assert list(competitor.releases.values_list("number", "knowledge_cutoff")) == [
        (1, None),
        (2, date(2025, 6, 30)),
    ]
    # A model change that bypasses save() is still a new release when the next cohort opens.
    type(competitor).objects.filter(pk=competitor.pk).update(model_id="openai/other")
    cohort = make_cohort([type(competitor).objects.get(pk=competitor.pk)])
    assert cohort.entries.get().release.model_id == "openai/other"
    assert competitor.releases.count() == 3


def test_a_used_release_never_changes(servers):
    old, _ = servers
    competitor = llm_competitor(old)
    unused = Release.current(llm_competitor(old, slug="spare"))
    unused.model_id = "spare/fixed"
    unused.save()  # no entry used it: a mistake may still be fixed
    make_cohort([competitor])
    release = Entry.objects.get().release
    assert (release.number, release.model_id) == (1, "openai/gpt-test")

    release.model_id = "edited/after-use"
    with pytest.raises(ReleaseInUse, match=r"release 1 .* never changes \(model_id\)"):
        release.save()
    release.refresh_from_db()
    release.save()  # nothing changed: no write, no error
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic():
        Release.objects.filter(pk=release.pk).update(model_id="edited/by-update")
    with (
        pytest.raises((IntegrityError, DatabaseError)),
        transaction.atomic(),
        connection.cursor() as cur,
    ):
        cur.execute("UPDATE agents_release SET params = '{}' WHERE id = %s", [release.pk])
    release.refresh_from_db()
    assert release.model_id == "openai/gpt-test"


def test_an_entry_made_without_open_cohort_is_pinned_by_its_first_decision(servers):
    old, _ = servers
    make_markets(6)
    competitor = llm_competitor(old)
    cohort = Cohort.objects.create(week_start=WEEK_START, decision_weeks=4)
    entry = Entry.objects.create(cohort=cohort, competitor=competitor, cash=10000)
    assert entry.release is None
    universe = freeze_universe(cohort, 1, AT)
    old.enqueue(success(answer(universe)))
    decision = run_decision(entry.pk, 1, AT)
    entry.refresh_from_db()
    assert entry.release == Release.current(competitor) == decision.release


def test_the_admin_makes_a_release_per_model_change_and_shows_used_ones_read_only(
    servers, admin_client, settings
):
    old, new = servers
    competitor = llm_competitor(old)
    make_cohort([competitor])  # release 1 is used from now on
    form = {"slug": competitor.slug, "display_name": "GPT test", "kind": "llm", "replicates": 1,
            "provider": "openrouter", "model_id": "openai/gpt-next", "params": '{"temperature": 0}',
            "price_in_per_m": "1.25", "price_out_per_m": "10", "active": "on",
            "endpoint": f"{new.base_url}|{KEY_ENV}"}  # fmt: skip
    url = f"/admin/agents/competitor/{competitor.pk}/change/"
    assert admin_client.post(url, form).status_code == 302
    releases = list(competitor.releases.order_by("number"))
    assert [(r.number, r.model_id, r.base_url) for r in releases] == [
        (1, "openai/gpt-test", old.base_url),
        (2, "openai/gpt-next", new.base_url),
    ]
    page = admin_client.get(url).content.decode()
    assert "release 2</a>: openai/gpt-next" in page and "release 1</a>: openai/gpt-test" in page

    used = admin_client.get(f"/admin/agents/release/{releases[0].pk}/change/").content.decode()
    assert 'name="model_id"' not in used  # read-only: shown as text
    unused = admin_client.get(f"/admin/agents/release/{releases[1].pk}/change/").content.decode()
    assert 'name="model_id"' in unused
    # A forged POST to the used release changes nothing.
    admin_client.post(f"/admin/agents/release/{releases[0].pk}/change/", {"model_id": "x/y"})
    releases[0].refresh_from_db()
    assert releases[0].model_id == "openai/gpt-test"
