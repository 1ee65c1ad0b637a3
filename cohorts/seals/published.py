"""`arena verify --published FILE...`: what was saved earlier against today's records.

A saved file is any of: a /api/seals response (its week roots, event-log heads and signed
checkpoints), one checkpoint (format "arena-checkpoint/1"), or a JSON list of either. Each is
compared with today's records, from the database or from an export:

- a week root (cohort, week, seq) must still be that root;
- an event-log head (scope, count, head) and a checkpoint (scope, size, head) must be the link at
  that position of today's log of the scope: today's log begins with the one that was saved
  (so a settlement rewritten with its chain recomputed fails here);
- a checkpoint's Ed25519 signature must verify, and its key must be the one in force at its
  link in today's key history (cohorts/seals/keys.py), when that history is known.
"""

from __future__ import annotations

from typing import Any

from cohorts.seals.keys import KeyRing
from cohorts.seals.sign import CHECKPOINT_FORMAT, signature_ok


class PublishedFormatError(ValueError):
    """A saved file that holds nothing this verifier can compare."""


def _items(doc: Any) -> list[dict]:
    if isinstance(doc, list):
        return [x for d in doc for x in _items(d)]
    if isinstance(doc, dict):
        return [doc]
    raise PublishedFormatError("expected a JSON object or list")


def collect(docs: list[Any]) -> tuple[list[dict], list[dict], list[dict]]:
    """(roots, heads, checkpoints) from the saved documents."""
    roots: list[dict] = []
    heads: list[dict] = []
    checkpoints: list[dict] = []
    for item in (x for d in docs for x in _items(d)):
        if item.get("format") == CHECKPOINT_FORMAT:
            checkpoints.append(item)
            continue
        if not any(k in item for k in ("seals", "event_logs", "checkpoints")):
            raise PublishedFormatError("neither a /api/seals response nor a checkpoint")
        for s in item.get("seals") or []:
            cohort = s["cohort"]["id"] if isinstance(s["cohort"], dict) else s["cohort"]
            roots.append({"cohort": cohort, "week": s["week"], "seq": s["seq"], "root": s["root"]})
        heads += [h for h in item.get("event_logs") or [] if "count" in h and "head" in h]
        checkpoints += item.get("checkpoints") or []
    return roots, heads, checkpoints


def compare(
    problems: list[str],
    docs: list[Any],
    roots_now: dict[tuple[int, int, int], str],
    links_now: dict[str, list[str]],
    ring: KeyRing | None,
    source: str,
) -> int:
    """Append the first disagreement of each kind; returns how many saved items were checked.
    `links_now[scope][n - 1]` is the link at position n of today's log; `source` names where
    today's records come from ("the database", "the export")."""
    roots, heads, checkpoints = collect(docs)
    for r in roots:
        key = (r["cohort"], r["week"], r["seq"])
        now = roots_now.get(key)
        where = f"cohort {key[0]} week {key[1]}: root #{key[2]}"
        if now is None:
            problems.append(f"{where} was published but is not in {source}")
            return 0
        if now != r["root"]:
            problems.append(f"{where} differs from the published one")
            return 0
    for h in heads:
        found = _prefix(links_now, h["scope"], h["count"], h["head"], source)
        if found:
            problems.append(f"saved event-log head {h['scope']}@{h['count']}: {found}")
            return 0
    for cp in checkpoints:
        name = f"checkpoint {cp.get('scope')}@{cp.get('size')}"
        if not signature_ok(cp):
            problems.append(f"{name}: the signature does not verify")
            return 0
        why = ring.problem(cp, source) if ring is not None else None
        if why:
            problems.append(f"{name}: {why}")
            return 0
        found = _prefix(links_now, cp["scope"], cp["size"], cp["head"], source)
        if found:
            problems.append(f"{name}: {found}")
            return 0
    return len(roots) + len(heads) + len(checkpoints)


def _prefix(links_now: dict[str, list[str]], scope: str, size: int, head: str, source: str):
    links = links_now.get(scope, [])
    if size > len(links):
        return (
            f"the log in {source} has {len(links)} links, fewer than the saved {size}: it was "
            "rolled back (or cut) after the copy was saved"
        )
    if size and links[size - 1] != head:
        return (
            f"link #{size} of the log in {source} is not the saved head: the log was rewritten "
            "after it was saved"
        )
    return None
