"""What makes an agent role that role, declared once per role (:mod:`drydock.worker.roles`):
its tools, its graph (which holds its middleware list, its prompt and its subagents), the
preparation of each run after the checkout, and where its runs differ from the others'.

A worker service names its role's :class:`RoleSpec`; the run loop
(:mod:`drydock.worker.agent_runs`) reads it and branches on nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import ReviewSettings
from drydock.github import GithubClient
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.threads.checkout import Checkout
from drydock.threads.scope import ThreadScope


class RunEnded(Exception):
    """A run ended early for a reason told to the source conversation; the wake is done."""


class RunSkipped(Exception):
    """A role's preparation found nothing to do (e.g. no new evidence): the run completes
    without calling the model."""


@dataclass(frozen=True)
class RunSetup:
    """What a role's preparation is given: the run's scope, its sandbox and default-branch
    checkout, and the stores and clients a preparation reads."""

    scope: ThreadScope
    backend: SandboxBackend
    checkout: Checkout | None
    bus: Bus
    redis: Redis
    keys: Keys
    github: GithubClient | None
    """The GitHub client (None: GitHub is not configured)."""
    host: str
    """The GitHub host the thread's repository is on."""
    review: ReviewSettings

    def github_client(self) -> GithubClient:
        """The GitHub client; without one the run ends with a notice."""
        if self.github is None:
            raise RunEnded("GitHub is not configured for this Drydock installation; there is nothing to review.")
        return self.github


@dataclass(frozen=True)
class Prepared:
    """What the agent is built with after a preparation."""

    scope: ThreadScope
    checkout: Checkout | None


Prepare = Callable[[RunSetup], Awaitable[Prepared]]
"""A role's preparation: given the sandbox and the default-branch checkout, returns the scope
and checkout the agent is built with (e.g. the reviewer's checkout at the pull request's head).
May raise :class:`RunEnded` or :class:`RunSkipped`."""


@dataclass(frozen=True)
class RoleSpec:
    """One agent role, declared once: what a worker of it runs and how its runs differ."""

    role: Role
    tools: tuple[str, ...]
    """Drydock's own tools (:data:`drydock.tools.REGISTRY` names), in the order the model sees them."""
    graph: str
    """The graph ``langgraph.json`` names for the role: its builder in ``drydock.graphs`` puts
    together the framework's tools, the role's middleware list (:mod:`drydock.middleware.stack`),
    its prompt and its subagents."""
    prepare: Prepare | None = None
    """Run after the checkout, before the agent is built (None: the default-branch checkout as it is)."""
    inbox_at_start: bool = False
    """The role's graph has no inbox middleware: a new turn starts with the messages queued
    since the checkpoint's cursor (and a turn with none is not run)."""
    snapshots: bool = True
    """Snapshot the checkout after each turn; off where the checkout can always be re-derived."""
    changes: bool = True
    """Record the checkout's changes (files and diff) for the dashboard before each run's end event."""
    pauses: bool = True
    """A spend limit pauses the thread until its owner or an administrator continues it; otherwise
    the run stops at the limit with a notice and the next message starts a new one."""
