"""Untrusted text made safe to store and to show: the one place that knows which characters
are dangerous.

Text from Polymarket and from models reaches the database, the pages, the prompts and the
exports. Three kinds of character do harm there:
- NUL, which PostgreSQL refuses in text and JSON columns (one such market or answer would
  otherwise abort the whole write), and lone UTF-16 surrogates, which no driver can encode;
- the other C0/C1 control characters, invisible on a page and meaningless in a question;
- the bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates,
  the LRM/RLM/ALM marks), which make a stored "seY" display as "Yes".

`clean` removes them and keeps tabs and line breaks; `flat` also puts the text on one line (a
question or an outcome name must not be able to start a line of its own in a prompt);
`storable` keeps an audit text as close to the bytes received as a database allows (only NUL
and surrogates are replaced, visibly); `reveal_bidi` shows the bidi controls of such a text as
visible code points instead of applying them.
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI_CLASS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Every C0 control but tab, LF and CR; DEL and the C1 controls; bidi; surrogates.
_UNSAFE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI_CLASS}\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_BIDI = re.compile(f"[{_BIDI_CLASS}]")


def clean(text: str) -> str:
    """`text` without control, bidi and surrogate characters; tabs and line breaks kept."""
    return _UNSAFE.sub("", text)


def flat(text: str) -> str:
    """`clean(text)` on one line: every run of whitespace (line and paragraph separators
    included) becomes one space, and the ends are trimmed."""
    return " ".join(clean(text).split())


def storable(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD, everything else as received."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def has_unstorable(text: str) -> bool:
    return _UNSTORABLE.search(text) is not None


def reveal_bidi(text: str) -> str:
    """Each bidi control shown as its code point ("<U+202E>") rather than obeyed."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def clean_json(value: Any) -> Any:
    """A JSON value (dicts, lists, strings, numbers) with every string and key `clean`ed.

    Returns the same object when nothing needed cleaning, so the common case allocates
    nothing; iterative, so a deeply nested value cannot exhaust the stack.
    """
    return _walk(value, clean)


def storable_json(value: Any) -> Any:
    """A JSON value with every string and key made `storable`."""
    return _walk(value, storable)


# In ASCII-only JSON every character `clean` removes is written as an escape: \b, \f or \uXXXX.
# Finding none in the encoded value (one C-speed pass) proves there is nothing to clean; a
# literal backslash sequence in the text can only cause a needless walk, never a missed one.
_ESCAPED_UNSAFE = re.compile(
    r"\\(?:[bf]|u(?:00[01][0-9a-f]|007f|00[89][0-9a-f]|061c|200[ef]|202[a-e]|206[6-9]"
    r"|d[89a-f][0-9a-f]{2}))"
)


def _walk(value: Any, fix: Any) -> Any:
    if isinstance(value, str):
        return fix(value)
    if not isinstance(value, dict | list):
        return value
    try:
        if _ESCAPED_UNSAFE.search(json.dumps(value)) is None:
            return value
    except (ValueError, TypeError, RecursionError):
        pass  # not plain JSON, or too deep to encode: the walk below decides
    # Containers are rebuilt bottom-up with an explicit stack: (container, its copy or None).
    root = _Frame(value)
    stack = [root]
    while stack:
        frame = stack[-1]
        if frame.next_child(stack, fix):
            continue
        stack.pop()
        if stack:
            stack[-1].child_done(frame)
    return root.result()


class _Frame:
    """One container being walked: the items seen so far, rebuilt only if one changed."""

    __slots__ = ("items", "source", "index", "out", "changed", "pending_key")

    def __init__(self, source: dict | list) -> None:
        self.source = source
        self.items = list(source.items()) if isinstance(source, dict) else list(source)
        self.index = 0
        self.out: list[Any] = []
        self.changed = False
        self.pending_key: Any = None

    def next_child(self, stack: list[_Frame], fix: Any) -> bool:
        """Handle children until one is a container (pushed: True) or none are left (False)."""
        is_dict = isinstance(self.source, dict)
        while self.index < len(self.items):
            item = self.items[self.index]
            self.index += 1
            key, child = item if is_dict else (None, item)
            if is_dict and isinstance(key, str):
                fixed_key = fix(key)
                self.changed = self.changed or fixed_key != key
                key = fixed_key
            if isinstance(child, dict | list):
                self.pending_key = key
                stack.append(_Frame(child))
                return True
            fixed = fix(child) if isinstance(child, str) else child
            self.changed = self.changed or (isinstance(child, str) and fixed != child)
            self.out.append((key, fixed) if is_dict else fixed)
        return False

    def child_done(self, child: _Frame) -> None:
        value = child.result()
        self.changed = self.changed or value is not child.source
        if isinstance(self.source, dict):
            self.out.append((self.pending_key, value))
        else:
            self.out.append(value)

    def result(self) -> Any:
        if not self.changed:
            return self.source
        return dict(self.out) if isinstance(self.source, dict) else list(self.out)
