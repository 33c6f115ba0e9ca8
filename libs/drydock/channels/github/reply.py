"""Answering on GitHub: a comment in the issue or pull request (or in a review comment's
thread), and the 👀 reaction that acknowledges pickup."""

from __future__ import annotations

from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.effects import marked, marker
from drydock.github import GithubClient


def _installation(address: dict[str, str]) -> int | None:
    value = address.get("installation_id")
    return int(value) if value else None


class GithubReplies:
    def __init__(self, client: GithubClient) -> None:
        self._client = client

    async def reply(self, address: ReplyAddress, text: str, *, effect: str | None = None) -> None:
        """Post ``text`` where the conversation happens; a review comment is answered in its thread.
        ``effect`` is kept in the comment as a hidden marker, for :meth:`find_reply`."""
        where = address.address
        if effect is not None:
            text = marked(text, effect)
        if "number" not in where:
            raise ValueError("a GitHub reply address needs an issue or pull request number")
        full_name, number = where["repository"], int(where["number"])
        if where.get("review_comment_id"):
            await self._client.reply_to_review_comment(
                _installation(where), full_name, number, int(where["review_comment_id"]), text
            )
        else:
            await self._client.create_comment(_installation(where), full_name, number, text)

    async def find_reply(self, address: ReplyAddress, effect: str) -> bool:
        """Whether the issue or pull request holds a comment marked with ``effect``. Replies in a
        review comment's thread are not looked up: they are posted again."""
        where = address.address
        if where.get("review_comment_id") or "number" not in where:
            return False
        comments = await self._client.list_comments(_installation(where), where["repository"], int(where["number"]))
        return any(marker(effect) in str(comment.get("body") or "") for comment in comments)

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
