"""/enter/ serves docs/enter-your-agent.md as a page (web/doc_pages.py), linked from /about/ and
/methodology/, with every character of the doc escaped."""

from __future__ import annotations

import pytest

from web.doc_pages import render_markdown

pytestmark = pytest.mark.django_db


def test_the_enter_page_is_the_doc_and_about_and_methodology_link_it(client):
    page = client.get("/enter/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<h1>Enter your agent</h1>" in html and "<h2>The weekly loop</h2>" in html
    assert "<code>Authorization: Bearer &lt;token&gt;</code>" in html
    # The JSON example inside the numbered list keeps its own indentation.
    assert '<pre><code>{&quot;cohort&quot;: 3, &quot;week&quot;: 2, &quot;answer&quot;: {\n  &quot;action' in html
    for source in ("/about/", "/methodology/"):
        assert 'href="/enter/"' in client.get(source).content.decode(), source


def test_markdown_is_escaped_before_its_marks_become_tags():
    title, body = render_markdown(
        "# A <b>title</b>\n\nText with <script>alert(1)</script> and `<i>code</i>` and **bold**.\n\n"
        "1. first\n   - nested <img src=x>\n2. second\n\n```\n  <pre>indented</pre>\n```\n"
    )
    assert title == "A <b>title</b>"  # the template escapes the title
    assert "<script>" not in body and "&lt;script&gt;" in body and "<img" not in body
    assert "<code>&lt;i&gt;code&lt;/i&gt;</code>" in body and "<strong>bold</strong>" in body
    assert body.count("<ol>") == 1 and body.count("<ul>") == 1  # one list, its second item kept
    assert "<pre><code>  &lt;pre&gt;indented&lt;/pre&gt;</code></pre>" in body
