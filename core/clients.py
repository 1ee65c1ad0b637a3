"""Who a request comes from: its address, and the network that counts as one client.

Login throttling (arena/login.py) and the export limits (web/exports/gate.py) count clients by
network, not address: one IPv6 host is routinely given a whole /64 and can pick a new address
in it for every request (an attack run counted 40 wrong passwords from 8 addresses of one /64,
then logged in). IPv4 clients are counted by address (ARENA_CLIENT_IPV4_PREFIX, 32), IPv6
ones by ARENA_CLIENT_IPV6_PREFIX (64); an IPv4 address written as IPv6 (::ffff:a.b.c.d) is IPv4.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def client_ip(request) -> str | None:
    """The caller's IP, or None when there is none (a test request, a unix socket).
    X-Forwarded-For is trusted only when we are told how many proxies we sit behind
    (ARENA_TRUSTED_PROXIES), and then only the entry those proxies appended; an entry that is
    not an address is ignored (it is stored in an address column)."""
    hops = settings.ARENA_TRUSTED_PROXIES
    if hops > 0:
        forwarded = [
            p.strip() for p in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if p.strip()
        ]
        if len(forwarded) >= hops and _address(forwarded[-hops]) is not None:
            return forwarded[-hops]
    remote = request.META.get("REMOTE_ADDR", "")
    return remote if _address(remote) is not None else None


def client_network(request) -> str | None:
    """The first address of the caller's network (itself an address, so it fits an address
    column): what limits count as one client."""
    ip = client_ip(request)
    return None if ip is None else network_of(ip)


def network_of(ip: str) -> str:
    address = _address(ip)
    if address is None:
        return ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv6Address):
        prefix = int(getattr(settings, "ARENA_CLIENT_IPV6_PREFIX", 64))
    else:
        prefix = int(getattr(settings, "ARENA_CLIENT_IPV4_PREFIX", 32))
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False).network_address)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
