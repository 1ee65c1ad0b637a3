#!/usr/bin/env python3
"""Check an arena seal export with the Python standard library alone (docs/verification.md).

    python3 verify_export.py seals.json [saved.json ...]

seals.json is /exports/seals.json (or `arena export --what seals --format json`); each saved
file is a /api/seals response, a checkpoint or a list of them saved earlier, or JSON lines of
them (the arena's ARENA_SEAL_PUBLISH_DIR/checkpoints-<scope>.jsonl). Prints "ok: ..." and exits
0 (after a WARNING line for each key rotation the old key did not endorse), or prints the first
problem and exits 1. Nothing here imports the arena's code: it re-implements
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
    called (of its entry's competitor), an arena-seal/3 decision (an outside agent's) names its
    release with the agent's declared version and carries the submissions that made it, an
    arena-seal/1 record names none. (The submissions' Ed25519 signatures need a signature
    library: `arena verify` checks them; docs/verification.md shows how with `cryptography`.)"""
    fmt = record.get("format")
    if fmt not in ("arena-seal/1", "arena-seal/2", "arena-seal/3"):
        raise Failed(f"{name}: unknown record format {fmt!r}")
    if fmt == "arena-seal/3" and (record.get("type") != "decision" or "submissions" not in record):
        raise Failed(f"{name}: an arena-seal/3 record is an outside agent's decision")
    if fmt == "arena-seal/1" or record.get("type") != "decision":
        if "release" in record:
            raise Failed(f"{name}: a release in a record of format {fmt}")
        return
    if "release" not in record:
        raise Failed(f"{name}: an arena-seal/2 decision record without its release")
    release = record["release"]
    keys = RELEASE_KEYS | {"agent_version"} if fmt == "arena-seal/3" else RELEASE_KEYS
    if release is not None and (
        set(release) != keys or release["competitor"] != record["entry"]["competitor"]
    ):
        raise Failed(f"{name}: the release is not a release of the entry's competitor")


def endorsement_ok(prev: dict, key: dict) -> bool:
    body = jcs({"format": "arena-key/1", "key_id": key["key_id"], "public_key": key["public_key"],
                "previous": key["previous"], "created_at": key["created_at"]}).encode()  # fmt: skip
    sig = bytes.fromhex(key["endorsement"])
    return ed25519_ok(bytes.fromhex(prev["public_key"]), body, sig)


def check_keys(doc: dict, warnings: list[str]) -> dict[str, dict]:
    """The key history in order (before export /3: the one signing_key), checked; by key id."""
    keys = doc.get("signing_keys")
    if keys is None:
        one = doc.get("signing_key")
        keys = [{**one, "previous": None}] if one else []
    prev = None
    for n, key in enumerate(keys, 1):
        name = f"key #{n} {key['key_id'][:16]}"
        if hashlib.sha256(bytes.fromhex(key["public_key"])).hexdigest() != key["key_id"]:
            raise Failed(f"{name}: its id is not the SHA-256 of its public key")
        if key.get("previous") != (prev["key_id"] if prev else None):
            raise Failed(f"{name}: does not name the key before it")
        if prev and not key.get("endorsement"):
            warnings.append(f"WARNING: {name} replaced {prev['key_id'][:16]} UNENDORSED: the "
                            "old key did not sign the change")  # fmt: skip
        elif prev and not endorsement_ok(prev, key):
            raise Failed(f"{name}: the previous key's endorsement does not verify")
        prev = key
    return {k["key_id"]: k for k in keys}


def key_in_force(doc: dict, keys: dict, scope: str, size: int) -> str | None:
    """The key of the log's last `key` record at or before link `size`, else the first key."""
    found = next(iter(keys), None)
    for log in doc["event_logs"]:
        if log["scope"] == scope:
            for e in log["entries"][:size]:
                if e["record"]["type"] == "key":
                    found = e["record"]["state"]["key_id"]
    return found


