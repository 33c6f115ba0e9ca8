"""Answering on GitHub: a comment in the issue or pull request (or in a review comment's
thread), and the 👀 reaction that acknowledges pickup."""

from __future__ import annotations

from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.github.client import GithubClient


def _installation(address: dict[str, str]) -> int | None:
    value = address.get("installation_id")
    return int(value) if value else None


class GithubReplies:
    def __init__(self, client: GithubClient) -> None:
        self._client = client

    async def reply(self, address: ReplyAddress, text: str) -> None:
        """Post ``text`` where the conversation happens; a review comment is answered in its thread."""
        where = address.address
        if "number" not in where:
            raise ValueError("a GitHub reply address needs an issue or pull request number")
        full_name, number = where["repository"], int(where["number"])
        if where.get("review_comment_id"):
            await self._client.reply_to_review_comment(
                _installation(where), full_name, number, int(where["review_comment_id"]), text
            )
        else:
            await self._client.create_comment(_installation(where), full_name, number, text)

    async def acknowledge(self, message: InboxMessage) -> bool:
        """React with 👀 to the comment or issue that triggered the run; False when the source
        (a review) cannot carry a reaction."""
        refs, where = message.references, message.reply_to.address
        full_name = where["repository"]
        match refs.get("comment_kind"):
            case "issue_comment":
                await self._client.react(_installation(where), full_name, "issue_comment", int(refs["comment_id"]))
            case "review_comment":
                await self._client.react(_installation(where), full_name, "review_comment", int(refs["comment_id"]))
            case "issue":
                await self._client.react(_installation(where), full_name, "issue", int(where["number"]))
            case _:
                return False
        return True
