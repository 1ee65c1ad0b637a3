"""Table bodies built in Python escape what `{{ }}` escapes and keep what it keeps."""

from __future__ import annotations

import pytest
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

from web.table_html import esc

UNTRUSTED = [
    '<script>alert("x")</script>',
    'Tom & Jerry\'s "model"',
    "a\u202ebidi",
    "",
    12,
    None,
    3.25,
]


@pytest.mark.parametrize("value", UNTRUSTED)
def test_esc_prints_what_the_template_engine_prints(value):
    assert esc(value) == str(conditional_escape(value))


def test_esc_keeps_html_already_marked_safe():
    swatch = mark_safe('<span class="swatch" style="--c:#123"></span>')
    assert esc(swatch) == str(swatch)


HOSTILE = '<img src=x onerror="alert(1)"> & Co'


@pytest.mark.parametrize("path", ["/", "partial", "cohort"])
def test_a_hostile_competitor_name_is_printed_escaped_in_every_table(client, arena_world, path):
    from agents.models import Competitor

    Competitor.objects.filter(slug="alpha-model").update(display_name=HOSTILE)
    if path == "partial":
        response = client.get(
            "/?sort=brier", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="leaderboard-table"
        )
    elif path == "cohort":
        response = client.get(f"/cohorts/{arena_world.cohort_main.pk}/")
    else:
        response = client.get(path)
    body = response.content.decode()
    assert response.status_code == 200
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; Co" in body
    assert "<img src=x" not in body


@pytest.mark.parametrize(
    "text",
    ["", "short", "x" * 160, "y" * 161, "word " * 80, "é" * 170, "e\u0301" * 170, "a\u202eb" * 90],
)
def test_a_reasoning_snippet_is_cut_as_truncator_cuts_it(text):
    from django.utils.text import Truncator

    from web.rows import snippet

    assert snippet(text, 160) == Truncator(text).chars(160)
