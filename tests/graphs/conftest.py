"""Fixtures for the graph tests: real local sandboxes, the real checkpointer and tool contexts,
shared with the sandbox, middleware and tool tests."""

from tests.middleware.conftest import checkpointer
from tests.sandbox.conftest import bwrap, local_provider, records, sandbox_root, sandbox_settings
from tests.tools.conftest import make_context, tool_http

__all__ = [
    "bwrap",
    "checkpointer",
    "local_provider",
    "make_context",
    "records",
    "sandbox_root",
    "sandbox_settings",
    "tool_http",
]
