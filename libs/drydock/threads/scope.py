"""The thread a run acts for: what tools, prompts and graphs close over instead of trusting the
model to name the thread, repository or conversation."""

from __future__ import annotations

from dataclasses import dataclass

from drydock.bus.envelopes import ReplyAddress
from drydock.roles import Role


@dataclass(frozen=True)
class ThreadScope:
    """The thread a run acts for."""

    thread_id: str
    run_id: str
    role: Role
    repository: str | None
    """owner/name on the code host, when the thread has one."""
    reply_to: ReplyAddress
    """The conversation the thread came from."""
    user_id: str | None = None
    """The Drydock user who started the thread, when the author's account is linked."""
