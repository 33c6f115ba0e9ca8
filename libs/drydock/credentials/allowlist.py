"""The egress allowlist: which hosts a sandbox may reach through the forward proxy.

Entries: ``host`` (ports 80 and 443; a ``CONNECT`` tunnel to 443 only), ``host:port`` (that port
only), ``*.domain`` (any subdomain of ``domain``, as ``host``; ``*.domain:port`` for another port).
IPv6 literals are written in brackets: ``[::1]:8443``.

A host named by an entry may be reached wherever it resolves: whoever wrote the entry chose that
host, internal mirrors included. A host matched only by a wildcard is reached at public addresses
only: under a domain where anyone can publish names, a name can be made to resolve to the
cluster's own services or the cloud metadata address.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

DEFAULT_PORTS = frozenset({80, 443})
DEFAULT_TUNNEL_PORTS = frozenset({443})
_ENTRY = re.compile(r"^(?P<wild>\*\.)?(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?$")


class Reach(Enum):
    """Where an allowed host may be reached."""

    ANY_ADDRESS = "any address"
    PUBLIC_ADDRESSES = "public addresses only"


class AllowlistError(ValueError):
    """An allowlist entry that cannot be understood."""


@dataclass(frozen=True)
class _Rule:
    host: str
    subdomains: bool
    ports: frozenset[int]
    tunnel_ports: frozenset[int]

    def matches(self, host: str, port: int, tunnel: bool) -> bool:
        if port not in (self.tunnel_ports if tunnel else self.ports):
            return False
        return host.endswith("." + self.host) if self.subdomains else host == self.host


def _normalize(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


class Allowlist:
    """Decides whether ``host:port`` may be reached; built once, then only asked."""

    def __init__(self, entries: Iterable[str]) -> None:
        rules = []
        for entry in entries:
            match = _ENTRY.match(entry.strip())
            if match is None:
                raise AllowlistError(f"{entry!r} is not an allowlist entry (host, host:port or *.domain)")
            port = match["port"]
            if port is not None and not 0 < int(port) < 65536:
                raise AllowlistError(f"{entry!r} has an invalid port")
            rules.append(
                _Rule(
                    host=_normalize(match["host"]),
                    subdomains=match["wild"] is not None,
                    ports=frozenset({int(port)}) if port is not None else DEFAULT_PORTS,
                    tunnel_ports=frozenset({int(port)}) if port is not None else DEFAULT_TUNNEL_PORTS,
                )
            )
        self._rules = tuple(rules)

    def reach(self, host: str, port: int, *, tunnel: bool = False) -> Reach | None:
        """``None`` when no entry allows ``host:port``; a ``tunnel`` (``CONNECT``) reaches port 443, or
        a port an entry names, since a tunnel to port 80 would carry requests naming any host."""
        normalized = _normalize(host)
        matched = [rule for rule in self._rules if rule.matches(normalized, port, tunnel)]
        if not matched:
            return None
        return Reach.PUBLIC_ADDRESSES if all(rule.subdomains for rule in matched) else Reach.ANY_ADDRESS

    def allows(self, host: str, port: int) -> bool:
        return self.reach(host, port) is not None
