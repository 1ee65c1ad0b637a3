"""Pages, the API and the decisions export name the release each decision called, and the
competitor page lists its releases with the cohorts that ran each."""

import csv
import io
import json
from datetime import timedelta

import pytest

from cohorts.decisions.run import run_decision
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


@pytest.fixture
def lineage(settings, monkeypatch):
    """Cohort 1 decided on release 1 (old model, old server); the model then changed, so
    cohort 2 (opened a week later) decided on release 2."""
    settings.ARENA_LLM_TIMEOUT = 5
    monkeypatch.setenv(KEY_ENV, "sk-or-v1-test")
    with FakeOpenAIServer() as old, FakeOpenAIServer() as new:
        settings.ARENA_LLM_ENDPOINTS = f"{old.base_url}|{KEY_ENV},{new.base_url}|{KEY_ENV}"
        make_markets(6)
        competitor = llm_competitor(old, model_id="openai/gpt-old")
        first = make_cohort([competitor])
        old.enqueue(success(answer(freeze_universe(first, 1, AT))))
        d1 = run_decision(first.entries.get().pk, 1, AT)
        competitor.model_id, competitor.base_url = "openai/gpt-new", new.base_url
        competitor.save()
        later = AT + timedelta(days=7)
        second, _ = open_cohort(WEEK_START + timedelta(days=7), competitors=[competitor], at=later)
        new.enqueue(success(answer(freeze_universe(second, 1, later))))
        d2 = run_decision(second.entries.get().pk, 1, later)
        yield {"competitor": competitor, "cohorts": (first, second), "decisions": (d1, d2),
               "hosts": (old.base_url.split("/")[2], new.base_url.split("/")[2])}  # fmt: skip


def test_the_decision_page_names_the_release(client, lineage):
    d1, d2 = lineage["decisions"]
    old_host, new_host = lineage["hosts"]
    page = client.get(f"/decisions/{d1.pk}/").content.decode()
    assert "release 1 of gpt-test" in page
    assert "<code>openai/gpt-old</code> via openrouter at <code>" + old_host in page
    page = client.get(f"/decisions/{d2.pk}/").content.decode()
    assert "release 2 of gpt-test" in page and new_host in page and "gpt-old" not in page


def test_the_competitor_page_lists_releases_with_their_cohorts(client, lineage):
    first, second = lineage["cohorts"]
    page = client.get(f"/competitors/{lineage['competitor'].slug}/").content.decode()
    section = page[page.index('id="releases-h"') :]
    rows = section.split("<tr>")[2:]  # after the header row
    assert len(rows) == 2
    assert rows[0].startswith('<th scope="row">2</th>') and "openai/gpt-new" in rows[0]
    assert f"/cohorts/{second.pk}/" in rows[0] and f"/cohorts/{first.pk}/" not in rows[0]
    assert rows[1].startswith('<th scope="row">1</th>') and "openai/gpt-old" in rows[1]
    assert f"/cohorts/{first.pk}/" in rows[1] and f"/cohorts/{second.pk}/" not in rows[1]


def test_the_api_and_the_decisions_export_carry_the_release(client, lineage):
    d1, d2 = lineage["decisions"]
    old_host, _ = lineage["hosts"]
    body = client.get(f"/api/decisions/{d1.pk}").json()
    assert body["release"] == {
        "number": 1,
        "model_id": "openai/gpt-old",
        "provider": "openrouter",
        "endpoint": f"http://{old_host}/api/v1",  # the fake server's base URL, as stored
        "endpoint_host": old_host,
        "knowledge_cutoff": None,
    }
    assert body["seal"] is not None  # the other keys are all still there
    response = client.get("/exports/decisions.csv?scope=live&since=2026-11-01&until=2026-12-31")
    text = b"".join(response.streaming_content).decode()
    table = list(csv.reader(io.StringIO(text)))
    header = table[0]
    at = header.index("record_hash")  # columns are appended, never reordered
    assert header[at : at + 6] == ["record_hash", "week_root", "release_number",
                                   "release_model_id", "release_provider", "release_endpoint"]  # fmt: skip
    by_id = {row[0]: dict(zip(header, row)) for row in table[1:]}
    assert (by_id[str(d1.pk)]["release_number"], by_id[str(d1.pk)]["release_model_id"]) == (
        "1",
        "openai/gpt-old",
    )
    assert by_id[str(d2.pk)]["release_model_id"] == "openai/gpt-new"
    rows = json.loads(
        b"".join(
            client.get(
                "/exports/decisions.json?scope=live&since=2026-11-01&until=2026-12-31"
            ).streaming_content
        )
    )
    items = rows["rows"] if isinstance(rows, dict) else rows
    assert {r["release_number"] for r in items} == {1, 2}


def test_calls_of_another_model_from_before_releases_are_still_pointed_out(client, lineage):
    """A decision made before releases could hold calls of two model ids (a re-run after the
    competitor changed); its page still says where the model id changed."""
    d1, _ = lineage["decisions"]
    first = d1.llm_calls.get()
    d1.llm_calls.create(
        attempt=2,
        phase="initial",
        request={**first.request, "model": "openai/gpt-other"},
        raw_response="{}",
        started_at=first.started_at,
    )
    page = client.get(f"/decisions/{d1.pk}/").content.decode()
    assert "model id changed from openai/gpt-old to openai/gpt-other" in page
