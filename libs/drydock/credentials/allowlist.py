"""The egress allowlist: which hosts a sandbox may reach through the forward proxy.

Entries: ``host`` (ports 80 and 443), ``host:port`` (that port only), ``*.domain`` (any
subdomain of ``domain``, ports 80 and 443; ``*.domain:port`` for another port). IPv6 literals
are written in brackets: ``[::1]:8443``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_PORTS = frozenset({80, 443})
_ENTRY = re.compile(r"^(?P<wild>\*\.)?(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?$")


class AllowlistError(ValueError):
    """An allowlist entry that cannot be understood."""


@dataclass(frozen=True)
class _Rule:
    host: str
    subdomains: bool
    ports: frozenset[int]

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
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
                )
            )
        self._rules = tuple(rules)

    def allows(self, host: str, port: int) -> bool:
        normalized = _normalize(host)
        return any(rule.matches(normalized, port) for rule in self._rules)
