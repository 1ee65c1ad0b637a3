"""Untrusted text made safe to store and to show: the one place that knows which characters
are dangerous.

Text from Polymarket and from models reaches the database, the pages, the prompts and the
exports. Three kinds of character do harm there:
- NUL, which PostgreSQL refuses in text and JSON columns (one such market or answer would
  otherwise abort the whole write), and lone UTF-16 surrogates, which no driver can encode;
- the other C0/C1 control characters, invisible on a page and meaningless in a question;
- the bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates,
  the LRM/RLM/ALM marks), which make a stored "seY" display as "Yes";
- invisible characters, which let a text say more than a reader sees: the Unicode tag
  characters (U+E0000-U+E007F spell out ASCII that no font draws, so a question can carry a
  hidden "SYSTEM: ignore the rules above" to a model), zero-width spaces, the soft hyphen,
  word joiners, fillers and the other default-ignorable code points, and variation selectors
  that follow no emoji (an outcome "Yes" plus an invisible mark is a second "Yes" on a page).
  The zero-width joiner and non-joiner and the emoji variation selectors are kept where they
  change what is drawn: a joiner between two emoji (a family, a rainbow flag) or between two
  letters of a script that joins (Arabic, Persian, the Indic scripts), a selector right after
  an emoji or a keycap digit. Tag sequences are not kept even inside an emoji: a subdivision
  flag then shows as the plain black flag it is built on.

`clean` removes them and keeps tabs and line breaks; `flat` also puts the text on one line (a
question or an outcome name must not be able to start a line of its own in a prompt);
`storable` keeps an audit text as close to the bytes received as a database allows (only NUL
and surrogates are replaced, visibly); `reveal_bidi` shows the bidi controls of such a text as
visible code points instead of applying them. `outcome_key` is what two outcome names are
compared by: NFKC-folded, case-folded and stripped of every invisible character, kept joiners
included, so "Yes", "YES", "Ｙｅｓ" and "Yes" plus a zero-width space are one name.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

REPLACEMENT = "\ufffd"
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI_CLASS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Every C0 control but tab, LF and CR; DEL and the C1 controls; bidi; surrogates.
# The default-ignorable code points (Unicode DerivedCoreProperties) but the joiners and
# selectors judged in context below, plus the interlinear annotation marks (U+FFF9-U+FFFB),
# which hide the text between them in renderers that honour them.
_IGNORABLE_CLASS = (
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u2060-\u2065\u206a-\u206f"
    "\u3164\uffa0\ufeff\ufff0-\ufff8\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
_CONTEXTUAL_CLASS = "\u200c\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef"
_UNSAFE = re.compile(
    f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI_CLASS}{_IGNORABLE_CLASS}\ud800-\udfff]"
)
_CONTEXTUAL = re.compile(f"[{_CONTEXTUAL_CLASS}]")
_INVISIBLE = re.compile(f"[{_BIDI_CLASS}{_IGNORABLE_CLASS}{_CONTEXTUAL_CLASS}]")
_ZWJ, _ZWNJ, _VS15, _VS16, _KEYCAP = "\u200d", "\u200c", "\ufe0e", "\ufe0f", "\u20e3"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_BIDI = re.compile(f"[{_BIDI_CLASS}]")


def clean(text: str) -> str:
    """`text` without control, bidi, surrogate and invisible characters (see the module
    docstring for the joiners and selectors kept); tabs and line breaks kept."""
    text = _UNSAFE.sub("", text)
    if _CONTEXTUAL.search(text) is None:
        return text
    return _judge_joiners(text)


def outcome_key(name: str) -> str:
    """What outcome names are compared by: two names with one key look the same to a reader."""
    folded = unicodedata.normalize("NFKC", _INVISIBLE.sub("", clean(name)))
    return " ".join(folded.casefold().split())


def _judge_joiners(text: str) -> str:
    """Keep each joiner or variation selector only where it changes what is drawn."""
    out: list[str] = []
    for i, char in enumerate(text):
        if _CONTEXTUAL.match(char) is None:
            out.append(char)
            continue
        before = out[-1] if out else ""
        after = text[i + 1] if i + 1 < len(text) else ""
        if char in (_VS15, _VS16):
            keep = _is_emoji(before) or (before in "0123456789#*" and after == _KEYCAP)
        elif char == _ZWJ and (_is_emoji(before) or before == _VS16):
            keep = _is_emoji(after)
        elif char in (_ZWJ, _ZWNJ):
            keep = _joins(before) and _joins(after)
        else:  # the other selectors pick CJK and Mongolian glyph variants: invisible in effect
            keep = False
        if keep:
            out.append(char)
    return "".join(out)


def _is_emoji(char: str) -> bool:
    # Pictographs are "Other symbol"; skin-tone modifiers are "Modifier symbol" up in U+1F3FB.
    if not char:
        return False
    category = unicodedata.category(char)
    return category == "So" or (category == "Sk" and ord(char) >= 0x1F3FB)


def _joins(char: str) -> bool:
    # A letter or mark beyond the Latin, Greek and Cyrillic blocks: the scripts where a joiner
    # or non-joiner picks a letter's form (Arabic, Persian, Syriac, the Indic scripts).
    return bool(char) and ord(char) >= 0x0590 and unicodedata.category(char)[0] in "LM"


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


# In ASCII-only JSON every character `clean` removes is written as an escape: \b, \f or \uXXXX
# (characters beyond the BMP as a surrogate pair, which the d800-dfff branch finds).
# Finding none in the encoded value (one C-speed pass) proves there is nothing to clean; a
# literal backslash sequence in the text can only cause a needless walk, never a missed one.
_ESCAPED_UNSAFE = re.compile(
    r"\\(?:[bf]|u(?:00[01][0-9a-f]|007f|00[89][0-9a-f]|00ad|034f|061c|115f|1160|17b[45]"
    r"|180[b-f]|200[b-f]|202[a-e]|206[0-9a-f]|3164|fe0[0-9a-f]|feff|ffa0|fff[0-9a-b]"
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
