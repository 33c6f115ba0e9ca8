"""What the middleware needs from the rest of Drydock, as small protocols. The worker passes
the real parts: :class:`drydock.threads.Inbox`, :class:`drydock.sandbox.failures.SandboxFailures`,
and adapters over the channels' outbound clients bound to the thread's reply address."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from langchain_core.messages import AIMessage

from drydock.budgets import Reached
from drydock.channels.run_status import RunStatus
from drydock.threads.inbox import StoredMessage


class InboxReader(Protocol):
    async def read_after(self, thread_id: str, cursor: int = 0, *, limit: int | None = None) -> list[StoredMessage]:
        """The thread's messages with a sequence above ``cursor``, oldest first."""
        ...


class StatusReporter(Protocol):
    async def show(self, status: RunStatus, detail: str = "") -> None:
        """Show the run's status in the source channel's indicator (Slack assistant status,
        Linear agent activity, GitHub check run or reaction)."""
        ...


class SourceNotifier(Protocol):
    async def notify(self, text: str) -> None:
        """Post ``text`` to the conversation the thread came from."""
        ...


class SandboxFailureCounter(Protocol):
    async def count(self, thread_id: str) -> int:
        """Consecutive sandbox failures of the thread."""
        ...

    async def record(self, thread_id: str) -> int:
        """Count one more failure; the new count."""
        ...

    async def reset(self, thread_id: str) -> None: ...


class InstructionFileReader(Protocol):
    async def read_texts(self, paths: Sequence[str]) -> dict[str, str]:
        """The text of each of ``paths`` that exists, by path; missing files are left out."""
        ...


class UsageRecorder(Protocol):
    async def record(self, message: AIMessage, model: str) -> object:
        """Count the token usage and cost ``message`` (a model's reply to a call of ``model``) reports."""
        ...

    async def flush(self) -> None:
        """Wait until the usage counted so far is in the roll-ups the spend guard reads."""
        ...


class SpendGuard(Protocol):
    async def reached(self) -> Reached | None:
        """The spend limit the run has reached (None: it may make its next model call)."""
        ...
