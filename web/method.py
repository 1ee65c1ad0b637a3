"""The method served with the data: the documents under docs/ (the verification spec, the
scoring spec when there is one, the standard-library verifier) at /method/, each with its
SHA-256, so one visit gives everything needed to check the arena. /api/seals lists the same
files and hashes (`method_files`).

Only files found under docs/ when the process starts are served, by their relative path: a
request names one of them or gets a 404, so no path reaches outside docs/. Markdown is
rendered by `render_markdown`, a small renderer for the subset the documents use (headings,
paragraphs, lists, tables, code, emphasis, links), which escapes every piece of text first.
"""

from __future__ import annotations

import hashlib
import html
import re
from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

from web import params
from web.cache import page

DOCS = Path(settings.BASE_DIR) / "docs"
SERVED = ("*.md", "examples/*.py")


@cache
def method_files() -> dict[str, dict[str, object]]:
    """relative path -> {"name", "sha256", "bytes", "url", "html"} of every served file."""
    out: dict[str, dict[str, object]] = {}
    for pattern in SERVED:
        for path in sorted(DOCS.glob(pattern)):
            data = path.read_bytes()
            name = path.relative_to(DOCS).as_posix()
            out[name] = {
                "name": name,
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "url": f"/method/{name}",
                "html": f"/method/{name[:-3]}" if name.endswith(".md") else None,
            }
    return out


def _read(name: str) -> bytes:
    if name not in method_files():
        raise Http404("no such document")
    return (DOCS / name).read_bytes()


@require_safe
def method_index(request: HttpRequest) -> HttpResponse:
    return render(request, "arena/method.html", {"files": list(method_files().values())})


@require_safe
def method_file(request: HttpRequest, name: str) -> HttpResponse:
    """A served file as it is (its bytes hash to the listed SHA-256), or a Markdown document
    rendered when asked for without its `.md`."""
    if f"{name}.md" in method_files():
        text = _read(f"{name}.md").decode("utf-8")
        info = method_files()[f"{name}.md"]
        context = {"doc": info, "body": mark_safe(render_markdown(text))}  # noqa: S308 (escaped)
        return render(request, "arena/method_doc.html", context)
    data = _read(name)
    response = HttpResponse(data, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- Markdown, the subset the documents use ----------------------------------------------------

_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)\s]+)\)")


def _inline(text: str) -> str:
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[at : m.start()]))
        code, strong, label, href = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif strong is not None:
            out.append(f"<strong>{_inline(strong)}</strong>")
        elif href.startswith(("http://", "https://", "/", "#")):
            out.append(f'<a href="{html.escape(href)}">{html.escape(label)}</a>')
        else:
            out.append(html.escape(m.group(0)))
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _table(rows: list[str]) -> str:
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows]
    body = [r for r in cells[1:] if not all(set(c) <= set("-: ") for c in r)]
    head = "".join(f"<th>{_inline(c)}</th>" for c in cells[0])
    trs = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>"


def render_markdown(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : j]))}</code></pre>")
            i = j + 1
        elif line.startswith("    ") and line.strip():
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            block = "\n".join(x[4:] for x in lines[i:j]).rstrip()
            out.append(f"<pre><code>{html.escape(block)}</code></pre>")
            i = j
        elif m := re.match(r"(#{1,4}) (.*)", line):
            level, title = len(m.group(1)), m.group(2)
            out.append(f'<h{level} id="{_slug(title)}">{_inline(title)}</h{level}>')
            i += 1
        elif line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
        elif re.match(r"\s*(- |\d+\. )", line):
            tag = "ol" if re.match(r"\s*\d+\. ", line) else "ul"
            items: list[str] = []
            while i < len(lines) and lines[i].strip():
                if re.match(r"\s*(- |\d+\. )", lines[i]):
                    items.append(re.sub(r"^\s*(- |\d+\. )", "", lines[i]))
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + f"</{tag}>")
        elif line.strip():
            j = i
            while j < len(lines) and lines[j].strip() and not _starts_block(lines[j]):
                j += 1
            j = max(j, i + 1)
            out.append(f"<p>{_inline(' '.join(x.strip() for x in lines[i:j]))}</p>")
            i = j
        else:
            i += 1
    return "\n".join(out)


def _starts_block(line: str) -> bool:
    return bool(re.match(r"(```|#{1,4} |\||\s*- |\s*\d+\. |    )", line))


SPEC_PATH = Path(settings.BASE_DIR) / "docs" / "scoring-spec.md"


def scoring_spec() -> str:
    """The scoring specification as published (docs/scoring-spec.md): read per request, a
    few kB, so the page and the download never disagree with the file."""
    return SPEC_PATH.read_text(encoding="utf-8")


@page({"download": params.choice(("1",), "")}, depends=("data",))
@require_safe
def methodology_spec(request: HttpRequest, download: str) -> HttpResponse:
    """`/methodology/spec.md[?download=1]`: the scoring specification, to read, or to save
    beside the exports."""
    from core import methodology as m

    response = HttpResponse(scoring_spec(), content_type="text/markdown; charset=utf-8")
    name = f"arena-scoring-spec-v{m.METHODOLOGY_VERSION}.md"
    if download:
        response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
