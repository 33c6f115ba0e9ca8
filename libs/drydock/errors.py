"""Naming an error in a message, and the errors of calls to an outside API (a channel's, GitHub's),
which the layers above all catch."""

from __future__ import annotations


def describe(error: BaseException) -> str:
    """The error's message, or its type's name when it has none (httpx's timeouts, asyncio's
    ``TimeoutError``), so that a log line never ends in an empty reason."""
    return str(error) or type(error).__name__


def without_password(urls: str) -> str:
    """``urls`` (comma-separated) with each password replaced by ``***``, for messages and logs."""
    return ",".join(_redacted(url) for url in urls.split(","))


def _redacted(url: str) -> str:
    scheme, separator, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not separator or not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


class ChannelError(Exception):
    """Base of the channel errors; ``reason`` is safe to log (it never quotes secrets)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ChannelNotConfigured(ChannelError):
    """The channel lacks the secret or credential this operation needs."""


class OutboundFailed(ChannelError):
    """A call to the channel's API failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
