"""Everything the dashboard's endpoints share, wired once from a service's runtime."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
import structlog
from fastapi.routing import APIRoute

from drydock.accounts import AccountsStore, LinkCodes
from drydock.autofix.enablement import Enablements
from drydock.config import Settings
from drydock.credentials.cipher import CipherError, SecretCipher
from drydock.credentials.user_tokens import UserTokens
from drydock.github import GithubClient
from drydock.infra.server_keys import ServerKeys
from drydock.models import ModelCatalog
from drydock.review.analysis import AnalysisProgress, request_analysis
from drydock.review.guidelines import GuidelinesStore
from drydock.runtime import Runtime
from drydock.sandbox.records import SandboxStore
from drydock.threads.approvals import Approvals
from drydock.threads.index import ThreadIndex
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import PullRequestStore
from drydock.threads.states import ThreadStates
from drydock.threads.stops import StopRequests
from services.dashboard.auth.access import RepositoryAccess
from services.dashboard.auth.github import GithubSignIn
from services.dashboard.auth.guard import Guard
from services.dashboard.auth.oidc import OidcSignIn
from services.dashboard.auth.sessions import LoginAttempts, SessionStore
from services.dashboard.repositories.installations import Installations
from services.dashboard.review_styles.store import BootstrapState, Guidelines, RequestBootstrap
from services.dashboard.routing import ErrorPage, api_route, page_route

log = structlog.get_logger(__name__)


@dataclass
class Dashboard:
    runtime: Runtime
    http: httpx.AsyncClient
    accounts: AccountsStore
    link_codes: LinkCodes
    metadata: ThreadMetadataStore
    index: ThreadIndex
    states: ThreadStates
    stops: StopRequests
    approvals: Approvals
    records: PullRequestStore
    enablements: Enablements
    sandboxes: SandboxStore
    sessions: SessionStore
    logins: LoginAttempts
    access: RepositoryAccess
    guard: Guard
    catalog: ModelCatalog
    installations: Installations
    guidelines: Guidelines
    request_bootstrap: RequestBootstrap
    bootstrap_state: BootstrapState
    github: GithubSignIn | None
    github_api: GithubClient
    """The one GitHub client: as the App where it is configured, else with people's tokens only."""
    oidc: OidcSignIn | None
    user_tokens: UserTokens | None
    dev_login: bool
    gate: asyncio.Semaphore
    """Requests in progress at once in this process (``max_in_flight``)."""

    @property
    def api_route(self) -> type[APIRoute]:
        return api_route(self.gate)

    def page_route(self, error_page: ErrorPage) -> type[APIRoute]:
        return page_route(error_page, self.gate)

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @classmethod
    def from_runtime(cls, runtime: Runtime) -> Dashboard:
        settings = runtime.settings
        redis, keys, host = runtime.redis, runtime.keys, settings.github.host
        http = httpx.AsyncClient(timeout=settings.github.request_timeout, follow_redirects=False, trust_env=False)
        accounts = AccountsStore(redis, keys, host=host)
        github_api = GithubClient(settings.github, require_app=False)
        github = GithubSignIn(settings, http, github_api) if settings.dashboard.github_client_id else None
        oidc = OidcSignIn(settings, http) if settings.dashboard.oidc_issuer else None
        user_tokens = _user_tokens(runtime)
        server_keys = ServerKeys.from_settings(settings.crypto)
        sessions = SessionStore(redis, keys, server_keys, ttl=settings.dashboard.session_ttl)
        access = RepositoryAccess(
            redis,
            keys,
            accounts,
            ttl=settings.dashboard.access_ttl,
            session_ttl=settings.dashboard.session_ttl,
            github=github,
            tokens=user_tokens,
        )
        guidelines = GuidelinesStore(redis, keys, host=host)
        progress = AnalysisProgress(redis, keys, host=host)

        async def request_bootstrap(repository: str, user_id: str) -> str:
            return await request_analysis(
                runtime.bus, redis, keys, host=host, repository=repository, mode="bootstrap", requested_by=user_id
            )

        async def bootstrap_state(repository: str) -> str | None:
            state = await progress.bootstrap_state(repository)
            return None if state is None else state.value

        dev_login = bool(settings.dashboard.dev_login)
        return cls(
            runtime=runtime,
            http=http,
            accounts=accounts,
            link_codes=LinkCodes(redis, keys, accounts),
            metadata=ThreadMetadataStore(redis, keys),
            index=ThreadIndex(redis, keys),
            states=ThreadStates(redis, keys),
            stops=StopRequests(redis, keys),
            approvals=Approvals(redis, keys, server_keys),
            records=PullRequestStore(redis, keys),
            enablements=Enablements(redis, keys, host=host),
            sandboxes=SandboxStore(redis, keys, server_keys),
            sessions=sessions,
            logins=LoginAttempts(redis, keys),
            access=access,
            guard=Guard(settings.dashboard, sessions, access),
            catalog=ModelCatalog.with_extra(settings.models.extra_models),
            installations=Installations(github_api, redis, keys),
            guidelines=guidelines,
            request_bootstrap=request_bootstrap,
            bootstrap_state=bootstrap_state,
            github=github,
            github_api=github_api,
            oidc=oidc,
            user_tokens=user_tokens,
            dev_login=dev_login,
            gate=asyncio.Semaphore(settings.dashboard.max_in_flight),
        )

    async def aclose(self) -> None:
        await self.github_api.aclose()
        await self.http.aclose()


def _user_tokens(runtime: Runtime) -> UserTokens | None:
    """Where sign-in stores people's GitHub tokens (encrypted); ``None`` without encryption keys."""
    if not runtime.settings.crypto.keys:
        return None
    try:
        return UserTokens(runtime.redis, runtime.keys, SecretCipher(runtime.settings.crypto.keys))
    except CipherError as error:
        log.error("people's GitHub tokens are not stored: the encryption keys are unusable", reason=str(error))
        return None
