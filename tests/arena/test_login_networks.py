"""Login limits count an IPv6 client by its /64 and an IPv4 client by its address.

An attack run sent 40 wrong passwords from 8 addresses of one /64, all counted apart, and the
right one then logged in: a host given a /64 can use a new address for every guess.
"""

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import override_settings

from core.clients import network_of

pytestmark = pytest.mark.django_db
LIMITS = {"ARENA_LOGIN_MAX_FAILURES": 3, "ARENA_LOGIN_MAX_FAILURES_PER_IP": 5}


@pytest.fixture(autouse=True)
def staff():
    cache.clear()
    return get_user_model().objects.create_user("ops", password="correct horse", is_staff=True)


def _login(client, password, ip):
    data = {"username": "ops", "password": password}
    return client.post("/admin/login/?next=/admin/", data, REMOTE_ADDR=ip)


@override_settings(**LIMITS)
def test_addresses_of_one_ipv6_64_share_one_count(client):
    addresses = [f"2001:db8:1:2::{n:x}" for n in range(1, 9)] + ["2001:db8:1:2:ffff::1"]
    answers = [_login(client, "wrong", ip).status_code for ip in addresses[:3]]
    assert answers == [200, 200, 429]  # the account's third failure from the network locks it
    assert _login(client, "correct horse", addresses[5]).status_code == 429
    assert _login(client, "correct horse", addresses[8]).status_code == 429
    # Another /64 is another client.
    assert _login(client, "correct horse", "2001:db8:1:3::1").status_code == 302


@override_settings(**LIMITS)
def test_ipv4_neighbours_are_counted_apart(client):
    for _ in range(3):
        _login(client, "wrong", "192.0.2.10")
    assert _login(client, "correct horse", "192.0.2.10").status_code == 429
    assert _login(client, "correct horse", "192.0.2.11").status_code == 302


@pytest.mark.parametrize(
    ("address", "prefixes", "network"),
    [
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", {}, "2001:db8:1:2::"),
        ("2001:db8:1:2:aaaa::1", {"ARENA_CLIENT_IPV6_PREFIX": 48}, "2001:db8:1::"),
        ("::ffff:192.0.2.7", {}, "192.0.2.7"),
        ("192.0.2.7", {}, "192.0.2.7"),
        ("192.0.2.7", {"ARENA_CLIENT_IPV4_PREFIX": 24}, "192.0.2.0"),
    ],
)
def test_the_network_of_an_address_follows_the_settings(address, prefixes, network):
    with override_settings(**prefixes):
        assert network_of(address) == network
