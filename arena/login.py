"""Login throttling: django-axes, with the lock check and the failure count made one atomic step.

Out of the box, axes asks "is this client locked?" before the password is checked and counts a
failure after it; a burst of concurrent guesses all pass the check before any is counted (an
attack run got 13-14 guesses where 5 were allowed). Here the check *reserves* the attempt: under
a lock on the client's address it reads the counts and, if the client may try, records the
attempt as a failure before the password is checked. A correct password then clears that
account's failures from that address; a wrong one is already counted.

What locks: ARENA_LOGIN_MAX_FAILURES failures of one account from one address, or
ARENA_LOGIN_MAX_FAILURES_PER_IP failures from one address over all accounts, within
ARENA_LOGIN_LOCKOUT_SECONDS of the last of them. Nobody can lock an account from another address
(a per-account lock let anyone lock the real admin out).

A refused attempt costs one password hash like a real check (so timing does not reveal the
lock) and answers 429 with the time the lock ends (also as Retry-After). Staff see attempts and
locks in the admin and lift a lock with the "Unlock" action (arena/admin.py).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.backends import AxesBackend
from axes.exceptions import AxesBackendPermissionDenied, AxesBackendRequestParameterRequired
from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_credentials, get_query_str
from axes.models import AccessAttempt
from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.db import connection, transaction
from django.db.models import F, Max, Sum
from django.http import HttpResponse
from django.template.loader import render_to_string

from core import clock


def cool_off(request=None) -> timedelta:
    return timedelta(seconds=settings.ARENA_LOGIN_LOCKOUT_SECONDS)


def failure_limit(request=None, credentials=None) -> int:
    """axes' single limit (used by its own helpers); the pair limit, the stricter one."""
    return settings.ARENA_LOGIN_MAX_FAILURES


@dataclass(frozen=True)
class LockState:
    locked: bool
    until: datetime | None = None
    scope: str = ""  # "account" (this account from this address) or "address"


def lock_state(username: str | None, ip: str | None, now: datetime) -> LockState:
    """Whether (username, ip) may try now, from the attempts within the cool-off window."""
    recent = AccessAttempt.objects.filter(attempt_time__gte=now - cool_off())
    checks = [
        ("account", recent.filter(username=username, ip_address=ip), settings.ARENA_LOGIN_MAX_FAILURES),
        ("address", recent.filter(ip_address=ip), settings.ARENA_LOGIN_MAX_FAILURES_PER_IP),
    ]  # fmt: skip
    for scope, attempts, limit in checks:
        agg = attempts.aggregate(n=Sum("failures_since_start"), last=Max("attempt_time"))
        if (agg["n"] or 0) >= limit:
            return LockState(True, agg["last"] + cool_off(), scope)
    return LockState(False)


def _lock_address(ip: str | None) -> None:
    """Serialise reservations from one address for the rest of the transaction. PostgreSQL: a
    transaction-level advisory lock; SQLite's IMMEDIATE transactions already admit one writer."""
    if connection.vendor == "postgresql":
        key = int.from_bytes(hashlib.sha256(f"axes:{ip}".encode()).digest()[:8], "big", signed=True)
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [key])


class AtomicAxesHandler(AxesDatabaseHandler):
    """axes' database handler with reserve-before-check (see the module docstring)."""

    def is_locked(self, request, credentials=None) -> bool:
        username = get_client_username(request, credentials)
        return lock_state(username, request.axes_ip_address, clock.now()).locked

    def reserve(self, request, credentials) -> bool:
        """Count this attempt as a failure now, if the client may try; False if locked."""
        username = get_client_username(request, credentials)
        ip = request.axes_ip_address
        now = clock.now()
        with transaction.atomic():
            _lock_address(ip)
            if lock_state(username, ip, now).locked:
                return False
            attempt, created = AccessAttempt.objects.get_or_create(
                username=username,
                ip_address=ip,
                user_agent=request.axes_user_agent,
                defaults={
                    "get_data": get_query_str(request.GET).replace("\0", "0x00"),
                    "post_data": get_query_str(request.POST).replace("\0", "0x00"),
                    "http_accept": request.axes_http_accept,
                    "path_info": request.axes_path_info,
                    "failures_since_start": 1,
                },
            )
            if not created:
                # Failures older than the window no longer count: start the row afresh.
                fresh = attempt.attempt_time < now - cool_off()
                AccessAttempt.objects.filter(pk=attempt.pk).update(
                    failures_since_start=1 if fresh else F("failures_since_start") + 1,
                    attempt_time=now,
                    path_info=request.axes_path_info,
                )
        request.arena_login_reserved = True
        return True

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs):
        if request is None or not getattr(request, "arena_login_reserved", False):
            # Refused while locked (nothing to count: the lock's end stays put) or a login
            # path that bypassed the backend: axes' own handling.
            return super().user_login_failed(sender, credentials, request, **kwargs)
        username = get_client_username(request, credentials)
        state = lock_state(username, request.axes_ip_address, clock.now())
        if state.locked:  # this failure used the last try
            request.axes_locked_out = True
            request.axes_credentials = credentials
            user_locked_out.send(
                "axes", request=request, username=username, ip_address=request.axes_ip_address
            )

    def user_logged_in(self, sender, request, user, **kwargs):
        super().user_logged_in(sender, request, user, **kwargs)
        # The right password from this address: its failures for this account are forgiven
        # (including the one reserved for this very attempt); other accounts' are not.
        AccessAttempt.objects.filter(
            username=user.get_username(), ip_address=request.axes_ip_address
        ).delete()


class AtomicAxesBackend(AxesBackend):
    """First authentication backend: reserves the attempt or refuses it (never logs anyone in;
    the next backend checks the password)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.AXES_ENABLED:
            return None
        if request is None:
            raise AxesBackendRequestParameterRequired("login throttling needs the request")
        credentials = get_credentials(username=username, password=password, **kwargs)
        AxesProxyHandler.update_request(request)
        handler = AxesProxyHandler.get_implementation()
        if handler.is_whitelisted(request, credentials) or handler.reserve(request, credentials):
            return None
        # Locked: spend what a password check spends, so the answer's timing is the same.
        make_password(password or "")
        request.axes_locked_out = True
        request.axes_credentials = credentials
        raise AxesBackendPermissionDenied("login locked for this client")


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    """429 saying when the lock ends (page and Retry-After), never "wrong password"."""
    username = get_client_username(request, credentials)
    now = clock.now()
    state = lock_state(username, request.axes_ip_address, now)
    until = state.until or now + cool_off()
    seconds = max(1, math.ceil((until - now).total_seconds()))
    body = render_to_string(
        "admin/login_locked.html",
        {
            "until": until,
            "minutes": math.ceil(seconds / 60),
            "scope": state.scope or "account",
            "title": "Sign-in locked",
        },
        request=request,
    )
    response = HttpResponse(body, status=settings.AXES_HTTP_RESPONSE_CODE)
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response
