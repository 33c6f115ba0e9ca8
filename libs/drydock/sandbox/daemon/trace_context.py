"""The trace an exec request came in, handed to its command.

A traced worker's request carries W3C ``traceparent`` (its HTTP client span). The command gets it
as ``TRACEPARENT`` (the environment carrier OpenTelemetry names for processes) and as an extra
header on git's HTTP requests (``GIT_CONFIG_*``, added to whatever the environment configures
already), so a clone or push through the credential proxy continues the run's trace. Only a
well-formed value is passed on: it becomes part of git's configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TRACEPARENT = re.compile(r"\A[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")


def with_trace_context(env: dict[str, str], headers: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the request's trace context added, if it carries one (``headers`` in lower case)."""
    traceparent = headers.get("traceparent", "")
    if not _TRACEPARENT.match(traceparent):
        return env
    env["TRACEPARENT"] = traceparent
    count = env.get("GIT_CONFIG_COUNT", "0") or "0"
    if count.isdigit():
        env[f"GIT_CONFIG_KEY_{count}"] = "http.extraHeader"
        env[f"GIT_CONFIG_VALUE_{count}"] = f"traceparent: {traceparent}"
        env["GIT_CONFIG_COUNT"] = str(int(count) + 1)
    return env
