"""How export values are written: numbers in positional notation, CSV cells that no spreadsheet
runs as a formula.

Numbers: `str(Decimal("0E-10"))` and `repr(1e-05)` use exponent notation, which spreadsheets and
many CSV readers take for text (or for another number); every number an export writes, in CSV
and JSON, at the top level or inside a JSON column, is written positionally with the digits it
has (`0.0000000000`, `0.00001`).

Formulas: a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula to
Excel, LibreOffice and Google Sheets (`=HYPERLINK("http://evil.example/x","Click")` in a model's
reasoning becomes a link). Text from markets and models is untrusted, so such a cell gets a
leading `'` (OWASP's CSV injection advice): spreadsheets show the text, and a reader who strips
one leading quote has the original. Numbers are written by us, never by a model, and a negative
one is not a formula, so they are left as they are.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
# Our own number columns as text (Decimal money, "-12.50"): not a formula, kept readable.
PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


def number_text(value: float | Decimal) -> str:
    """A number in positional notation; NaN and infinities as Python names them."""
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else str(value)
    text = repr(value)
    if ("e" in text or "E" in text) and math.isfinite(value):
        return format(Decimal(text), "f")
    return text


def json_text(value: Any, separators: tuple[str, str] = (", ", ": ")) -> str:
    """json.dumps(value) with every number positional (the same text for anything else)."""
    if isinstance(value, float) and math.isfinite(value):
        return number_text(value)
    if isinstance(value, Decimal):
        return json.dumps(number_text(value))
    if isinstance(value, dict):
        item, key = separators
        return (
            "{"
            + item.join(
                json.dumps(str(k)) + key + json_text(v, separators) for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + separators[0].join(json_text(v, separators) for v in value) + "]"
    return json.dumps(value)


def _needs_walk(value: Any) -> bool:
    return isinstance(value, float | Decimal | dict | list | tuple)


def json_row(row: dict[str, Any]) -> str:
    """One export row as compact JSON."""
    if any(_needs_walk(v) for v in row.values()):
        return json_text(row, (",", ":"))
    return json.dumps(row, separators=(",", ":"))  # the common case, at C speed


def csv_cell(value: Any) -> Any:
    """A value as the csv module should write it."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float | Decimal):
        return number_text(value)
    text = json_text(value) if isinstance(value, dict | list | tuple) else str(value)
    if text.startswith(FORMULA_START) and not PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text
