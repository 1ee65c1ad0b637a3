"""Attack: a concurrent burst of password guesses against one account.

Before, every guess of a burst passed the "locked?" check before any failure was counted: 16
concurrent guesses got 13-14 checks where 5 were allowed, and the right password as the 16th
got in 2 times of 3. Real threads with their own PostgreSQL connections, released together.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Sum
from django.test import Client

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
BURST = 16


def test_a_concurrent_burst_gets_exactly_the_allowed_guesses(settings):
    settings.PASSWORD_HASHERS = ["tests.arena.hashers.SlowEnoughHasher"]
    settings.ARENA_LOGIN_MAX_FAILURES = 5
    settings.ARENA_LOGIN_MAX_FAILURES_PER_IP = 100
    get_user_model().objects.create_user("ops", password="correct horse", is_staff=True)
    barrier = threading.Barrier(BURST)

    def guess(i: int) -> int:
        client = Client(REMOTE_ADDR="10.7.7.7")
        try:
            barrier.wait(timeout=30)
            return client.post(
                "/admin/login/", {"username": "ops", "password": f"guess{i}"}
            ).status_code
        finally:
            connections.close_all()

    with ThreadPoolExecutor(BURST) as pool:
        codes = list(pool.map(guess, range(BURST)))

    checked = AccessAttempt.objects.aggregate(n=Sum("failures_since_start"))["n"]
    assert checked == 5  # exactly the allowance, however the burst interleaved
    # A checked guess answers the form (200), or 429 once the reservations of the burst have
    # used the allowance; the other 11 were refused without a check.
    assert set(codes) <= {200, 429} and codes.count(429) >= BURST - 4
    right = Client(REMOTE_ADDR="10.7.7.7").post(
        "/admin/login/", {"username": "ops", "password": "correct horse"}
    )
    assert right.status_code == 429
