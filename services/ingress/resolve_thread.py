"""Where a webhook becomes a thread id (DESIGN.md section 2).

Every conversation has a canonical key, given by its channel's adapter
(:func:`drydock.channels.registry.thread_id`); a pull request the agent created belongs instead
to the thread that created it, found through the durable PR record, then the branch index,
then the short id its branch name carries. The record and the branch index are kept per
repository; the short id is not, so its thread counts only when it works on the event's
repository.
"""

from __future__ import annotations

from drydock.channels.conversation import Conversation
from drydock.channels.registry import thread_id
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import branch_short_id
from services.ingress.lookup import Lookup, LookupBatch


def queue_reads(batch: LookupBatch, conversation: Conversation) -> None:
    """Ask the batch for everything :func:`resolve` needs."""
    change = conversation.change_request
    if change is not None:
        batch.pull_request(change.full_name, change.number)
        if change.head_ref is not None:
            batch.branch(change.full_name, change.head_ref, branch_short_id(change.head_ref))
    batch.thread(thread_id(conversation))


async def agent_branch_thread(lookup: Lookup, metadata: ThreadMetadataStore, full_name: str, branch: str) -> str | None:
    """The thread owning an agent branch of ``full_name``: the branch index, else the short id
    in its name when that thread works on ``full_name``."""
    found = lookup.branch_threads.get((full_name.lower(), branch))
    if found is not None:
        return found
    short = branch_short_id(branch)
    found = lookup.short_threads.get(short) if short is not None else None
    if found is None:
        return None
    known = lookup.threads[found] if found in lookup.threads else await metadata.known(found)
    if known is None or known.repository is None or known.repository.lower() != full_name.lower():
        return None
    return found


async def resolve(conversation: Conversation, lookup: Lookup, metadata: ThreadMetadataStore) -> tuple[str, bool]:
    """The thread id, and whether it belongs to a pull request the agent created (such a
    thread always exists: the agent opened the pull request from it)."""
    change = conversation.change_request
    if change is not None:
        found = lookup.pr_threads.get((change.full_name.lower(), change.number))
        if found is None and change.head_ref is not None:
            found = await agent_branch_thread(lookup, metadata, change.full_name, change.head_ref)
        if found is not None:
            return found, True
    return thread_id(conversation), False
