"""What the GitHub tools share: the thread's repository and client, the thread's own issue or
pull request, the pull requests the thread opened, and the authorization to act with.

Pull requests are opened and changed as the thread's user when they stored a GitHub token
(DESIGN.md section 5), else as the App; a user token GitHub no longer accepts falls back to the
App. Comments are always the App's, so the ingress recognises them as the agent's own.
Refusals the model can act on are :class:`ToolException` (answered as the tool's result).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from langchain_core.tools import ToolException

from drydock.bus.envelopes import Channel
from drydock.channels.errors import OutboundFailed
from drydock.credentials.cipher import SecretCipher
from drydock.credentials.user_tokens import UserTokens, app_authorization
from drydock.github import GithubClient
from drydock.threads.pr_records import PullRequestRecord, PullRequestStore
from drydock.tools.context import ToolContext

log = structlog.get_logger(__name__)

T = TypeVar("T")

REFUSED_STATUSES = frozenset({403, 404, 409, 422})
"""GitHub answers the model can act on (no access, not found, conflict, validation)."""


class GithubAccess:
    """The thread's repository on GitHub, as a run of the thread may act on it."""

    def __init__(self, context: ToolContext, client: GithubClient, repository: str) -> None:
        self.context = context
        self.client = client
        self.repository = repository
        self.host = context.settings.github.host
        self.records = PullRequestStore(context.redis, context.keys)

    @classmethod
    def of(cls, context: ToolContext) -> GithubAccess:
        """Raises :class:`ToolException` when GitHub is not configured or the thread has no repository."""
        if context.outbound.github is None:
            raise ToolException("GitHub is not configured for this Drydock installation.")
        if context.scope.repository is None:
            raise ToolException("This thread has no repository on GitHub.")
        return cls(context, context.outbound.github, context.scope.repository)

    @property
    def owner(self) -> str:
        return self.repository.partition("/")[0]

    def _own_address(self) -> dict[str, str]:
        """The thread's reply address when it is on this repository, else nothing."""
        where = self.context.scope.reply_to
        if where.channel is not Channel.GITHUB:
            return {}
        if where.address.get("repository", "").lower() != self.repository.lower():
            return {}
        return where.address

    def own_number(self) -> int | None:
        """The issue or pull request the thread came from, when it came from this repository."""
        number = self._own_address().get("number")
        return int(number) if number else None

    def own_installation(self) -> int | None:
        """The App's installation the thread's webhook came through, if it names one."""
        value = self._own_address().get("installation_id")
        return int(value) if value else None

    async def thread_pulls(self) -> list[PullRequestRecord]:
        """The pull requests this thread opened in its repository."""
        return [
            record
            for record in await self.records.of_thread(self.context.scope.thread_id)
            if record.repository.lower() == self.repository.lower() and record.host == self.host
        ]

    async def thread_pull(self, number: int | None) -> PullRequestRecord:
        """The thread's pull request ``number``, or its only one when ``number`` is ``None``;
        :class:`ToolException` for a pull request another thread or a person opened."""
        if number is None:
            records = await self.thread_pulls()
            if not records:
                raise ToolException(f"This thread has opened no pull request in {self.repository} yet.")
            if len(records) > 1:
                numbers = ", ".join(f"#{record.number}" for record in records)
                raise ToolException(f"This thread opened several pull requests ({numbers}); name one with `number`.")
            return records[0]
        record = await self.records.find(self.host, self.repository, number)
        if record is None or record.thread_id != self.context.scope.thread_id:
            raise ToolException(
                f"Pull request #{number} of {self.repository} was not opened by this thread; "
                "this tool acts only on the thread's own pull requests."
            )
        return record

    async def _user_token(self) -> str | None:
        """The thread's user's own GitHub token; none without a user or without encryption keys."""
        user_id, keys = self.context.scope.user_id, self.context.settings.crypto.keys
        if user_id is None or not keys:
            return None
        return await UserTokens(self.context.redis, self.context.keys, SecretCipher(keys)).get(user_id)

    async def as_user_or_app(self, call: Callable[[str], Awaitable[T]]) -> T:
        """Run ``call`` with the user's authorization, or the App's when the user has none or
        GitHub rejects theirs (401)."""
        user_token = await self._user_token()
        if user_token is not None:
            try:
                return await call(f"token {user_token}")
            except OutboundFailed as failure:
                if failure.status != 401:
                    raise
                log.warning(
                    "user token rejected by GitHub; acting as the App",
                    thread_id=self.context.scope.thread_id,
                    user_id=self.context.scope.user_id,
                )
        return await call(await app_authorization(self.client, self.repository))


async def refusing(pending: Awaitable[T]) -> T:
    """``pending``'s result; a GitHub answer the model can act on becomes a :class:`ToolException`."""
    try:
        return await pending
    except OutboundFailed as failure:
        if failure.status in REFUSED_STATUSES:
            raise ToolException(failure.reason) from None
        raise
