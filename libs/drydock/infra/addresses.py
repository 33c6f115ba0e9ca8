"""Which network addresses count as public, and the system resolver's answer for a name: shared
by the network tools' guard (:mod:`drydock.tools.netguard`) and the credential proxy's egress."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
"""Answers the addresses of a host name (``host``, ``port``)."""


def non_public(address: IPAddress) -> bool:
    """Loopback, private, shared, link-local (the cloud metadata address), reserved, multicast
    or unspecified: not an address on the public internet."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    # is_global alone lets multicast through, and is_private misses shared space (100.64/10).
    return not address.is_global or address.is_multicast or address.is_reserved or address.is_unspecified


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The system resolver's addresses for ``host``, in its order of preference;
    :class:`socket.gaierror` when it has none."""
    answers = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[IPAddress] = []
    for answer in answers:
        address = ipaddress.ip_address(str(answer[4][0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def literal(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (brackets of an IPv6 literal allowed)."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
