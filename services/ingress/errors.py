"""Why the ingress refuses a request: each cause has one status and one metric outcome."""

from __future__ import annotations


class Rejected(Exception):
    """The request is refused with a 4xx; ``reason`` is safe to log and to return."""

    def __init__(self, status: int, reason: str, outcome: str, **details: int | str) -> None:
        """``details`` go into the answer's JSON body next to ``error`` (413: ``limit_bytes``)."""
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.outcome = outcome
        self.details = details


class Unavailable(Exception):
    """NATS or Redis cannot take the delivery now: 503 with ``Retry-After``, for the sender's retry."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
