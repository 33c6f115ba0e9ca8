"""The errors every channel raises, one type per cause, so the ingress maps each to one status."""

from __future__ import annotations


class ChannelError(Exception):
    """Base of the channel errors; ``reason`` is safe to log (it never quotes secrets)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class VerificationFailed(ChannelError):
    """The delivery's signature or timestamp does not check out: it is not from the source."""


class MalformedDelivery(ChannelError):
    """A verified delivery whose body or headers cannot be understood."""


class ChannelNotConfigured(ChannelError):
    """The channel lacks the secret or credential this operation needs."""


class OutboundFailed(ChannelError):
    """A call to the channel's API failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
