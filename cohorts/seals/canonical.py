"""The canonical bytes of a sealed record, and the hashes over them (format "arena-seal/1";
decision records since releases: "arena-seal/2", the same bytes rules with the release added).

A record is a JSON value serialised by RFC 8785 (JSON Canonicalization Scheme): object keys
sorted by UTF-16 code units, no whitespace, strings with only the mandatory escapes and UTF-8
otherwise, numbers as ECMAScript prints them (1.0 -> "1", 1e-7 -> "1e-7"). Values are put into
fixed forms before that (`ts`, `dec`), so any JCS library reproduces the bytes from a record;
the SHA-256 of those bytes is the record hash. docs/verification.md describes the same for
outsiders: nothing here may change a byte without a new format version.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from datetime import UTC, datetime
from decimal import Decimal
from json.encoder import encode_basestring as _quote  # JSON string, only mandatory escapes
from typing import Any

FORMAT = "arena-seal/1"
# A decision record that names the release it called. Links, genesis objects and the other
# records keep FORMAT; a decision sealed as /1 stays /1 (its bytes are what was sealed).
DECISION_FORMAT = "arena-seal/2"
# An outside agent's decision: /2 with the release's declared agent version and the
# submissions that made the decision (each body byte for byte, base64, with its signature).
AGENT_FORMAT = "arena-seal/3"
RECORD_FORMATS = (FORMAT, DECISION_FORMAT, AGENT_FORMAT)
# A resolution record that names staff by pseudonym ("staff 3") rather than by username; a
# resolution sealed as /1 stays /1 (its bytes are what was sealed).
RESOLUTION_FORMAT = "arena-seal/4"
_EXP_LIMIT = 2**53


def canonical(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value (dict/list/str/int/float/bool/None)."""
    try:
        text = _fast(value)
    except _Slow:
        text = _enc(value)
    return text.encode("utf-8", "surrogatepass")


class _Slow(Exception):
    """The value holds something only the reference encoder (_enc) prints as JCS requires."""


# Keys below this sort the same by code point (Python) and by UTF-16 code unit (JCS).
_KEY_LIMIT = "\ud800"


def _fast(value: Any) -> str:
    """The same bytes as _enc through the C JSON encoder, for values where the two agree: no
    float printed with an exponent, no integer beyond 2**53, keys below U+D800. Integral floats
    become ints (ECMAScript prints 1.0 as "1"); anything else raises _Slow."""
    return json.dumps(
        _plain(value),
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
        allow_nan=False,
    )


def _plain(v: Any) -> Any:
    t = type(v)
    if t is str or v is None or t is bool:
        return v
    if t is int:
        if -_EXP_LIMIT < v < _EXP_LIMIT:
            return v
        raise _Slow
    if t is float:
        if v.is_integer():
            if -_EXP_LIMIT < v < _EXP_LIMIT:
                return int(v)
            raise _Slow  # Python prints 2**53 as "9007199254740992.0"
        if "e" in repr(v) or v != v:
            raise _Slow
        return v
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str or (k and max(k) >= _KEY_LIMIT):
                raise _Slow
            out[k] = _plain(x)
        return out
    if t is list or t is tuple:
        return [_plain(x) for x in v]
    raise _Slow


def _enc(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v) if -_EXP_LIMIT < v < _EXP_LIMIT else es_number(float(v))
    if isinstance(v, float):
        return es_number(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, list | tuple):
        return "[" + ",".join(_enc(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(_quote(k) + ":" + _enc(v[k]) for k in keys) + "}"
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def es_number(x: float) -> str:
    """ECMAScript Number::toString of a finite double (what JCS prescribes for numbers).

    Python's repr gives the same shortest round-trip digits; only the layout differs."""
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("NaN and infinities are not JSON")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    _sign, digits, exponent = Decimal(repr(x)).as_tuple()
    assert isinstance(exponent, int)  # a finite number, checked above
    s = "".join(map(str, digits)).rstrip("0")
    exp = exponent + len(digits) - len(s)  # dropped trailing zeros move into the exponent
    k, n = len(s), exp + len(s)  # value = 0.s * 10**n
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    e = n - 1
    mantissa = s if k == 1 else s[0] + "." + s[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(record: dict[str, Any]) -> str:
    return sha256_hex(canonical(record))


def link_hash(prev: str, rec_hash: str, seq: int) -> str:
    return record_hash(
        {"format": FORMAT, "type": "link", "seq": seq, "prev": prev, "record": rec_hash}
    )


def ts(value: datetime | None) -> str | None:
    """A time's fixed form: UTC, microseconds, "Z" ("2026-03-01T00:05:00.000250Z")."""
    if value is None:
        return None
    # isoformat with a fixed timespec is the same text as strftime(...%fZ), several times faster.
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def dec(value: Decimal | str | int | None, places: int) -> str | None:
    """A Decimal's fixed form: a string with the column's places ("100.00")."""
    if value is None:
        return None
    return format(Decimal(value).quantize(Decimal(1).scaleb(-places)), "f")


def pack(data: bytes) -> bytes:
    # Level 1: prompts compress ~5x at a third of the default level's time, and sealing runs
    # inside the decision path.
    return zlib.compress(data, 1)
