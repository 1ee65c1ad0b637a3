"""Outside agents' API tokens: issued by staff, shown once, stored as a SHA-256 digest.

A token is `arena_<8 chars>_<43 chars>`: 32 random bytes (secrets.token_urlsafe) after a visible
prefix. Why a plain SHA-256 is enough: a slow, salted hash (PBKDF2, scrypt) protects secrets a
person chose, which are guessable; 32 random bytes have 256 bits of entropy, so even with the
digest in hand no search can find the token, and an unsalted fast digest lets a request be
matched to its row by one indexed lookup. The digest is compared with hmac.compare_digest all
the same, so no timing difference tells a near miss.

The token is never stored, logged (arena/logfmt.py redacts its shape from every line), exported,
paged, put in an event log or sealed: only its prefix goes that far.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from agents.models import AgentToken, Competitor
from core import clock

PREFIX = "arena_"
_SHAPE = re.compile(r"^arena_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}$")


class TokenRefused(Exception):
    """Why a presented token authenticates nobody (the API's one-line 401)."""


@dataclass(frozen=True)
class Issued:
    token: str  # shown once, to the staff member who issued it
    row: AgentToken


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue(
    competitor: Competitor,
    *,
    label: str = "",
    expires_at: datetime | None = None,
    rate_per_minute: int = 30,
) -> Issued:
    """A new token for an outside agent; the caller shows `token` once and forgets it."""
    if not competitor.is_outside:
        raise ValueError("tokens are issued to outside agents only")
    for _ in range(5):  # a prefix collision among 62^8 is rare; another draw settles it
        visible = "".join(secrets.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
                          for _ in range(8))  # fmt: skip
        token = f"{PREFIX}{visible}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                row = AgentToken.objects.create(
                    competitor=competitor,
                    label=label,
                    prefix=f"{PREFIX}{visible}",
                    digest=digest(token),
                    created_at=clock.now(),
                    expires_at=expires_at,
                    rate_per_minute=rate_per_minute,
                )
        except IntegrityError:
            continue
        return Issued(token, row)
    raise RuntimeError("could not draw an unused token prefix")


def authenticate(token: str, now: datetime | None = None) -> AgentToken:
    """The live token row for `token`, its last-used time updated; TokenRefused otherwise."""
    if not _SHAPE.match(token):
        raise TokenRefused("not an arena token")
    wanted = digest(token)
    row = (
        AgentToken.objects.select_related("competitor")
        .filter(prefix=token[: len(PREFIX) + 8])
        .first()
    )
    if row is None or not hmac.compare_digest(row.digest, wanted):
        raise TokenRefused("unknown token")
    now = now or clock.now()
    if row.revoked_at is not None:
        raise TokenRefused(f"token {row.prefix} was revoked")
    if row.expires_at is not None and row.expires_at <= now:
        raise TokenRefused(f"token {row.prefix} expired at {row.expires_at.isoformat()}")
    if not row.competitor.is_outside:
        raise TokenRefused(f"token {row.prefix} belongs to no outside agent")
    AgentToken.objects.filter(pk=row.pk).update(last_used_at=now)
    row.last_used_at = now
    return row


def revoke(row: AgentToken) -> None:
    AgentToken.objects.filter(pk=row.pk, revoked_at__isnull=True).update(revoked_at=clock.now())
