"""Where a webhook becomes a thread id (DESIGN.md section 2).

Every conversation has a canonical key (:mod:`drydock.threads.ids`); a pull request the agent
created belongs instead to the thread that created it, found through the durable PR record,
then the branch index, then the short id its branch name carries.
"""

from __future__ import annotations

from drydock.channels.intents import Conversation, GithubConversation, LinearConversation, SlackConversation
from drydock.threads import ids
from drydock.threads.pr_records import branch_short_id
from services.ingress.lookup import Lookup, LookupBatch


def conversation_thread(conversation: Conversation) -> str:
    """The thread id of the conversation's canonical key."""
    match conversation:
        case GithubConversation(host=host, owner=owner, repo=repo, number=number, pull_request=True):
            return ids.github_pr(host, owner, repo, number)
        case GithubConversation(host=host, owner=owner, repo=repo, number=number):
            return ids.github_issue(host, owner, repo, number)
        case SlackConversation(team=team, channel=channel, thread_ts=thread_ts):
            return ids.slack_thread(team, channel, thread_ts)
        case LinearConversation(organization=organization, issue_id=issue_id):
            return ids.linear_issue(organization, issue_id)
    raise TypeError(f"unknown conversation {conversation!r}")


def queue_reads(batch: LookupBatch, conversation: Conversation) -> None:
    """Ask the batch for everything :func:`resolve` needs."""
    if isinstance(conversation, GithubConversation) and conversation.pull_request:
        batch.pull_request(conversation.full_name, conversation.number)
        if conversation.head_ref is not None:
            batch.branch(conversation.full_name, conversation.head_ref, branch_short_id(conversation.head_ref))
    batch.thread(conversation_thread(conversation))


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
    if isinstance(conversation, GithubConversation) and conversation.pull_request:
        found = lookup.pr_threads.get((conversation.full_name.lower(), conversation.number))
        if found is None and conversation.head_ref is not None:
            found = agent_branch_thread(lookup, conversation.full_name, conversation.head_ref)
        if found is not None:
            return found, True
    return conversation_thread(conversation), False
