"""A GitHub conversation: an issue or a pull request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from drydock.bus.envelopes import Channel
from drydock.channels.conversation import ChangeRequest, Conversation
from drydock.threads import ids


@dataclass(frozen=True)
class GithubConversation(Conversation):
    """An issue or a pull request; ``head_ref`` is known for events that carry the pull request,
    and only when its head branch is in the repository itself (not a fork's)."""

    source: ClassVar[Channel] = Channel.GITHUB

    host: str
    owner: str
    repo: str
    number: int
    pull_request: bool
    head_ref: str | None = None

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def change_request(self) -> ChangeRequest | None:
        return ChangeRequest(self.full_name, self.number, self.head_ref) if self.pull_request else None


def thread_key(conversation: GithubConversation) -> str:
    """An issue's key, or a pull request's (one the agent created routes through its PR record)."""
    key = ids.github_pr_key if conversation.pull_request else ids.github_issue_key
    return key(conversation.host, conversation.owner, conversation.repo, conversation.number)
