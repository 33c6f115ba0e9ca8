"""Routes a test built itself, mounted as a router factory (:data:`drydock.http.RouterFactory`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import APIRouter

from drydock.http import RouterFactory
from drydock.runtime import Runtime


def built(router: APIRouter) -> RouterFactory:
    """A factory of routes built beforehand; the test closes what they hold."""

    @contextlib.asynccontextmanager
    async def opened(_: Runtime) -> AsyncIterator[APIRouter]:
        yield router

    return opened
