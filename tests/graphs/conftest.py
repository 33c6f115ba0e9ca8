"""Fixtures for the graph tests: real local sandboxes, the real checkpointer and tool contexts,
shared with the sandbox, middleware and tool tests."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph_checkpoint_plainredis import AsyncRedisSaver
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.graphs.inputs import AgentInputs
from drydock.infra.redis import Keys
from drydock.review.checkouts import AnalysisCheckout, ReviewCheckout
from drydock.review.target import ReviewTarget
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.failures import SandboxFailures
from drydock.sandbox.providers.local import LocalProvider
from drydock.threads import Inbox
from drydock.threads.checkout import Checkout
from drydock.threads.scope import ThreadScope
from drydock.tools import build_tools
from drydock.worker.roles.analyzer import TOOLS as ANALYZER_TOOLS
from drydock.worker.roles.coder import TOOLS as CODER_TOOLS
from drydock.worker.roles.reviewer import TOOLS as REVIEWER_TOOLS
from tests.fakes.openai_server import ScriptedModelServer
from tests.middleware.conftest import chat_model, checkpointer
from tests.sandbox.conftest import bwrap, local_provider, records, sandbox_root, sandbox_settings
from tests.tools.conftest import MakeContext, make_context, tool_http

REPOSITORY = "acme/widgets"

__all__ = [
    "bwrap",
    "checkpointer",
    "local_provider",
    "make_context",
    "parts",
    "records",
    "sandbox_root",
    "sandbox_settings",
    "tool_http",
]


class Parts:
    """What the worker gives a factory, for one thread, on a real local sandbox."""

    def __init__(
        self,
        sandbox: SandboxBackend,
        bus: Bus,
        redis: Redis,
        keys: Keys,
        checkpointer: AsyncRedisSaver,
        thread_id: str,
        make_context: MakeContext,
    ) -> None:
        self.sandbox = sandbox
        self.bus = bus
        self.failures = SandboxFailures(redis, keys)
        self.checkpointer = checkpointer
        self.thread_id = thread_id
        self.make_context = make_context
        self.repository = f"{sandbox.handle.workspace}/widgets"

    def inputs(self, role: Role, server: ScriptedModelServer, **changes: Any) -> AgentInputs:
        names = {Role.CODER: CODER_TOOLS, Role.REVIEWER: REVIEWER_TOOLS, Role.ANALYZER: ANALYZER_TOOLS}[role]
        checkout = {
            Role.CODER: Checkout(REPOSITORY, self.repository),
            Role.REVIEWER: ReviewCheckout(REPOSITORY, self.repository, target=_target()),
            Role.ANALYZER: AnalysisCheckout(REPOSITORY, self.repository),
        }[role]
        fields: dict[str, Any] = {
            "scope": ThreadScope(self.thread_id, "run-1", role, REPOSITORY, ReplyAddress(channel=Channel.SCHEDULER)),
            "model": chat_model(server),
            "fallback": None,
            "backend": self.sandbox,
            "tools": build_tools(names, self.make_context()),
            "checkpointer": self.checkpointer,
            "inbox": Inbox(self.bus),
            "sandbox_failures": self.failures,
            "status": None,
            "notifier": None,
            "checkout": checkout,
        }
        return AgentInputs(**(fields | changes))


def _target() -> ReviewTarget:
    return ReviewTarget(repository=REPOSITORY, number=5, head_sha="0" * 40, head_ref="feature", base_ref="main")


@pytest.fixture
async def parts(
    local_provider: LocalProvider,
    bus: Bus,
    redis: Redis,
    keys: Keys,
    checkpointer: AsyncRedisSaver,
    thread_id: str,
    make_context: MakeContext,
) -> AsyncIterator[Parts]:
    sandbox = SandboxBackend(await local_provider.create(thread_id))
    yield Parts(sandbox, bus, redis, keys, checkpointer, thread_id, make_context)
    await sandbox.aclose()