def check_checkpoint(cp: dict, logs: dict[str, list[str]], doc: dict, keys: dict) -> None:
    name = f"checkpoint {cp['scope']}@{cp['size']}"
    body = jcs({k: cp[k] for k in ("format", "scope", "size", "head", "signed_at")}).encode()
    if not ed25519_ok(bytes.fromhex(cp["public_key"]), body, bytes.fromhex(cp["signature"])):
        raise Failed(f"{name}: the signature does not verify")
    if keys:
        known = keys.get(cp.get("key_id"))
        if known is None or known["public_key"] != cp["public_key"]:
            raise Failed(f"{name}: signed by key {str(cp.get('key_id'))[:16]}, which is not in "
                         "the export's key history")  # fmt: skip
        if cp["key_id"] != key_in_force(doc, keys, cp["scope"], cp["size"]):
            raise Failed(f"{name}: not signed by the key in force at link {cp['size']}")
    check_prefix(name, logs, cp["scope"], cp["size"], cp["head"])


def check_prefix(name: str, logs: dict[str, list[str]], scope: str, size: int, head: str) -> None:
    links = logs.get(scope, [])
    if size > len(links):
        raise Failed(f"{name}: today's log has {len(links)} links, fewer than the saved "
                     f"{size}: it was rolled back after the copy was saved")  # fmt: skip
    if size and links[size - 1] != head:
        raise Failed(f"{name}: today's log does not begin with the saved one")


def check_logged_roots(doc: dict) -> None:
    """Every week root of the export is the `seal` record of its scope's log (the signed log ties
    the week to a checkpoint), and every logged root of an exported cohort is in the export."""
    logged = {}
    for log in doc["event_logs"]:
        for e in log["entries"]:
            rec = e["record"]
            if rec["type"] == "seal":
                logged[(log["scope"], rec["cohort"], rec["week"], rec["seq"])] = rec
    exported = set()
    for cohort in doc["cohorts"]:
        for week in cohort["weeks"]:
            for s in week["seals"]:
                key = (cohort["kind"], cohort["id"], week["week"], s["seq"])
                exported.add(key)
                rec = logged.get(key)
                where = f"cohort {cohort['id']} week {week['week']}: root #{s['seq']}"
                if rec is None:
                    raise Failed(f"{where} is not in the event log {cohort['kind']}")
                if [rec[k] for k in ("root", "count", "genesis")] != [
                    s[k] for k in ("root", "count", "genesis")
                ]:
                    raise Failed(f"{where} is not the root the event log {cohort['kind']} sealed")
    ids = {c["id"] for c in doc["cohorts"]}
    for key in sorted(k for k in logged if k[1] in ids and k not in exported):
        raise Failed(f"cohort {key[1]} week {key[2]}: root #{key[3]} is in the event log "
                     f"{key[0]} but not in the export: a sealed week was left out")  # fmt: skip


