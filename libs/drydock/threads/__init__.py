"""Threads: stable ids, metadata, the per-thread lease and the inbox."""

from drydock.threads import ids
from drydock.threads.inbox import AppendResult, Inbox, StoredMessage
from drydock.threads.lease import HeldLease, Lease, LeaseBusy, LeaseLost, Leases
from drydock.threads.metadata import ThreadExists, ThreadMetadata, ThreadMetadataStore, ThreadNotFound

__all__ = [
    "AppendResult",
    "HeldLease",
    "Inbox",
    "Lease",
    "LeaseBusy",
    "LeaseLost",
    "Leases",
    "StoredMessage",
    "ThreadExists",
    "ThreadMetadata",
    "ThreadMetadataStore",
    "ThreadNotFound",
    "ids",
]
