"""The arena's key history: which Ed25519 key signs each scope's checkpoints, and how one key
replaced another (docs/verification.md, "Keys").

Keys are named by their id (the SHA-256 of the raw public key). The history is an append-only
list of SigningKey rows: the first key, then each rotation naming the key it replaced
(`previous`) and carrying that key's signature over the new one (`endorsement`, format
"arena-key/1"), or none when the previous key was lost (an "unendorsed" rotation, which every
verifier reports). Each key is also a `key` record in every scope's event log (a StateRecord of
subject "key"), so the log itself says which key is in force from which link on:

    the key in force at link n of a log = the key of its last `key` record at or before n,
                                          else the first key of the history

and a checkpoint of size n must be signed by that key. A checkpoint signed by a key that is not
in force there (a key swapped without a rotation) fails verification.

A process signs only when the key it reads is the history's latest (`key_problem`): a process
given another key refuses to sign and to serve checkpoints, and /healthz says why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db import IntegrityError, transaction

from cohorts.seals.canonical import canonical, ts
from cohorts.seals.models import Checkpoint, EventLogEntry, SigningKey, StateRecord
from cohorts.seals.sign import (
    KeyUnavailable,
    checkpoint_dict,
    key_from_env,
    key_id,
    key_path,
    public_key_bytes,
    public_key_hex,
    signature_ok,
)
from core import clock

KEY_FORMAT = "arena-key/1"
KEY = StateRecord.Subject.KEY


def endorsement_body(kid: str, public_key: str, previous: str | None, created_at: str) -> bytes:
    """The bytes the previous key signs to endorse a new one."""
    return canonical(
        {
            "format": KEY_FORMAT,
            "key_id": kid,
            "public_key": public_key,
            "previous": previous,
            "created_at": created_at,
        }
    )


def key_dict(k: SigningKey) -> dict[str, Any]:
    """A key as exports, /api/seals and the log's `key` records show it."""
    return {
        "key_id": k.key_id,
        "public_key": k.public_key,
        "previous": k.previous or None,
        "endorsement": k.endorsement or None,
        "created_at": ts(k.created_at),
    }


def history() -> list[SigningKey]:
    return list(SigningKey.objects.order_by("id"))


def current_id() -> str:
    return key_id(public_key_bytes())


def _source() -> str:
    return "ARENA_SEAL_SIGNING_KEY" if key_from_env() else str(key_path())


def _foreign_checkpoint(mine: str) -> str | None:
    return Checkpoint.objects.exclude(key_id=mine).values_list("key_id", flat=True).first()


def key_problem() -> str:
    """ "" when this process may sign and serve checkpoints: its key is the history's latest
    (or the history is empty and no checkpoint was signed by another key); else why not."""
    try:
        mine = current_id()
    except KeyUnavailable as exc:  # no key yet and no room to make one (a full disk)
        return f"this process has no signing key: {exc}"
    last = SigningKey.objects.order_by("-id").values_list("key_id", flat=True).first()
    if last is None:
        other = _foreign_checkpoint(mine)
        if other is None:
            return ""
        return (
            f"the signing key this process reads ({_source()}) is {mine[:16]}, but the "
            f"checkpoints were signed by {other[:16]}: restore that key (docs/deploy.md)"
        )
    if last == mine:
        return ""
    return (
        f"the signing key this process reads ({_source()}) is {mine[:16]}, not the arena's "
        f"latest key {last[:16]}: give every process the same key, or record a change with "
        "`arena rotate-key` (docs/deploy.md)"
    )


def ensure_first() -> SigningKey | None:
    """The history's first key, registered from this process's key when the history is empty
    (an arena that signed before keys had a history: its checkpoints name this key's id)."""
    first = SigningKey.objects.order_by("id").first()
    if first is not None:
        return first
    mine = current_id()
    if _foreign_checkpoint(mine) is not None:
        return None
    try:
        with transaction.atomic():
            SigningKey(key_id=mine, public_key=public_key_hex(), created_at=clock.now()).save()
    except IntegrityError:
        pass  # another process registered it first
    return SigningKey.objects.order_by("id").first()


def in_force(scope: str) -> str | None:
    """The id of the key in force at the head of the scope's log (None: no history yet)."""
    last = (
        EventLogEntry.objects.filter(scope=scope, kind=EventLogEntry.Kind.KEY)
        .order_by("-seq")
        .values_list("ref", flat=True)
        .first()
    )
    if last is not None:
        state = StateRecord.objects.filter(pk=last).values_list("state", flat=True).first()
        if state:
            return state["key_id"]
    return SigningKey.objects.order_by("id").values_list("key_id", flat=True).first()


def record_in_scope(scope: str, key: SigningKey) -> int:
    """A `key` StateRecord of `key` in the scope (the caller logs it); returns its id."""
    row = StateRecord(
        scope=scope, subject=KEY, subject_id=key.pk, state=key_dict(key), recorded_at=clock.now()
    )
    row.save()
    return row.pk


# --- checking a history (from the database or an export) ---------------------------------------


