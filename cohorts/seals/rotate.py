"""`arena rotate-key`: replace the checkpoint signing key, as an event every verifier can check
(cohorts/seals/keys.py; docs/deploy.md says when).

Endorsed (the default): the current key, which must be the arena's latest, signs the new one;
the new seed replaces the key file (the old one is kept beside it as
`<file>.<old key id>.retired`). Unendorsed (`--unendorsed`): the old key is lost, and the key
this process reads now (a new file, or ARENA_SEAL_SIGNING_KEY) is recorded as its successor
without a signature; every verifier then prints a warning for it. Either way the new key is
recorded in every scope's log and each head signed with it, in one transaction.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import CommandError
from django.db import transaction

from cohorts.seals import keys, sign
from cohorts.seals.canonical import ts
from cohorts.seals.events import sign_head
from cohorts.seals.models import EventLogEntry, SigningKey
from core import clock


def rotate_key_arguments(parser) -> None:
    parser.add_argument(
        "--unendorsed",
        action="store_true",
        help="the old key is lost: record the key this process reads as its successor, "
        "without the old key's signature (verifiers report it)",
    )


def rotate_key(cmd, options) -> None:
    made = _rotate_unendorsed() if options.get("unendorsed") else _rotate_endorsed()
    scopes = sorted(set(EventLogEntry.objects.values_list("scope", flat=True)))
    cmd.stdout.write(
        f"key {made.key_id} is the arena's signing key now (replaces {made.previous[:16]}, "
        f"{'endorsed' if made.endorsement else 'UNENDORSED'}); recorded in the logs of "
        f"{', '.join(scopes) or 'no scope yet'}. Restart every process that signs or serves "
        "checkpoints so that each reads it."
    )


def _latest() -> SigningKey:
    first = keys.ensure_first()
    latest = SigningKey.objects.order_by("-id").first()
    if first is None or latest is None:
        raise CommandError(
            "the checkpoints were signed by a key this arena has no record of: restore that key"
        )
    return latest


def _record(kid: str, public: str, previous: str, endorse) -> SigningKey:
    at = clock.now()
    body = keys.endorsement_body(kid, public, previous, ts(at) or "")
    row = SigningKey(
        key_id=kid,
        public_key=public,
        previous=previous,
        endorsement=endorse(body) if endorse else "",
        created_at=at,
    )
    row.save()
    for scope in sorted(set(EventLogEntry.objects.values_list("scope", flat=True))):
        sign_head(scope)  # records the new key in the log, then signs its head with it
    return row


def _rotate_endorsed() -> SigningKey:
    if sign.key_from_env():
        raise CommandError(
            f"the key comes from {sign.ENV}: put the new seed there yourself and run "
            "`arena rotate-key --unendorsed`, or keep the key in a file "
            f"({sign.FILE_ENV}) and let this command replace it"
        )
    latest = _latest()
    if latest.key_id != keys.current_id():
        raise CommandError(keys.key_problem() or "this process's key is not the arena's latest")
    old = sign.private_key()
    path = sign.key_path()
    retired = path.with_name(f"{path.name}.{latest.key_id[:16]}.retired")
    if retired.exists():
        raise CommandError(f"{retired} exists: this key was rotated out before")
    seed = os.urandom(32)
    staged = path.with_name(f"{path.name}.new")
    staged.unlink(missing_ok=True)
    if not sign.write_seed(staged, seed):
        raise CommandError(f"cannot write {staged}")
    new_public = _public_of(seed)
    try:
        with transaction.atomic():
            os.replace(path, retired)
            os.replace(staged, path)
            sign.forget_key()
            made = _record(
                sign.key_id(bytes.fromhex(new_public)),
                new_public,
                latest.key_id,
                lambda body: old.sign(body).hex(),
            )
    except BaseException:
        _restore(path, retired, staged)
        raise
    return made


def _restore(path: Path, retired: Path, staged: Path) -> None:
    """The transaction failed: the old key goes back in place."""
    if retired.exists():
        os.replace(retired, path)
    staged.unlink(missing_ok=True)
    sign.forget_key()


def _public_of(seed: bytes) -> str:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw().hex()


def _rotate_unendorsed() -> SigningKey:
    latest = SigningKey.objects.order_by("-id").first()
    if latest is None:
        raise CommandError("the arena has no key history yet: there is nothing to replace")
    mine = keys.current_id()
    if latest.key_id == mine:
        raise CommandError(
            "this process reads the arena's latest key already: configure the new key first"
        )
    if SigningKey.objects.filter(key_id=mine).exists():
        raise CommandError(f"key {mine[:16]} was in the history before: a retired key stays so")
    with transaction.atomic():
        return _record(mine, sign.public_key_hex(), latest.key_id, None)


def signing_key(cmd, options) -> None:
    """`arena signing-key`: make the key if there is none yet, register it as the history's
    first key on a fresh arena, and say which key this process reads; fails (exit 1) when it
    is not the arena's latest key, so a deploy can check every container's key at start."""
    keys.ensure_first()
    problem = keys.key_problem()
    if problem:
        raise CommandError(problem)
    source = sign.ENV if sign.key_from_env() else str(sign.key_path())
    cmd.stdout.write(f"signing key {keys.current_id()} ({source}) is the arena's latest key")
