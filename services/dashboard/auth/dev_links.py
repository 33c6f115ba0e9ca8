"""One-time development sign-in links: ``pdm run demo --dashboard`` prints one that signs its
reader in and opens the thread it made. Only the SHA-256 of a link's token is stored; the link
works once, within :data:`LINK_TTL`, and only while the development login is on."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from urllib.parse import quote

from pydantic import BaseModel
from redis.asyncio import Redis

from drydock.infra.redis import Keys

LINK_TTL = timedelta(minutes=30)


class DevLink(BaseModel):
    login: str
    admin: bool = False


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_dev_link(redis: Redis, keys: Keys, *, login: str, admin: bool, target: str) -> str:
    """A path on the dashboard (``/auth/dev/link/…``) that signs in as ``login`` and redirects to ``target``."""
    token = secrets.token_urlsafe(32)
    link = DevLink(login=login, admin=admin)
    await redis.set(keys.dev_link(_digest(token)), link.model_dump_json(), px=int(LINK_TTL.total_seconds() * 1000))
    return f"/auth/dev/link/{token}?next={quote(target, safe='/')}"


async def redeem_dev_link(redis: Redis, keys: Keys, token: str) -> DevLink | None:
    """The link's sign-in, once; ``None`` when it is unknown, used or expired."""
    raw = await redis.getdel(keys.dev_link(_digest(token)))
    return None if raw is None else DevLink.model_validate_json(raw)
