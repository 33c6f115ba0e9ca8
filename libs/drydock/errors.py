"""Naming an error in a message."""

from __future__ import annotations


def describe(error: BaseException) -> str:
    """The error's message, or its type's name when it has none (httpx's timeouts, asyncio's
    ``TimeoutError``), so that a log line never ends in an empty reason."""
    return str(error) or type(error).__name__
