"""The message bus: NATS JetStream subjects, streams, envelopes and acknowledged publishing."""

from drydock.bus.client import Bus, BusUnavailable, MessageTooLarge, connect_nats
from drydock.bus.envelopes import (
    Author,
    Channel,
    EventType,
    GithubEvent,
    InboxMessage,
    ReplyAddress,
    RunEvent,
    Trigger,
    Wake,
)
from drydock.bus.streams import Topology, provision, topology

__all__ = [
    "Author",
    "Bus",
    "BusUnavailable",
    "Channel",
    "EventType",
    "GithubEvent",
    "InboxMessage",
    "MessageTooLarge",
    "ReplyAddress",
    "RunEvent",
    "Topology",
    "Trigger",
    "Wake",
    "connect_nats",
    "provision",
    "topology",
]
