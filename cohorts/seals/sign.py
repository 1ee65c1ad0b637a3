"""Signed checkpoints of the event logs: "the log of <scope> had <size> links ending in <head>
at <signed_at>", signed with the arena's Ed25519 key (format "arena-checkpoint/1").

Whoever saves a checkpoint (from /api/seals, the export or a published copy) can later prove
that today's log still begins with the one they saw: the link at position `size` of today's log
must be `head` (`arena verify --published FILE...`, cohorts/seals/published.py). The signature
says the arena issued it, so a checkpoint cannot be made up after the fact by someone without
the key; what it cannot stop is the key holder signing a rewritten log, which is why copies
saved outside matter (docs/verification.md, threat model).

The key: ARENA_SEAL_SIGNING_KEY (64 hex digits, the raw 32-byte Ed25519 seed) when set,
otherwise the seed in ARENA_SEAL_SIGNING_KEY_FILE (default ARENA_VAR_DIR/seal_signing.key), made
on first use with mode 0600. Every process that signs or serves checkpoints must read the same
key; which keys signed which checkpoints is the key history (cohorts/seals/keys.py), and a
checkpoint names its key by id, so one signed by a retired key still verifies.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from datetime import datetime
from functools import cache, partial
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.db import IntegrityError, transaction

from cohorts.seals.canonical import canonical, ts
from cohorts.seals.models import Checkpoint, EventLogEntry, SigningKey
from core import clock

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "arena-checkpoint/1"
KEY_FILE = "seal_signing.key"
ENV = "ARENA_SEAL_SIGNING_KEY"
FILE_ENV = "ARENA_SEAL_SIGNING_KEY_FILE"


class SigningKeyError(RuntimeError):
    """The configured signing key is unusable."""


class KeyUnavailable(OSError):
    """No signing key is configured and none can be written (the disk is full)."""


def _seed_from_text(text: str, where: str) -> bytes:
    try:
        seed = bytes.fromhex(text.strip())
    except ValueError:
        seed = b""
    if len(seed) != 32:
        raise SigningKeyError(f"{where}: expected 64 hex digits (an Ed25519 seed)")
    return seed


def key_path() -> Path:
    configured = getattr(settings, FILE_ENV, "") or os.environ.get(FILE_ENV, "")
    return Path(configured) if configured else Path(getattr(settings, "VAR_DIR", ".")) / KEY_FILE


def key_from_env() -> bool:
    return bool(getattr(settings, ENV, "") or os.environ.get(ENV, ""))


def write_seed(path: Path, seed: bytes) -> bool:
    """Write a seed to `path` unless a file is there (False then). Written to a temporary file
    and linked into place, so a process starting at the same moment reads a whole key or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(seed.hex() + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _load_or_create_seed() -> bytes:
    if key_from_env():
        return _seed_from_text(getattr(settings, ENV, "") or os.environ[ENV], ENV)
    path = key_path()
    if not path.exists():
        seed = os.urandom(32)
        try:
            made = write_seed(path, seed)
        except OSError as exc:
            # A full disk: nothing is left at `path` (the key is linked into place whole).
            raise KeyUnavailable(f"cannot make the signing key {path}: {exc}") from exc
        if made:
            log.info("made the arena's checkpoint signing key %s (keep it; back it up)", path)
            return seed
    return _seed_from_text(path.read_text(encoding="ascii"), str(path))


@cache
def _private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(_load_or_create_seed())


def private_key() -> Ed25519PrivateKey:
    return _private_key()


def forget_key() -> None:
    """Read the key again on next use (after `arena rotate-key` replaced it)."""
    _private_key.cache_clear()


def public_key_bytes() -> bytes:
    return _private_key().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def public_key_hex() -> str:
    return public_key_bytes().hex()


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()


def public_key_info() -> dict[str, str] | None:
    """What pages, /api/seals and the export show of the key; None while it cannot be made
    (var/ full), so a page that shows the key still answers, and says so."""
    try:
        raw = public_key_bytes()
    except KeyUnavailable as exc:
        log.warning("%s", exc)
        return None
    return {"algorithm": "Ed25519", "public_key": raw.hex(), "key_id": key_id(raw)}


def signed_body(scope: str, size: int, head: str, signed_at: str) -> bytes:
    """The bytes a checkpoint's signature covers: JCS of these five fields."""
    return canonical(
        {
            "format": CHECKPOINT_FORMAT,
            "scope": scope,
            "size": size,
            "head": head,
            "signed_at": signed_at,
        }
    )


def public_key_of(kid: str) -> str:
    """The public key (hex) with this id: from the key history, else this process's own key
    ("" when neither has it: the checkpoint names a key the arena does not know)."""
    found = SigningKey.objects.filter(key_id=kid).values_list("public_key", flat=True).first()
    if found:
        return found
    return public_key_hex() if kid == key_id(public_key_bytes()) else ""


def checkpoint_dict(cp: Checkpoint, public_key: str | None = None) -> dict[str, Any]:
    """A checkpoint as published, with the public key of the key that signed it (its key id's,
    never merely this process's key)."""
    return {
        "format": CHECKPOINT_FORMAT,
        "scope": cp.scope,
        "size": cp.size,
        "head": cp.head,
        "signed_at": ts(cp.signed_at),
        "key_id": cp.key_id,
        "public_key": public_key if public_key is not None else public_key_of(cp.key_id),
        "signature": cp.signature,
    }


def signature_ok(cp: dict[str, Any], public_key_hex_: str | None = None) -> bool:
    """Whether `cp` (a checkpoint dict) is signed by its public key (or the one given)."""
    try:
        raw = bytes.fromhex(public_key_hex_ or cp["public_key"])
        body = signed_body(cp["scope"], cp["size"], cp["head"], cp["signed_at"])
        Ed25519PublicKey.from_public_bytes(raw).verify(bytes.fromhex(cp["signature"]), body)
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False
    return True


def checkpoint(scope: str, at: datetime | None = None) -> Checkpoint | None:
    """Sign the scope's current log head unless it is signed already (None: empty log, or a
    concurrent signer won: its row stands)."""
    head = EventLogEntry.objects.filter(scope=scope).defer("record").order_by("-seq").first()
    if head is None:
        return None
    existing = Checkpoint.objects.filter(scope=scope, size=head.seq).first()
    if existing is not None:
        return existing
    signed_at = at or clock.now()
    body = signed_body(scope, head.seq, head.link, ts(signed_at) or "")
    cp = Checkpoint(
        scope=scope,
        size=head.seq,
        head=head.link,
        signed_at=signed_at,
        key_id=key_id(public_key_bytes()),
        signature=_private_key().sign(body).hex(),
    )
    try:
        with transaction.atomic():
            cp.save()
    except IntegrityError:
        return None
    if getattr(settings, "ARENA_SEAL_PUBLISH_DIR", "") or os.environ.get("ARENA_SEAL_PUBLISH_DIR"):
        transaction.on_commit(partial(_append_to_dir, checkpoint_dict(cp)))
    return cp


def _append_to_dir(doc: dict[str, Any]) -> None:
    """One JSON line per checkpoint in DIR/checkpoints-<scope>.jsonl (a single O_APPEND write,
    so concurrent writers never interleave a line)."""
    folder = Path(
        getattr(settings, "ARENA_SEAL_PUBLISH_DIR", "") or os.environ["ARENA_SEAL_PUBLISH_DIR"]
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(doc, sort_keys=True) + "\n").encode()
        fd = os.open(
            folder / f"checkpoints-{doc['scope']}.jsonl",
            os.O_WRONLY | os.O_CREAT | os.O_APPEND,
            0o644,
        )
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        log.exception("could not append checkpoint %s@%s to %s", doc["scope"], doc["size"], folder)


def latest_checkpoints(scope: str | None = None) -> list[Checkpoint]:
    """The newest checkpoint of each scope (of one scope)."""
    scopes = (
        [scope]
        if scope
        else sorted(set(Checkpoint.objects.values_list("scope", flat=True).distinct()))
    )
    found = (Checkpoint.objects.filter(scope=s).order_by("-size").first() for s in scopes)
    return [cp for cp in found if cp is not None]
