"""Outside agents' signatures: what an agent signs, and how anyone checks it.

An agent that registered an Ed25519 public key signs every decision it submits. The signed bytes
bind the body to one competitor, cohort and week, so a body signed for one week cannot be
replayed for another, nor by another agent:

    b"arena-agent-decision/v1\\n" + slug + b"\\n" + cohort id + b"\\n" + week + b"\\n" + body

where `body` is the request body exactly as sent (no re-serialisation, so no JSON canonical form
to agree on) and the numbers are decimal ASCII. The signature travels base64-encoded in the
`Arena-Signature` header and is kept with the body on the audit record and in the seal, so
`arena verify` (and anyone with the standard library plus `cryptography`) can check it later.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

DOMAIN = b"arena-agent-decision/v1\n"
HEADER = "Arena-Signature"


def message(competitor: str, cohort: int, week: int, body: bytes) -> bytes:
    return DOMAIN + f"{competitor}\n{int(cohort)}\n{int(week)}\n".encode("ascii") + body


def verify(public_key_b64: str, signature_b64: str, signed: bytes) -> str | None:
    """None when `signature_b64` is a valid signature of `signed` by the key; else why not."""
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64, validate=True))
    except (binascii.Error, ValueError):
        return "the registered public key is not a valid Ed25519 key"
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError):
        return f"the {HEADER} header is not base64"
    if len(signature) != 64:
        return f"an Ed25519 signature is 64 bytes; the {HEADER} header holds {len(signature)}"
    try:
        key.verify(signature, signed)
    except InvalidSignature:
        return (
            "the signature does not verify over the signed bytes (arena-agent-decision/v1, "
            "competitor, cohort, week, body)"
        )
    return None
