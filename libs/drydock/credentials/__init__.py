"""Credentials for sandboxes: grants, the encrypted token vault, GitHub App token minting and
:class:`ProxyCredentials`, the credential-proxy-backed ``SandboxCredentials``.

The path of a credential: :mod:`.github_app` mints an installation token → :mod:`.vault`
stores it encrypted (:mod:`.cipher`) under the grant from :mod:`.grants` → the sandbox receives
only the grant and placeholders (:mod:`.sandbox_access`) → the ``credential-proxy`` service
resolves the grant and injects the token upstream.
"""

from drydock.credentials.cipher import CipherError, SecretCipher
from drydock.credentials.github_app import AppNotConfigured, GithubAppTokens, TokenMintError
from drydock.credentials.grants import (
    Grant,
    GrantExpired,
    GrantRejected,
    GrantRevoked,
    GrantStore,
    GrantUnknown,
    IssuedGrant,
    digest,
)
from drydock.credentials.minting import NoApp, TokenMinter, minter_from_settings
from drydock.credentials.proxy_credentials import ProxyCredentials
from drydock.credentials.sandbox_access import PLACEHOLDER, SandboxAccess, sandbox_access
from drydock.credentials.upstream_token import UpstreamToken
from drydock.credentials.vault import TokenVault

__all__ = [
    "PLACEHOLDER",
    "AppNotConfigured",
    "CipherError",
    "GithubAppTokens",
    "Grant",
    "GrantExpired",
    "GrantRejected",
    "GrantRevoked",
    "GrantStore",
    "GrantUnknown",
    "IssuedGrant",
    "NoApp",
    "ProxyCredentials",
    "SandboxAccess",
    "SecretCipher",
    "TokenMintError",
    "TokenMinter",
    "TokenVault",
    "UpstreamToken",
    "digest",
    "minter_from_settings",
    "sandbox_access",
]
