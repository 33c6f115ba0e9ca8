"""Review styles: per repository, the review guidelines the analyzer learned (versions, with
where each came from), editing them, approving or rejecting a version, and asking the analyzer
for a bootstrap. People see the styles of repositories they may see; administrators edit,
decide and start analyses (an edit is a new version approved by its author)."""

from __future__ import annotations

from drydock.review.analysis import analyzer_thread
from drydock.review.guidelines import Guideline, GuidelinesVersion, UnknownVersion
from drydock.threads.states import ThreadState
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import Forbidden, Invalid, NotFound
from services.dashboard.repositories.service import full_name
from services.dashboard.review_styles.schemas import (
    AnalyzerOut,
    BootstrapOut,
    DecisionIn,
    EditIn,
    ReviewStyleOut,
    ReviewStyleSummary,
    RuleIO,
    VersionOut,
)


def version_out(found: GuidelinesVersion) -> VersionOut:
    return VersionOut(
        version=found.version,
        rules=[RuleIO(text=rule.text, category=rule.category, sources=len(rule.sources)) for rule in found.rules],
        mode=found.provenance.mode,
        summary=found.provenance.summary,
        based_on=found.provenance.based_on,
        edited_by=found.provenance.by,
        created_at=found.created_at,
        approval=found.approval.state.value,
        approved_by=found.approval.by,
        approved_at=found.approval.at,
        note=found.approval.note,
    )


class ReviewStyles:
    def __init__(self, dashboard: Dashboard) -> None:
        self._d = dashboard
        self._guidelines = dashboard.guidelines

    async def _analyzer(self, repository: str) -> AnalyzerOut | None:
        """The analyzer thread's real state (not the bootstrap's request flag, which stays
        ``requested`` when its run failed)."""
        thread_id = analyzer_thread(self._d.settings.github.host, repository)
        thread = await self._d.metadata.find(thread_id)
        if thread is None:
            return None
        state = thread.state or ThreadState.QUEUED
        return AnalyzerOut(
            thread_id=thread_id, state="done" if state is ThreadState.IDLE else state.value, url=f"/threads/{thread_id}"
        )

    async def _repository(self, principal: Principal, owner: str, name: str) -> str:
        repository = full_name(owner, name)
        settings = await self._d.accounts.repository(repository)
        if settings is None:
            raise NotFound(f"{repository} is not enabled")
        if not await self._d.access.may_see(principal.session, repository):
            raise Forbidden(f"you cannot see {repository} on GitHub")
        return settings.full_name

    async def overview(self, principal: Principal) -> list[ReviewStyleSummary]:
        found = []
        for settings in await self._d.accounts.repositories():
            if not await self._d.access.may_see(principal.session, settings.full_name):
                continue
            history = await self._guidelines.history(settings.full_name)
            current = next((item.version for item in history if item.approved), None)
            found.append(
                ReviewStyleSummary(
                    repository=settings.full_name,
                    reviewer=settings.reviewer,
                    current=current,
                    latest=history[0].version if history else None,
                    pending=sum(item.approval.state.value == "pending" for item in history),
                    analyzer=await self._analyzer(settings.full_name),
                )
            )
        return found

    async def get(self, principal: Principal, owner: str, name: str) -> ReviewStyleOut:
        repository = await self._repository(principal, owner, name)
        history = await self._guidelines.history(repository)
        return ReviewStyleOut(
            repository=repository,
            current=next((item.version for item in history if item.approved), None),
            bootstrap=await self._d.bootstrap_state(repository),
            analyzer=await self._analyzer(repository),
            versions=[version_out(item) for item in history],
        )

    async def version(self, principal: Principal, owner: str, name: str, version: int) -> VersionOut:
        repository = await self._repository(principal, owner, name)
        found = await self._guidelines.get(repository, version)
        if found is None:
            raise NotFound(f"{repository} has no guidelines version {version}")
        return version_out(found)

    async def edit(self, principal: Principal, owner: str, name: str, change: EditIn) -> VersionOut:
        repository = await self._repository(principal, owner, name)
        rules = [
            Guideline(text=rule.text.strip(), category=(rule.category or "").strip() or None) for rule in change.rules
        ]
        try:
            version = await self._guidelines.edit(
                repository, rules, by=principal.session.login, based_on=change.based_on
            )
        except UnknownVersion as error:
            raise Invalid.field(("body", "based_on"), str(error)) from None
        found = await self._guidelines.get(repository, version)
        assert found is not None
        return version_out(found)

    async def decide(
        self, principal: Principal, owner: str, name: str, version: int, decision: DecisionIn, *, approve: bool
    ) -> VersionOut:
        repository = await self._repository(principal, owner, name)
        decide = self._guidelines.approve if approve else self._guidelines.reject
        try:
            found = await decide(repository, version, by=principal.session.login, note=decision.note)
        except UnknownVersion as error:
            raise NotFound(str(error)) from None
        return version_out(found)

    async def bootstrap(self, principal: Principal, owner: str, name: str) -> BootstrapOut:
        repository = await self._repository(principal, owner, name)
        thread_id = await self._d.request_bootstrap(repository, principal.user_id)
        return BootstrapOut(repository=repository, thread_id=thread_id)
