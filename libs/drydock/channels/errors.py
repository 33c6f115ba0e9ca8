"""The errors every channel raises, one type per cause, so the ingress maps each to one status.
The ones an outbound call raises live in :mod:`drydock.errors`, as the GitHub client below the
channels raises them too."""

from __future__ import annotations

from drydock.errors import ChannelError, ChannelNotConfigured, OutboundFailed

__all__ = ["ChannelError", "ChannelNotConfigured", "MalformedDelivery", "OutboundFailed", "VerificationFailed"]


class VerificationFailed(ChannelError):
    """The delivery's signature or timestamp does not check out: it is not from the source."""


class MalformedDelivery(ChannelError):
    """A verified delivery whose body or headers cannot be understood."""
