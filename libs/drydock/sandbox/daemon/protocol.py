"""The daemon's wire format, shared with the backend (standard library only).

Every request carries ``Authorization: Bearer <token>``; a missing or wrong token is answered
401. Bodies are JSON; errors are ``{"error": "<message>"}`` with a 4xx status.

``POST /exec``  ``{"command", "cwd"?, "env"?, "timeout"?, "output_cap"?}`` →
``{"exit_code", "output", "truncated", "timed_out", "duration_ms"}``. ``exit_code`` follows the
shell convention (128 + n when killed by signal n; 124 after a timeout). Concurrency is bounded:
at most ``--max-concurrent-execs`` commands run at once; further ones **queue** (the wait does
not count against their timeout) up to ``--max-queued-execs``; beyond that the daemon answers
429 with ``Retry-After: 1`` and the backend retries a few times before raising ``SandboxBusy``.
Queueing is the normal case because an agent issues parallel tool calls; 429 only protects the
daemon from a runaway client. ``cwd`` is taken relative to the workspace and is not confined to
it (the command itself could ``cd`` anywhere); ``env`` is added to the daemon's own environment.

``POST /files/upload``  ``{"files": [{"path", "content_b64"}]}`` → ``{"results": [{"path", "error"}]}``

``POST /files/download``  ``{"paths": [...], "max_file_bytes"?}`` →
``{"results": [{"path", "content_b64", "error"}]}``. A file larger than ``max_file_bytes`` (at
most the daemon's own ``--max-file-bytes``, which applies without it) is refused, never cut: its
``error`` says it is too large.

``GET /health`` → ``{"status": "ok", "workspace", "running_execs", "uptime_s"}``

Per-file ``error`` is ``null`` or one of :data:`FILE_ERRORS` (deepagents' literals), or a
message for conditions those do not name (a file over the size limit, one that is not a regular
file, as a FIFO: refused without waiting for its other end). Paths are taken relative
to the workspace; a path that resolves (through ``..`` and symlinks) outside the workspace and
the daemon's other ``--root`` directories is ``invalid_path``, as in deepagents' own backends.
"""

from __future__ import annotations

HEALTH = "/health"
EXEC = "/exec"
UPLOAD = "/files/upload"
DOWNLOAD = "/files/download"

FILE_NOT_FOUND = "file_not_found"
PERMISSION_DENIED = "permission_denied"
IS_DIRECTORY = "is_directory"
INVALID_PATH = "invalid_path"
FILE_ERRORS = (FILE_NOT_FOUND, PERMISSION_DENIED, IS_DIRECTORY, INVALID_PATH)

TIMEOUT_EXIT_CODE = 124
"""The exit code reported for a command killed at its timeout (as coreutils ``timeout`` does)."""

DEFAULT_PORT = 8484
