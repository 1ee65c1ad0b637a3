"""Market descriptions come from upstream as loose Markdown. The pages show them as plain text
(escaped by the template as any untrusted text): the Markdown marks are taken out rather than
rendered, so no markup from a market ever reaches the page and no literal backticks or
asterisks are left in the rules a visitor reads."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]*(```|~~~).*$", re.MULTILINE)
_CODE = re.compile(r"`+([^`]*)`+")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]*)[^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)[^)]*\)")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.MULTILINE)
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?", re.MULTILINE)
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_RULE = re.compile(r"^[ \t]{0,3}([-*_])([ \t]*\1){2,}[ \t]*$", re.MULTILINE)
_LEFTOVER_BACKTICKS = re.compile(r"`")


def strip_markdown(text: str | None) -> str:
    """The text with Markdown marks removed: code spans and fences keep their content, links
    read "text (address)", headings, quotes, emphasis and rules lose their marks."""
    if not text:
        return ""
    out = _FENCE.sub("", text)
    out = _CODE.sub(r"\1", out)
    out = _IMAGE.sub(r"\1", out)
    out = _LINK.sub(
        lambda m: m.group(1) if m.group(1) == m.group(2) else f"{m.group(1)} ({m.group(2)})", out
    )
    out = _HEADING.sub("", out)
    out = _QUOTE.sub("", out)
    out = _RULE.sub("", out)
    out = _STRONG.sub(r"\2", out)
    out = _EMPHASIS.sub(r"\1", out)
    return _LEFTOVER_BACKTICKS.sub("", out).strip()