def check_current(doc: dict) -> None:
    """What the site shows (`current`) and each decision's release against the logs' latest
    records: a resolution, identity, entry or cohort changed outside the application, a
    settlement the log never had or a reversal it does not hold."""
    latest: dict[str, dict] = {"resolution": {}, "identity": {}, "entry": {}, "cohort_state": {}}
    subject = {"resolution": "market", "identity": "competitor", "entry": "entry",
               "cohort_state": "cohort"}  # fmt: skip
    settled, reversals = set(), {}
    for log in doc["event_logs"]:
        for e in log["entries"]:
            rec = e["record"]
            if rec["type"] == "settlement":
                settled.add(rec["id"])
            elif rec["type"] == "reversal":
                reversals[rec["settlement"]] = rec["reversed_at"]
            elif rec["type"] in latest:
                value = rec["to"] if rec["type"] == "resolution" else rec["state"]
                latest[rec["type"]][rec[subject[rec["type"]]]] = value
    for cohort in doc["cohorts"]:
        for week in cohort["weeks"]:
            for d in week["digests"]:
                release = d["record"].get("release")
                logged = latest["entry"].get(d["record"]["entry"]["id"])
                pinned = (logged or {}).get("release")
                if release and pinned and pinned["id"] != release["id"]:
                    raise Failed(f"entry {d['record']['entry']['id']}: decision {d['decision']} "
                                 f"called release {release['id']}, the log's entry record says "
                                 f"{pinned['id']}")  # fmt: skip
    current = doc.get("current") or {}
    final = ("resolved", "void")
    for m in current.get("markets", []):
        to, now = (
            latest["resolution"].get(m["id"]),
            {"status": m["status"], "outcome": m["outcome"]},
        )
        if (to is None and m["status"] in final) or (
            to is not None and (to["status"] in final or m["status"] in final) and now != to
        ):
            raise Failed(f"market {m['id']}: the site shows {m['status']} {m['outcome']!r}, "
                         "not the log's last resolution")  # fmt: skip
    for s in current.get("settlements", []):
        if s["id"] not in settled:
            raise Failed(f"settlement {s['id']}: the site shows it and the log has no "
                         "settlement record")  # fmt: skip
        if reversals.get(s["id"]) != s["reversed_at"]:
            raise Failed(f"settlement {s['id']}: the site shows it reversed at "
                         f"{s['reversed_at']}, not as the log's reversal")  # fmt: skip
    for what, kind in (("competitors", "identity"), ("entries", "entry"),
                       ("cohorts", "cohort_state")):  # fmt: skip
        for item in current.get(what, []):
            logged = latest[kind].get(item["id"])
            if logged is not None and logged != item["state"]:
                fields = sorted(k for k in set(logged) | set(item["state"])
                                if logged.get(k) != item["state"].get(k))  # fmt: skip
                raise Failed(f"{what[:-1] if what != 'entries' else 'entry'} {item['id']}: "
                             f"{', '.join(fields)} differ from the log's last record")  # fmt: skip


def verify(doc: dict, saved: list, warnings: list[str]) -> str:
    fmt = doc.get("format")
    if fmt not in ("arena-seals-export/1", "arena-seals-export/2", "arena-seals-export/3"):
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
    keys = check_keys(doc, warnings)
    for log in doc["event_logs"]:
        for e in log["entries"]:
            if (
                e["record"]["type"] == "key"
                and keys.get(e["record"]["state"]["key_id"]) != e["record"]["state"]
            ):
                raise Failed(f"event log {log['scope']} #{e['seq']}: a key not in the history")
    checkpoints = []
    for item in saved:  # saved copies first: a rollback or a rewrite is named as such
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
    checkpoints += doc.get("checkpoints") or []
    for cp in checkpoints:
        check_checkpoint(cp, logs, doc, keys)
    if fmt != "arena-seals-export/1":
        for scope, links in logs.items():
            signed = max([c["size"] for c in doc.get("checkpoints") or [] if c["scope"] == scope],
                         default=0)  # fmt: skip
            if len(links) > signed:
                raise Failed(f"event log {scope}: links {signed + 1}..{len(links)} come after "
                             "the newest checkpoint: nothing the arena signed covers them")  # fmt: skip
        check_logged_roots(doc)
    check_current(doc)
    events = sum(len(v) for v in logs.values())
    return (f"{weeks} weeks, {digests} decision records, {events} event-log records, "
            f"{len(checkpoints)} checkpoints, {len(keys)} keys")  # fmt: skip


def load(path: str):
    """A JSON document, or JSON lines (one checkpoint per line): a list of them."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    warnings: list[str] = []
    try:
        docs = [load(path) for path in argv]
        summary = verify(docs[0], docs[1:], warnings)
    except (Failed, KeyError, TypeError, ValueError, OSError) as exc:
        print("\n".join([*warnings, f"FAILED: {exc}"]))
        return 1
    print("\n".join([*warnings, "ok: " + summary]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
