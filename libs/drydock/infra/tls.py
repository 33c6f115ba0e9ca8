"""The process's one TLS verification context."""

from __future__ import annotations

import functools
import ssl


@functools.cache
def client_context() -> ssl.SSLContext:
    """One verification context per process, from the system's trust store (so a GitHub Enterprise
    server's private CA is trusted once installed there): building one costs tens of milliseconds
    and hundreds of KiB, and httpx builds one for every client it is not given one."""
    return ssl.create_default_context()
