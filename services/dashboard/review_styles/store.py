"""What the review-style endpoints need of the guideline storage (``drydock.review``): a small
interface, so the endpoints do not depend on more of the reviewer's library than they use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from drydock.review.guidelines import Guideline, GuidelinesVersion


class Guidelines(Protocol):
    async def history(self, repository: str) -> list[GuidelinesVersion]: ...

    async def get(self, repository: str, version: int) -> GuidelinesVersion | None: ...

    async def edit(
        self, repository: str, rules: Sequence[Guideline], *, by: str, based_on: int | None = None
    ) -> int: ...

    async def approve(self, repository: str, version: int, *, by: str, note: str = "") -> GuidelinesVersion: ...

    async def reject(self, repository: str, version: int, *, by: str, note: str = "") -> GuidelinesVersion: ...


RequestBootstrap = Callable[[str, str], Awaitable[str]]
"""Ask the analyzer to learn ``repository``'s guidelines for ``user_id``; returns its thread id."""

BootstrapState = Callable[[str], Awaitable[str | None]]
"""The analyzer's bootstrap progress on ``repository`` (requested, insufficient, done) or ``None``."""
