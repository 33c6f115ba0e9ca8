"""The budgets a run passes before it claims a sandbox, and the pause at a budget.

In order, before the sandbox: a paused thread runs only when its newest message is a continue
from the thread's owner or an administrator (anyone else's is refused with a notice); a day
budget already spent refuses the run and pauses the thread; a team at its concurrency limit
defers the run (the lease is held, the wake kept alive) until a place frees, with one notice.
A refusal ends the run like an early end (:class:`RunRefused`): the notice answers the
messages, and the checkpoint keeps them for the run that continues.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import structlog

from drydock.accounts import AccountsStore
from drydock.budgets import ActiveRuns, Grant, Limits, Reached, SpendCheck
from drydock.budgets.reached import dollars
from drydock.bus.envelopes import Channel, InboxMessage
from drydock.errors import describe
from drydock.infra.cancellation import pause
from drydock.threads.continuation import Continuations, asks_to_continue, grant_for
from drydock.threads.inbox import StoredMessage
from drydock.threads.metadata import ThreadMetadata
from drydock.threads.stops import StopRequests
from drydock.worker.sources import SourceNotices

log = structlog.get_logger(__name__)

DEFER_LIMIT = timedelta(minutes=30)
"""How long a run waits for a place under the team's concurrency limit before it gives up."""
DEFER_POLL = 1.0


class RunRefused(Exception):
    """A budget refused the run before its sandbox; the message is the notice given."""


def how_to_continue(handle: str) -> str:
    return (
        f"The thread's owner or an administrator can let me go on once: reply `{handle} continue`, "
        "press Continue, or use Continue on the thread's page in the dashboard."
    )


def paused_notice(reached: Reached, handle: str) -> str:
    """What the source is told when a run stops or is refused at a spend limit."""
    return f"I paused at {reached.limit_text}: I {reached.spent_text}. {how_to_continue(handle)}"


def stopped_notice(reached: Reached) -> str:
    """What the source of a thread that does not pause (a reviewer's) is told at a spend limit."""
    return f"I stopped at {reached.limit_text}: I {reached.spent_text}. The next trigger starts a new run."


def continued_notice(by: str, grant: Grant) -> str:
    extra = f" (up to {dollars(grant.extra_usd)} past the day budget)" if grant.extra_usd else ""
    return f"Continuing, as {by} asked: this run has one more allowance{extra}."


def refused_continue_notice(who: str) -> str:
    return f"{who}, only the thread's owner or an administrator can continue it past its budget; I stay paused."


@dataclass(frozen=True)
class Admission:
    spend: SpendCheck
    grant: Grant | None


class BudgetGate:
    def __init__(
        self,
        accounts: AccountsStore,
        continuations: Continuations,
        active: ActiveRuns,
        stops: StopRequests,
        *,
        admin_logins: list[str],
    ) -> None:
        self.accounts = accounts
        self.continuations = continuations
        self.active = active
        self.stops = stops
        self._admins = {login.lower() for login in admin_logins}

    async def may_continue(self, message: InboxMessage, thread: ThreadMetadata) -> bool:
        """Whether the message's author owns the thread or is an administrator."""
        author = message.author
        if thread.is_owned_by(user_id=author.user_id, author=f"{author.channel.value}:{author.external_id}"):
            return True
        if author.user_id:
            identity = await self.accounts.identity(author.user_id)
            return identity is not None and identity.login.lower() in self._admins
        return False

    async def _who(self, message: InboxMessage) -> str:
        """How to name the author in a notice: their Drydock login, else as their channel shows them."""
        author = message.author
        identity = await self.accounts.identity(author.user_id) if author.user_id else None
        if identity is not None:
            return identity.login
        if author.channel is Channel.SLACK:
            return f"<@{author.external_id}>"
        return author.name

    async def admit(
        self,
        thread_id: str,
        thread: ThreadMetadata,
        queued: list[StoredMessage],
        spend: SpendCheck,
        notices: SourceNotices | None,
        *,
        handle: str,
        pauses: bool = True,
    ) -> Admission:
        """Pass the pause and the day budgets, or raise :class:`RunRefused`. A thread that
        ``pauses`` (a coder's: its owner can continue it) is paused at a day budget; another one
        is refused this run only."""
        if not pauses:
            reached = await spend.day_reached()
            if reached is not None:
                raise RunRefused(stopped_notice(reached))
            return Admission(spend=spend, grant=None)
        found = await self.continuations.paused_or_take_grant(thread_id)
        if isinstance(found, Reached):
            paused = found
            newest = queued[-1].message if queued else None
            if newest is None or not asks_to_continue(newest.text, handle):
                raise RunRefused(paused_notice(paused, handle))
            who = await self._who(newest)
            if not await self.may_continue(newest, thread):
                raise RunRefused(refused_continue_notice(who))
            grant = grant_for(paused, spend.limits.run_usd, by=who)
            if await self.continuations.resume(thread_id, grant) and notices is not None:
                await _tell(notices, continued_notice(who, grant), thread_id)
            found = await self.continuations.take_grant(thread_id)
        spend.grant = found
        reached = await spend.day_reached()
        if reached is not None:
            await self.continuations.pause(thread_id, reached)
            raise RunRefused(paused_notice(reached, handle))
        return Admission(spend=spend, grant=spend.grant)

    @contextlib.asynccontextmanager
    async def place(
        self, thread_id: str, limits: Limits, notices: SourceNotices | None, *, limit: timedelta = DEFER_LIMIT
    ) -> AsyncIterator[None]:
        """Hold a place among the team's running runs for the body; wait for one while the team
        is at its limit (told once), or raise :class:`RunRefused` after ``limit``."""
        clock = asyncio.get_running_loop().time
        deadline = clock() + limit.total_seconds()
        told = False
        while not await self.active.claim(thread_id, limits.active_runs):
            if not told:
                told = True
                if notices is not None:
                    await _tell(
                        notices,
                        f"{_runs(limits.active_runs)} going on in the team, its limit of runs at once: "
                        "I start as soon as a place frees.",
                        thread_id,
                    )
            if await self.stops.pending(thread_id):
                raise RunRefused("Stopped before I started, while waiting for a place.")
            if clock() >= deadline:
                raise RunRefused(
                    f"The team stayed at its limit of {limits.active_runs} runs going on for "
                    f"{int(limit.total_seconds() // 60)} minutes, so I did not start. Mention me again later."
                )
            await asyncio.sleep(DEFER_POLL)
        renewal = asyncio.create_task(self._renew(thread_id, limits))
        try:
            yield
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            await self.active.release(thread_id)

    async def _renew(self, thread_id: str, limits: Limits) -> None:
        while True:
            await pause(self.active.renew_every)
            try:
                await self.active.claim(thread_id, None)
            except Exception as error:
                log.warning("renewing the run's place failed", thread_id=thread_id, error=describe(error))


def _runs(count: int | None) -> str:
    return "1 run is" if count == 1 else f"{count} runs are"


async def _tell(notices: SourceNotices, text: str, thread_id: str) -> None:
    try:
        await notices.notify(text)
    except Exception as error:
        log.warning("notice to the source failed", thread_id=thread_id, error=describe(error))
