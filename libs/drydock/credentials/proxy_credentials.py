"""``ProxyCredentials``: the :class:`~drydock.sandbox.credentials.SandboxCredentials` that
routes a sandbox's code host access through the credential proxy.

``issue`` mints a token for the thread's repository, stores it encrypted, creates a grant and
returns only the grant and placeholders; ``refresh`` checks the grant and, unless it was
extended moments ago, extends it and mints a fresh token; ``revoke`` withdraws both. The proxy
asks :meth:`ProxyCredentials.upstream_token` for the token to inject, which also renews a token
about to expire during a long run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import structlog
from redis.asyncio import Redis

from drydock.config import Settings
from drydock.credentials.cipher import SecretCipher
from drydock.credentials.grants import Grant, GrantStore, digest
from drydock.credentials.minting import TokenMinter, minter_from_settings
from drydock.credentials.sandbox_access import sandbox_access
from drydock.credentials.upstream_token import UpstreamToken
from drydock.credentials.vault import TokenVault
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox.credentials import GrantError, SandboxGrant
from drydock.sandbox.handle import SandboxHandle

log = structlog.get_logger(__name__)


class ProxyCredentials:
    """Grants backed by the credential proxy; the truth lives in Redis, shared by every replica."""

    def __init__(
        self,
        settings: Settings,
        *,
        grants: GrantStore,
        vault: TokenVault,
        minter: TokenMinter,
    ) -> None:
        self._settings = settings
        self.grants = grants
        self.vault = vault
        self._minter = minter

    @classmethod
    def create(
        cls, settings: Settings, redis: Redis, keys: Keys, *, minter: TokenMinter | None = None
    ) -> ProxyCredentials:
        """Wire the stores from settings; raises :class:`~drydock.credentials.cipher.CipherError`
        when ``DRYDOCK_CRYPTO_KEYS`` is missing or malformed."""
        cipher = SecretCipher(settings.crypto.keys)
        return cls(
            settings,
            grants=GrantStore(
                redis, keys, ServerKeys.from_settings(settings.crypto), retention=settings.proxy.grant_retention
            ),
            vault=TokenVault(redis, keys, cipher),
            minter=minter or minter_from_settings(settings.github),
        )

    @classmethod
    def from_runtime(cls, runtime: Runtime) -> ProxyCredentials:
        """:meth:`create` from a service's runtime (settings, Redis, key names)."""
        return cls.create(runtime.settings, runtime.redis, runtime.keys)

    async def aclose(self) -> None:
        await self._minter.aclose()

    async def issue(self, handle: SandboxHandle, *, thread_id: str, role: Role, repository: str | None) -> SandboxGrant:
        """Grant ``handle``'s sandbox ``role`` access to ``repository``; earlier grants of the
        same sandbox are revoked (superseded)."""
        for old in await self.grants.revoke_sandbox(thread_id, handle.id, reason="superseded"):
            await self.vault.delete(old)
        try:
            issued = await self.grants.issue(
                role=role,
                sandbox_id=handle.id,
                thread_id=thread_id,
                repository=repository,
                ttl=self._settings.proxy.grant_ttl,
            )
        except ValueError as error:
            raise GrantError(str(error)) from None
        if repository is not None:
            try:
                await self.vault.put(issued.grant.digest, await self._mint(issued.grant))
            except GrantError:
                await self.grants.revoke(issued.token, reason="no upstream token")
                raise
        access = sandbox_access(self._settings.proxy, self._settings.github, issued.token)
        log.info(
            "grant issued",
            thread_id=thread_id,
            sandbox_id=handle.id,
            role=role.value,
            repository=repository,
            expires_at=issued.grant.expires_at.isoformat(),
        )
        return SandboxGrant(
            sandbox_id=handle.id,
            thread_id=thread_id,
            role=role,
            repository=repository,
            token=issued.token,
            environment=access.environment,
            git_config=access.git_config,
            api_base_url=access.api_base_url,
            expires_at=issued.grant.expires_at,
        )

    async def refresh(self, grant: SandboxGrant) -> None:
        """Check that a grant is live, and unless it was extended within ``grant_refresh_interval``,
        extend it and mint its upstream token anew (DESIGN §5: a fresh installation token each time
        a sandbox is created or refreshed); :class:`GrantError`
        (:class:`~drydock.credentials.grants.GrantRejected`) if it is unknown, revoked or expired.

        The check is never skipped: a grant another process superseded (it reconnected to the
        sandbox) or revoked must be replaced before the run uses the sandbox. Skipping the
        extension only leaves a grant at least ``grant_ttl - grant_refresh_interval`` to live,
        and the proxy renews an upstream token close to its expiry at its next use.
        """
        if grant.token is None:
            raise GrantError(f"sandbox {grant.sandbox_id} holds no grant to refresh")
        proxy = self._settings.proxy
        live = await self.grants.resolve(grant.token)
        if live.expires_at - datetime.now(UTC) > proxy.grant_ttl - proxy.grant_refresh_interval:
            return
        await self.grants.extend(grant.token, proxy.grant_ttl)
        if live.repository is None:
            return
        await self.vault.put(live.digest, await self._mint(live))
        # A revoke that ran while the token was minted deleted the old one; do not leave the new one behind.
        try:
            await self.grants.resolve(grant.token)
        except GrantError:
            await self.vault.delete(live.digest)
            raise

    async def revoke(self, grant: SandboxGrant) -> None:
        """Withdraw the grant and delete its upstream token; idempotent."""
        if grant.token is None:
            return
        await self.grants.revoke(grant.token)
        await self.vault.delete(digest(grant.token))
        log.info("grant revoked", thread_id=grant.thread_id, sandbox_id=grant.sandbox_id)

    async def resolve(self, token: str) -> tuple[Grant, str | None]:
        """The live grant for ``token`` (raising as :meth:`GrantStore.resolve` does) and its
        upstream token as stored, still encrypted (:meth:`upstream_token` opens it), in one round
        trip: what the proxy reads for every request it forwards."""
        return await self.grants.resolve_beside(token, self.vault.key)

    async def upstream_token(
        self, grant: Grant, sealed: str | None, *, renew_margin: timedelta | None = None
    ) -> UpstreamToken:
        """The token to inject for a live ``grant``, given its record as :meth:`resolve` read it;
        minted and stored anew when missing or about to expire."""
        margin = self._settings.proxy.token_renew_margin if renew_margin is None else renew_margin
        stored = self.vault.opened(sealed)
        if stored is not None and not stored.expires_within(margin):
            return stored
        fresh = await self._mint(grant)
        await self.vault.put(grant.digest, fresh)
        return fresh

    async def _mint(self, grant: Grant) -> UpstreamToken:
        if grant.repository is None:
            raise GrantError(f"grant for sandbox {grant.sandbox_id} has no repository to mint a token for")
        return await self._minter.mint(grant.repository, read_only=grant.read_only)
