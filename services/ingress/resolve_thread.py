"""Where a webhook becomes a thread id (DESIGN.md section 2).

Every conversation has a canonical key, given by its channel's adapter
(:func:`drydock.channels.registry.thread_id`); a pull request the agent created belongs instead
to the thread that created it, found through the durable PR record, then the branch index,
then the short id its branch name carries.
"""

from __future__ import annotations

from drydock.channels.conversation import Conversation
from drydock.channels.registry import thread_id
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


def agent_branch_thread(lookup: Lookup, full_name: str, branch: str) -> str | None:
    """The thread owning an agent branch: the branch index, else the short id in its name."""
    found = lookup.branch_threads.get((full_name.lower(), branch))
    if found is not None:
        return found
    short = branch_short_id(branch)
    return lookup.short_threads.get(short) if short is not None else None


def resolve(conversation: Conversation, lookup: Lookup) -> tuple[str, bool]:
    """The thread id, and whether it belongs to a pull request the agent created (such a
    thread always exists: the agent opened the pull request from it)."""
    change = conversation.change_request
    if change is not None:
        found = lookup.pr_threads.get((change.full_name.lower(), change.number))
        if found is None and change.head_ref is not None:
            found = agent_branch_thread(lookup, change.full_name, change.head_ref)
        if found is not None:
            return found, True
    return thread_id(conversation), False
