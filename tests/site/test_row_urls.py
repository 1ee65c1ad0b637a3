"""web/rows builds its links from a route reversed once: the same text reverse() gives, for ids
and slugs alike, and a slug the route refuses is still refused."""

import pytest
from django.urls import NoReverseMatch, reverse

from web.rows import competitor_url, decision_url, entry_url, market_url


@pytest.mark.parametrize("slug", ["gpt-5", "a", "claude_opus_4", "9876543210", "x-987654321-y"])
def test_a_competitors_link_is_what_reverse_gives(slug):
    assert competitor_url(slug) == reverse("competitor-detail", args=[slug])
    assert entry_url(7, slug) == reverse("entry-detail", args=[7, slug])


@pytest.mark.parametrize("slug", ["", "a b", "é", "a/b", "../admin"])
def test_a_slug_the_route_refuses_is_refused(slug):
    with pytest.raises(NoReverseMatch):
        competitor_url(slug)
    with pytest.raises(NoReverseMatch):
        entry_url(7, slug)


@pytest.mark.parametrize("pk", [1, 42, 987654321])
def test_id_links_are_what_reverse_gives(pk):
    assert market_url(pk) == reverse("market-detail", args=[pk])
    assert decision_url(pk) == reverse("decision-detail", args=[pk])
