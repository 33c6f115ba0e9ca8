"""Where a message happens, as a channel names it; each channel's package defines its own kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from drydock.bus.envelopes import Channel


@dataclass(frozen=True)
class ChangeRequest:
    """A code host's pull request: the agent may have created it, and then it belongs to the
    creating thread (found through its PR record or branch) rather than to its own key."""

    full_name: str
    number: int
    head_ref: str | None


class Conversation:
    """Base of every channel's conversation (a frozen dataclass in the channel's package).

    ``source`` picks the adapter (:data:`drydock.channels.registry.CHANNELS`) that turns the
    conversation into its thread key."""

    source: ClassVar[Channel]

    @property
    def change_request(self) -> ChangeRequest | None:
        """The pull request this conversation is on, where the channel is a code host."""
        return None
