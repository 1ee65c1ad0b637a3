"""Model output and market text are untrusted: they render escaped and inert everywhere."""

import json
import re

import pytest
from django.urls import reverse

from tests.site.conftest import XSS

pytestmark = pytest.mark.django_db


@pytest.fixture
def hostile(world):
    market = world.market(
        question=f"Question {XSS}",
        description=f"Rules {XSS}",
        outcomes=["Yes</script>", "No"],
        last_prices={"Yes</script>": "0.4", "No": "0.6"},
        event_title=XSS,
    )
    comp = world.competitor("hostile-model")
    cohort = world.cohort(label=f"Label {XSS}")
    world.universe(cohort)
    entry = world.entry(cohort, comp)
    decision = world.decision(
        entry, market=market, reasoning=f"Reasoning {XSS}", raw_response=f"Raw {XSS}"
    )
    decision.validation_errors = [f"Error {XSS}"]
    decision.user_prompt = f"Prompt {XSS}"
    decision.save()
    world.snapshots(entry)
    world.score_run("live")
    return world, market, cohort, entry, decision


def assert_inert(body: str) -> None:
    assert "<script>alert(1)</script>" not in body
    assert "<img src=x" not in body
    assert "<b>bold</b>" not in body
    assert 'onerror="alert' not in body
    # every <script> tag on the page is ours: a static file or JSON data
    for tag in re.findall(r"<script\b[^>]*>", body):
        assert "src=" in tag or 'type="application/json"' in tag, tag


def test_pages_escape_model_output_and_market_text(client, hostile):
    world, market, cohort, entry, decision = hostile
    pages = [
        f"/decisions/{decision.pk}/",
        f"/markets/{market.pk}/",
        "/markets/",
        f"/cohorts/{cohort.pk}/",
        reverse("entry-detail", args=[cohort.pk, entry.competitor.slug]),
        "/cohorts/",
        "/",
    ]
    for url in pages:
        body = client.get(url).content.decode()
        assert_inert(body)
    decision_page = client.get(f"/decisions/{decision.pk}/").content.decode()
    assert "Reasoning &lt;script&gt;alert(1)&lt;/script&gt;" in decision_page
    assert "Raw &lt;script&gt;alert(1)&lt;/script&gt;" in decision_page
    assert "&lt;b&gt;bold&lt;/b&gt;" in decision_page
    market_page = client.get(f"/markets/{market.pk}/").content.decode()
    assert "Question &lt;script&gt;" in market_page
    assert "Rules &lt;script&gt;" in market_page


def test_chart_data_cannot_break_out_of_json_script(client, hostile):
    world, market, *_ = hostile
    body = client.get(f"/markets/{market.pk}/").content.decode()
    # the outcome name travels in chart JSON; json_script escapes <, > and &
    block = re.search(r'<script id="price-data" type="application/json">(.*?)</script>', body, re.S)
    assert block is not None
    assert "</script>" not in block.group(1)
    assert "Yes\\u003C/script\\u003E" in block.group(1)
    assert json.loads(block.group(1))["lines"][0]["label"] == "Yes</script>"


def test_api_returns_text_verbatim_as_json(client, hostile):
    *_, decision = hostile
    response = client.get(f"/api/decisions/{decision.pk}")
    assert response["Content-Type"] == "application/json"
    assert response.json()["reasoning"] == f"Reasoning {XSS}"


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(document.domain)", " JavaScript:alert(1)", "data:text/html,<script>x</script>",
     "vbscript:msgbox(1)", "//evil.example/x", "http:///no-host"],
)  # fmt: skip
def test_a_market_url_that_is_not_http_is_never_a_link(client, world, url):
    # Upstream or replay data with a javascript: URL was rendered as a link (only the CSP
    # stopped it); it must not reach the page or an API client at all.
    market = world.market(url=url)
    page = client.get(f"/markets/{market.pk}/").content.decode()
    assert "Source</dt>" not in page
    assert "javascript:" not in page.lower() and "vbscript:" not in page.lower()
    assert client.get(f"/api/markets/{market.pk}").json()["url"] is None


def test_an_http_market_url_is_a_link(client, world):
    market = world.market(url="https://polymarket.com/event/x/y")
    page = client.get(f"/markets/{market.pk}/").content.decode()
    assert 'href="https://polymarket.com/event/x/y"' in page
    assert (
        client.get(f"/api/markets/{market.pk}").json()["url"] == "https://polymarket.com/event/x/y"
    )
