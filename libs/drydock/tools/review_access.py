"""What the reviewer's tools share: the pull request the thread reviews (its current head and
diff, kept by the run's preparation) and the thread's findings."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.tools import ToolException

from drydock.credentials.user_tokens import app_authorization
from drydock.github import GithubClient
from drydock.review.findings import FindingStore
from drydock.review.target import ReviewTarget, ReviewTargets
from drydock.tools.context import ToolContext


@dataclass(frozen=True)
class ReviewAccess:
    context: ToolContext
    target: ReviewTarget
    findings: FindingStore

    @classmethod
    async def of(cls, context: ToolContext) -> ReviewAccess:
        """Raises :class:`ToolException` when the thread reviews no pull request."""
        target = await ReviewTargets(context.redis, context.keys).get(context.scope.thread_id)
        if target is None:
            raise ToolException("This thread is not reviewing a pull request.")
        findings = FindingStore(
            context.redis,
            context.keys,
            context.scope.thread_id,
            host=context.settings.github.host,
            repository=target.repository,
        )
        return cls(context, target, findings)

    def github(self) -> GithubClient:
        if self.context.outbound.github is None:
            raise ToolException("GitHub is not configured for this Drydock installation.")
        return self.context.outbound.github

    async def authorization(self) -> str:
        """The App's authorization on the repository (the reviewer always acts as the App)."""
        return await app_authorization(self.github(), self.target.repository)
