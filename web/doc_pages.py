"""Pages made from the docs folder: /enter/ is docs/enter-your-agent.md, so teams read on the site
the same text the repository holds (one source, never a copy to keep in step).

The Markdown is the small subset the doc uses: # headings, paragraphs, - and 1. lists (nested by
indentation), ``` fenced code, `code` and **bold**. Every character of the text is escaped before
the few inline marks become tags, so nothing in a doc can inject markup.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

ITEM = re.compile(r"^( *)(-|\d+\.) +(.*)$")
INLINE = [(re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
          (re.compile(r"\*\*([^*]+)\*\*"), r"<strong>\1</strong>")]  # fmt: skip


def _inline(text: str) -> str:
    out = escape(text)
    for pattern, tag in INLINE:
        out = pattern.sub(tag, out)
    return out


def render_markdown(text: str) -> tuple[str, SafeString]:
    """The doc's first heading (the page title) and its body as HTML."""
    html: list[str] = []
    title = ""
    para: list[str] = []
    lists: list[tuple[int, str]] = []  # open lists: (indent, "ul"|"ol")
    lines = text.splitlines()
    i = 0

    def flush() -> None:
        if para:
            html.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()

    def close_lists(indent: int = -1) -> None:
        while lists and lists[-1][0] > indent:
            html.append(f"</li></{lists.pop()[1]}>")

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines)
            )
            margin = len(line) - len(line.lstrip(" "))  # a fence inside a list item is indented
            code = "\n".join(lines[k][margin:] if not lines[k][:margin].strip() else lines[k].lstrip()
                             for k in range(i + 1, end))  # fmt: skip
            html.append(f"<pre><code>{escape(code)}</code></pre>")
            i = end + 1
            continue
        heading = re.match(r"^(#{1,3}) +(.*)$", line)
        item = ITEM.match(line)
        if heading:
            flush()
            close_lists()
            level = len(heading.group(1))
            title = title or heading.group(2)
            if level > 1:
                html.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif item:
            flush()
            indent, kind = len(item.group(1)), "ol" if item.group(2)[0].isdigit() else "ul"
            if lists and lists[-1][0] > indent:
                close_lists(indent)
            if lists and lists[-1][0] == indent:
                html.append("</li><li>")
            else:
                html.append(f"<{kind}><li>")
                lists.append((indent, kind))
            para.append(item.group(3))
        elif not stripped:
            flush()
            following = lines[i + 1] if i + 1 < len(lines) else ""
            # A list ends at the first unindented line that is not one of its items.
            if (
                lists
                and following.strip()
                and not following.startswith(" ")
                and not ITEM.match(following)
            ):
                close_lists()
        else:
            para.append(stripped)
        i += 1
    flush()
    close_lists()
    return title, mark_safe("\n".join(html))  # every text was escaped in _inline / escape


@cache
def _enter_doc() -> tuple[str, SafeString]:
    path = Path(settings.BASE_DIR) / "docs" / "enter-your-agent.md"
    return render_markdown(path.read_text(encoding="utf-8"))


def enter(request: HttpRequest) -> HttpResponse:
    title, body = _enter_doc()
    return render(request, "arena/doc_page.html", {"title": title, "body": body})
