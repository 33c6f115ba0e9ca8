"""One-time codes that prove a person controls the Slack or Linear account they link.

The dashboard issues a code to a signed-in Drydock user for one provider (a pending link); the
person sends ``link CODE`` to the bot from the account to link, and the ingress redeems the code
for the *sender* of that signed event. Only then does the account link to the user, and only
linked accounts are trusted. Why this direction: Linear has no direct message a bot could send a
code to, and a code sent from the account proves control of it without any id typed by hand.

A code is random (about 59 bits), lives :data:`CODE_TTL`, is stored only as its SHA-256, works
once, and a newer code of the same user and provider supersedes it. An external account may send
at most :data:`MAX_ATTEMPTS` codes per :data:`ATTEMPT_WINDOW` (valid or not), so codes cannot be
guessed: one account would need some 10^12 years for an even chance at one live code.
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from redis.asyncio import Redis

from drydock.accounts.records import Provider
from drydock.accounts.store import AccountsStore, AccountTaken
from drydock.infra.redis import Keys

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
"""No 0/O, 1/I/L or U: nothing to misread when typing it."""
CODE_LENGTH = 12
CODE_TTL = timedelta(minutes=15)
MAX_ATTEMPTS = 5
ATTEMPT_WINDOW = timedelta(hours=1)
LINKABLE = (Provider.SLACK, Provider.LINEAR)

_CODE = re.compile(rf"^[{CODE_ALPHABET}]{{{CODE_LENGTH}}}$")

# KEYS: the sender's attempts, the code. ARGV: max attempts, window (ms), the sender's
# "provider:external id". Returns {'limited'}, {'invalid'}, {'again'} (this sender redeemed
# it already) or {'ok', user id}. A redeemed code stays until it expires, marked with its sender.
_REDEEM = """
local attempts = redis.call('INCR', KEYS[1])
if attempts == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if attempts > tonumber(ARGV[1]) then return {'limited'} end
local user = redis.call('GET', KEYS[2])
if not user then return {'invalid'} end
if string.sub(user, 1, 5) == 'used:' then
  if user == 'used:' .. ARGV[3] then return {'again'} end
  return {'invalid'}
end
redis.call('SET', KEYS[2], 'used:' .. ARGV[3], 'KEEPTTL')
return {'ok', user}
"""

# KEYS: the user's pending code. ARGV: the redeemed code's digest. 1 when it was the current one.
_TAKE_PENDING = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""


class Outcome(enum.Enum):
    LINKED = "linked"
    ALREADY_USED = "already_used"
    """This account sent this code before (a second delivery of one request)."""
    INVALID = "invalid"
    LIMITED = "limited"
    TAKEN = "taken"


@dataclass(frozen=True)
class Redemption:
    outcome: Outcome
    user_id: str | None = None


@dataclass(frozen=True)
class IssuedCode:
    provider: Provider
    code: str
    """Shown once, as ``XXXX-XXXX-XXXX``."""
    expires_at: datetime


@dataclass(frozen=True)
class PendingLink:
    provider: Provider
    expires_at: datetime


def normalize(code: str) -> str | None:
    """The code without separators, upper-cased; ``None`` when it cannot be a code."""
    bare = re.sub(r"[\s-]", "", code).upper()
    return bare if _CODE.match(bare) else None


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _linkable(provider: Provider) -> Provider:
    if provider not in LINKABLE:
        raise ValueError(f"{provider.value} accounts are not linked with a code")
    return provider


class LinkCodes:
    """Issues link codes (the dashboard) and redeems them (the ingress)."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        accounts: AccountsStore,
        *,
        ttl: timedelta = CODE_TTL,
        max_attempts: int = MAX_ATTEMPTS,
        attempt_window: timedelta = ATTEMPT_WINDOW,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._accounts = accounts
        self._ttl = ttl
        self._max_attempts = max_attempts
        self._attempt_window = attempt_window
        self._redeem = redis.register_script(_REDEEM)
        self._take_pending = redis.register_script(_TAKE_PENDING)

    async def issue(self, user_id: str, provider: Provider) -> IssuedCode:
        """A new code for ``user_id`` to link a ``provider`` account; an older one stops working."""
        if not user_id:
            raise ValueError("a user id is required")
        _linkable(provider)
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        digest = _digest(code)
        ttl_ms = int(self._ttl.total_seconds() * 1000)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._keys.link_code(provider, digest), user_id, px=ttl_ms)
            pipe.set(self._keys.link_code_of(user_id, provider), digest, px=ttl_ms)
            await pipe.execute()
        shown = "-".join(code[start : start + 4] for start in range(0, CODE_LENGTH, 4))
        return IssuedCode(provider, shown, datetime.now(UTC) + self._ttl)

    async def pending(self, user_id: str) -> list[PendingLink]:
        """The providers ``user_id`` holds an unexpired, unredeemed code for."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for provider in LINKABLE:
                pipe.pttl(self._keys.link_code_of(user_id, provider))
            ttls = cast(list[int], await pipe.execute())
        now = datetime.now(UTC)
        return [
            PendingLink(provider, now + timedelta(milliseconds=ttl))
            for provider, ttl in zip(LINKABLE, ttls, strict=True)
            if ttl > 0
        ]

    async def cancel(self, user_id: str, provider: Provider) -> bool:
        """Withdraw the user's code for ``provider``; False if there was none."""
        key = self._keys.link_code_of(user_id, _linkable(provider))
        digest = cast(str | None, await self._redis.getdel(key))
        if digest is None:
            return False
        await self._redis.delete(self._keys.link_code(provider, digest))
        return True

    async def redeem(self, provider: Provider, external_id: str, code: str) -> Redemption:
        """Link the account that sent ``code`` (``external_id``, the signed event's sender) to the
        user the code was issued to. Every call counts as an attempt of that account."""
        _linkable(provider)
        member = f"{provider}:{external_id}"
        bare = normalize(code)
        # A malformed code still counts, against a key that cannot exist.
        digest = _digest(bare) if bare is not None else "malformed"
        reply = await self._redeem(
            keys=[self._keys.link_attempts(provider, external_id), self._keys.link_code(provider, digest)],
            args=[self._max_attempts, int(self._attempt_window.total_seconds() * 1000), member],
        )
        status = reply[0]
        if status == "limited":
            return Redemption(Outcome.LIMITED)
        if status == "again":
            return Redemption(Outcome.ALREADY_USED)
        if status != "ok":
            return Redemption(Outcome.INVALID)
        user_id = str(reply[1])
        if not await self._take_pending(keys=[self._keys.link_code_of(user_id, provider)], args=[digest]):
            return Redemption(Outcome.INVALID)
        try:
            await self._accounts.link_if_free(provider, external_id, user_id)
        except AccountTaken:
            return Redemption(Outcome.TAKEN)
        return Redemption(Outcome.LINKED, user_id)
