#!/usr/bin/env python3
"""Check an arena seal export with the Python standard library alone (docs/verification.md).

    python3 verify_export.py seals.json [saved.json ...]

seals.json is /exports/seals.json (or `arena export --what seals --format json`); each saved
file is a /api/seals response or a checkpoint saved earlier. Prints "ok: ..." and exits 0, or
prints the first problem and exits 1. Nothing here imports the arena's code: it re-implements
the format from the documentation (RFC 8785 canonical JSON, SHA-256 chains, Ed25519).
"""

from __future__ import annotations

import hashlib
import json
import sys
from decimal import Decimal

# --- RFC 8785 canonical JSON ------------------------------------------------------------------


def es_number(x: float) -> str:
    """A number as ECMAScript prints it (shortest round-trip digits, JS exponent rules)."""
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    _, digits, exp = Decimal(repr(float(x))).as_tuple()
    s = "".join(map(str, digits)).rstrip("0")
    n = exp + len(digits)  # value = 0.s * 10**n
    if len(s) <= n <= 21:
        return s + "0" * (n - len(s))
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + s
    e = n - 1
    return (s[0] + ("." + s[1:] if len(s) > 1 else "")) + ("e+" if e > 0 else "e-") + str(abs(e))


def jcs(v) -> str:
    if v is None or v is True or v is False:
        return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, int) and abs(v) < 2**53:
        return str(v)
    if isinstance(v, int | float):
        return es_number(float(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(jcs(x) for x in v) + "]"
    keys = sorted(v, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + jcs(v[k]) for k in keys) + "}"


def H(value) -> str:  # noqa: N802 (the documentation's name)
    return hashlib.sha256(jcs(value).encode("utf-8", "surrogatepass")).hexdigest()


def link(prev: str, record_hash: str, seq: int) -> str:
    return H({"format": "arena-seal/1", "type": "link", "seq": seq, "prev": prev,
              "record": record_hash})  # fmt: skip


# --- Ed25519 verification (RFC 8032, section 5.1.7) ---------------------------------------------

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def _add(a, b):
    """Twisted Edwards addition in extended coordinates (X, Y, Z, T)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa, bb = (y1 - x1) * (y2 - x2) % P, (y1 + x1) * (y2 + x2) % P
    cc, dd = 2 * D * t1 * t2 % P, 2 * z1 * z2 % P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _mul(n: int, point):
    result = (0, 1, 1, 0)
    while n:
        if n & 1:
            result = _add(result, point)
        point, n = _add(point, point), n >> 1
    return result


def _decode(raw: bytes):
    y = int.from_bytes(raw, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P or (x == 0 and sign):
        return None
    if x & 1 != sign:
        x = P - x
    return (x, y, 1, x * y % P)


BASE = _decode((4 * pow(5, P - 2, P) % P).to_bytes(32, "little"))


def ed25519_ok(public: bytes, message: bytes, signature: bytes) -> bool:
    if len(public) != 32 or len(signature) != 64:
        return False
    a, r = _decode(public), _decode(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    left, right = _mul(s, BASE), _add(r, _mul(k, a))
    return (left[0] * right[2] - right[0] * left[2]) % P == 0 and (
        left[1] * right[2] - right[1] * left[2]
    ) % P == 0


# --- the checks ---------------------------------------------------------------------------------


class Failed(Exception):
    pass


def check_chain(where: str, genesis: str, items: list[dict], seals: list[dict]) -> list[str]:
    """Every record against its hash, every link, every root; returns the links in order."""
    prev, links = genesis, []
    for n, item in enumerate(items, 1):
        name = f"{where} #{n}"
        if item["seq"] != n:
            raise Failed(f"{name}: out of order")
        if item["record"] is None or H(item["record"]) != item["record_hash"]:
            raise Failed(f"{name}: the record does not match its hash")
        if item["prev"] != prev or link(prev, item["record_hash"], n) != item["link"]:
            raise Failed(f"{name}: the chain is broken")
        prev = item["link"]
        links.append(prev)
    for seal in seals:
        expected = links[seal["count"] - 1] if seal["count"] else genesis
        if seal["count"] > len(links) or seal["root"] != expected:
            raise Failed(f"{where}: root #{seal['seq']} is not the chain's")
    return links


RELEASE_KEYS = {"id", "competitor", "number", "model_id", "provider", "endpoint", "params",
                "context_tokens", "structured_output", "price_in_per_m", "price_out_per_m",
                "knowledge_cutoff"}  # fmt: skip


def check_format(name: str, record: dict) -> None:
    """A known record format with its fields: an arena-seal/2 decision names the release it
    called (of its entry's competitor), an arena-seal/1 record names none."""
    fmt = record.get("format")
    if fmt not in ("arena-seal/1", "arena-seal/2"):
        raise Failed(f"{name}: unknown record format {fmt!r}")
    if fmt == "arena-seal/1" or record.get("type") != "decision":
        if "release" in record:
            raise Failed(f"{name}: a release in a record of format {fmt}")
        return
    if "release" not in record:
        raise Failed(f"{name}: an arena-seal/2 decision record without its release")
    release = record["release"]
    if release is not None and (
        set(release) != RELEASE_KEYS or release["competitor"] != record["entry"]["competitor"]
    ):
        raise Failed(f"{name}: the release is not a release of the entry's competitor")


def check_checkpoint(cp: dict, logs: dict[str, list[str]], key: str | None) -> None:
    name = f"checkpoint {cp['scope']}@{cp['size']}"
    body = jcs({k: cp[k] for k in ("format", "scope", "size", "head", "signed_at")}).encode()
    if not ed25519_ok(bytes.fromhex(cp["public_key"]), body, bytes.fromhex(cp["signature"])):
        raise Failed(f"{name}: the signature does not verify")
    if key and cp["public_key"] != key:
        raise Failed(f"{name}: signed by another key than the export's")
    check_prefix(name, logs, cp["scope"], cp["size"], cp["head"])


def check_prefix(name: str, logs: dict[str, list[str]], scope: str, size: int, head: str) -> None:
    links = logs.get(scope, [])
    if size > len(links) or (size and links[size - 1] != head):
        raise Failed(f"{name}: today's log does not begin with the saved one")


def verify(doc: dict, saved: list) -> str:
    if doc.get("format") not in ("arena-seals-export/1", "arena-seals-export/2"):
        raise Failed("not a seal export")
    roots, weeks, digests = {}, 0, 0
    for cohort in doc["cohorts"]:
        for week in cohort["weeks"]:
            g = week["genesis"]
            if g["cohort"] != cohort["id"] or g["week"] != week["week"]:
                raise Failed(f"cohort {cohort['id']} week {week['week']}: foreign genesis")
            where = f"cohort {cohort['id']} week {week['week']}"
            check_chain(where, H(g), week["digests"], week["seals"])
            for d in week["digests"]:
                check_format(f"{where} #{d['seq']}", d["record"])
            weeks, digests = weeks + 1, digests + len(week["digests"])
            for s in week["seals"]:
                roots[(cohort["id"], week["week"], s["seq"])] = s["root"]
    logs = {}
    for log in doc["event_logs"]:
        logs[log["scope"]] = check_chain(f"event log {log['scope']}", H(log["genesis"]),
                                         log["entries"], [])  # fmt: skip
    key = (doc.get("signing_key") or {}).get("public_key")
    checkpoints = list(doc.get("checkpoints") or [])
    for item in saved:
        for one in item if isinstance(item, list) else [item]:
            if one.get("format") == "arena-checkpoint/1":
                checkpoints.append(one)
                continue
            for s in one.get("seals") or []:
                cohort = s["cohort"]["id"] if isinstance(s["cohort"], dict) else s["cohort"]
                if roots.get((cohort, s["week"], s["seq"])) != s["root"]:
                    raise Failed(
                        f"cohort {cohort} week {s['week']}: saved root #{s['seq']} differs"
                    )
            for h in one.get("event_logs") or []:
                check_prefix(f"saved head {h['scope']}@{h['count']}", logs, h["scope"],
                             h["count"], h["head"])  # fmt: skip
            checkpoints += one.get("checkpoints") or []
    for cp in checkpoints:
        check_checkpoint(cp, logs, key)
    events = sum(len(v) for v in logs.values())
    return (f"{weeks} weeks, {digests} decision records, {events} event-log records, "
            f"{len(checkpoints)} checkpoints")  # fmt: skip


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    docs = []
    for path in argv:
        with open(path, encoding="utf-8") as f:
            docs.append(json.load(f))
    try:
        print("ok: " + verify(docs[0], docs[1:]))
    except (Failed, KeyError, TypeError, ValueError) as exc:
        print(f"FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