def signature_valid(public_key: str, signature: str, body: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key)).verify(
            bytes.fromhex(signature), body
        )
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def check_history(keys: Iterable[dict[str, Any]], where: str) -> tuple[list[str], list[str]]:
    """(problems, warnings) of a key history in order: ids are the hashes of their keys, each
    key after the first names its predecessor, and its endorsement verifies with it. An
    unendorsed rotation is a warning: allowed, but the old key's holder did not vouch for it."""
    problems: list[str] = []
    warnings: list[str] = []
    prev: dict[str, Any] | None = None
    for n, k in enumerate(keys, 1):
        name = f"{where}: key #{n} {str(k.get('key_id'))[:16]}"
        try:
            raw = bytes.fromhex(k["public_key"])
        except (ValueError, TypeError, KeyError):
            problems.append(f"{name}: not an Ed25519 public key")
            return problems, warnings
        if hashlib.sha256(raw).hexdigest() != k.get("key_id"):
            problems.append(f"{name}: its id is not the SHA-256 of its public key")
            return problems, warnings
        if prev is None:
            if k.get("previous"):
                problems.append(f"{name}: the first key names a previous key")
                return problems, warnings
        elif k.get("previous") != prev["key_id"]:
            problems.append(f"{name}: does not name the key before it ({prev['key_id'][:16]})")
            return problems, warnings
        elif not k.get("endorsement"):
            warnings.append(
                f"WARNING: {name} replaced {prev['key_id'][:16]} UNENDORSED (the old key did "
                f"not sign the change, at {k.get('created_at')}): trust it only as far as you "
                "trust the operator's word that the old key was lost"
            )
        else:
            body = endorsement_body(k["key_id"], k["public_key"], k["previous"], k["created_at"])
            if not signature_valid(prev["public_key"], k["endorsement"], body):
                problems.append(f"{name}: the previous key's endorsement does not verify")
                return problems, warnings
        prev = k
    return problems, warnings


def key_at(key_events: list[tuple[int, str]], size: int, first: str | None) -> str | None:
    """The key in force at link `size`, given a log's (seq, key id) of its `key` records."""
    found = first
    for seq, kid in key_events:
        if seq <= size:
            found = kid
    return found


@dataclass
class KeyRing:
    """A key history and where each log's `key` records put a key in force: what a checkpoint
    (stored, exported or saved) is checked against."""

    public: dict[str, str] = field(default_factory=dict)  # key id -> public key hex
    first: str | None = None
    events: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # scope -> (seq, id)

    @classmethod
    def of(cls, keys_: Iterable[dict[str, Any]]) -> KeyRing:
        ring = cls()
        for k in keys_:
            ring.public[k["key_id"]] = k["public_key"]
            ring.first = ring.first or k["key_id"]
        return ring

    def expected(self, scope: str, size: int) -> str | None:
        return key_at(self.events.get(scope, []), size, self.first)

    def problem(self, cp: dict[str, Any], source: str) -> str | None:
        """Why a checkpoint (as published) is not signed by the key in force at its link."""
        kid = cp.get("key_id")
        if kid not in self.public:
            return (
                f"signed by key {str(kid)[:16]}, which is not in {source}'s key history (the "
                "key that signed it was replaced without a rotation, or the history was)"
            )
        if cp.get("public_key") != self.public[kid]:
            return f"its public key is not key {str(kid)[:16]} of {source}'s key history"
        expected = self.expected(cp["scope"], cp["size"])
        if kid != expected:
            return (
                f"signed by key {str(kid)[:16]}, but the key in force at link {cp['size']} is "
                f"{str(expected)[:16]}"
            )
        return None


def database_ring() -> KeyRing:
    """The database's key history and key records (this process's key when none is kept yet:
    an arena that signed before keys had a history)."""
    ring = KeyRing.of(key_dict(k) for k in history())
    if ring.first is None:
        ring = KeyRing.of([{"key_id": current_id(), "public_key": public_key_hex()}])
    rows = EventLogEntry.objects.filter(kind=EventLogEntry.Kind.KEY).order_by("scope", "seq")
    states = dict(StateRecord.objects.filter(subject=KEY).values_list("pk", "state"))
    for scope, seq, ref in rows.values_list("scope", "seq", "ref"):
        state = states.get(ref) or {}
        ring.events.setdefault(scope, []).append((seq, state.get("key_id", "")))
    return ring


def servable_checkpoints(scope: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """(the newest checkpoint of each log that verifies, why none are served): a checkpoint is
    served only when its signature verifies with the key in force at its link and its head is
    that link, and none at all by a process whose key is not the arena's (`key_problem`)."""
    problem = key_problem()
    if problem:
        return [], problem
    ring = database_ring()
    scopes = [scope] if scope else sorted(set(Checkpoint.objects.values_list("scope", flat=True)))
    out = []
    for s in scopes:
        for cp in Checkpoint.objects.filter(scope=s).order_by("-size")[:20]:
            doc = checkpoint_dict(cp, ring.public.get(cp.key_id, ""))
            link = EventLogEntry.objects.filter(scope=s, seq=cp.size).values_list("link", flat=True)
            if (
                link.first() == cp.head
                and signature_ok(doc)
                and ring.problem(doc, "the arena") is None
            ):
                out.append(doc)
                break
    return out, ""
