"""The sandbox errors, one type per thing that can go wrong."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """Base of every sandbox error."""


class SandboxNotFound(SandboxError, LookupError):
    """No sandbox with this id exists (never created, deleted, or its record is gone)."""

    def __init__(self, sandbox_id: str, detail: str = "") -> None:
        super().__init__(f"sandbox {sandbox_id} not found" + (f": {detail}" if detail else ""))
        self.sandbox_id = sandbox_id


class SandboxCreationFailed(SandboxError):
    """The provider could not create a sandbox or it never became ready."""


class SandboxUnavailable(SandboxError):
    """The sandbox's daemon cannot be reached or answered with an unexpected error."""


class SandboxBusy(SandboxError):
    """The daemon refused a command because its exec slots and queue are full."""


class UnknownProvider(SandboxError, ValueError):
    """The configured provider name is not in the provider factory map."""
