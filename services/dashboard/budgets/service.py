"""Continuing a thread paused at a budget from the dashboard: its owner or an administrator
replaces the pause with one more allowance for the thread's next run, then a follow-up starts
that run (the worker takes the allowance)."""

from __future__ import annotations

from drydock.budgets import Limits
from drydock.roles import Role
from drydock.threads.continuation import Continuations, grant_for
from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import Conflict, Forbidden
from services.dashboard.threads.schemas import Accepted
from services.dashboard.threads.service import Threads

CONTINUE_MESSAGE = "Continue (from the dashboard): go on where you stopped."


class Continuing:
    def __init__(self, dashboard: Dashboard, threads: Threads) -> None:
        self._d = dashboard
        self._threads = threads
        self._continuations = Continuations(dashboard.runtime.redis, dashboard.runtime.keys)

    async def resume(self, principal: Principal, thread_id: str) -> Accepted:
        """:class:`Forbidden` unless the owner or an administrator asks; :class:`Conflict` when the
        thread is not paused at a budget."""
        await self._threads.may_follow(principal, thread_id)
        thread = await self._d.metadata.get(thread_id)
        if not principal.admin and thread.owner != principal.user_id:
            raise Forbidden("only the thread's owner or an administrator can continue it past its budget")
        if thread.kind is not Role.CODER:
            raise Conflict(f"a {thread.kind} thread does not pause at a budget")
        paused = await self._continuations.paused(thread_id)
        if paused is None:
            raise Conflict("the thread is not paused at a budget")
        team = await self._d.accounts.team()
        repository = thread.repository
        settings = await self._d.accounts.repository(repository) if repository else None
        limits = Limits.of(team.budgets, settings.budgets if settings else None)
        if not await self._continuations.resume(thread_id, grant_for(paused, limits.run_usd, principal.session.login)):
            raise Conflict("the thread was continued already")
        return await self._threads.post(principal, thread_id, CONTINUE_MESSAGE)
