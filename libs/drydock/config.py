"""One typed settings object for every Drydock process.

Variables use the prefix ``DRYDOCK_`` and one underscore between section and field:
``DRYDOCK_NATS_URL`` sets ``settings.nats.url``. Settings are read once at start-up
(:func:`load_settings`) and passed down; nothing else reads the environment.
"""

from __future__ import annotations

import binascii
import difflib
import json
import os
import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, get_origin

from cryptography.fernet import Fernet
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

ENV_PREFIX = "DRYDOCK_"


def _seconds_if_numeric(value: object) -> object:
    if isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        return float(value)
    return value


Duration = Annotated[timedelta, BeforeValidator(_seconds_if_numeric)]
"""A duration: seconds (``45``, ``0.5``), ``HH:MM:SS`` or ISO 8601 (``PT45S``)."""


class ConfigError(Exception):
    """Invalid configuration. The message names each offending variable and its problem."""


class Environment(StrEnum):
    DEVELOPMENT = "development"
    PRODUCTION = "production"


class LogFormat(StrEnum):
    JSON = "json"
    CONSOLE = "console"


class NatsSettings(BaseModel):
    url: str | None = Field(
        default=None,
        description="NATS server URL(s), comma-separated. Unset: `drydock dev` starts an embedded server.",
    )
    connect_timeout: float = Field(default=2.0, gt=0)
    inbox_max_age: Duration = Field(default=timedelta(days=14))
    events_max_age: Duration = Field(default=timedelta(days=7))
    github_max_age: Duration = Field(default=timedelta(days=3))
    duplicate_window: Duration = Field(
        default=timedelta(hours=24),
        description="How long JetStream remembers a Nats-Msg-Id to drop redeliveries.",
    )
    user: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="This service's NATS user; its replies come to `_INBOX_<user>.>`, as the "
        "permissions `drydock nats-permissions` prints allow.",
    )
    password: SecretStr | None = None
    provision: bool = Field(
        default=True,
        description="Create or update the streams and consumers at start-up. Off for a service "
        "whose NATS user may not manage streams (`drydock provision` does it first).",
    )
    replicas: int = Field(default=1, ge=1, le=5)
    run_ack_wait: Duration = Field(default=timedelta(seconds=60))
    run_max_deliver: int = Field(default=10, ge=1)

    @field_validator("url")
    @classmethod
    def _nats_scheme(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for server in value.split(","):
            if not server.strip().startswith(("nats://", "tls://", "ws://", "wss://")):
                raise ValueError(f"{server.strip()!r} is not a nats://, tls://, ws:// or wss:// URL")
        return value


class RedisSettings(BaseModel):
    url: str | None = Field(
        default=None,
        description="Redis or Valkey URL. Unset: `drydock dev` starts an embedded Valkey.",
    )
    username: str | None = Field(default=None, description="ACL user; unset: the URL's or `default`.")
    password: SecretStr | None = None
    key_prefix: str = Field(default="drydock", min_length=1)
    max_connections: int = Field(
        default=200,
        ge=1,
        description="Connections per client and process; a caller beyond them waits for one to be free.",
    )
    pool_timeout: Duration = Field(
        default=timedelta(seconds=10),
        gt=timedelta(0),
        description="How long a caller waits for a free connection before the call fails.",
    )
    accept_ephemeral: bool = Field(
        default=False,
        description="In production, start even when Redis neither appends (AOF) nor saves (RDB): "
        "the operator accepts that a Redis restart loses every thread and setting.",
    )

    @field_validator("url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"{value!r} is not a redis://, rediss:// or unix:// URL")
        return value


class LeaseSettings(BaseModel):
    ttl: Duration = Field(default=timedelta(seconds=30), gt=timedelta(0))


DEFAULT_SANDBOX_ENVIRONMENT = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


_QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
"""A Kubernetes resource quantity as Drydock accepts it: ``500m``, ``2``, ``4Gi``."""

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class KubernetesSandboxSettings(BaseModel):
    """The ``kubernetes`` provider (``DRYDOCK_SANDBOX_KUBERNETES_*``): one pod per sandbox in
    ``namespace``, from ``image``, reached by pod IP on ``daemon_port``.

    Each field is also set by its own variable, ``DRYDOCK_SANDBOX_KUBERNETES_IMAGE`` for
    ``image``; mappings and lists take JSON (``DRYDOCK_SANDBOX_KUBERNETES_NODE_SELECTOR='{"pool": "sandboxes"}'``).
    """

    namespace: str = Field(default="drydock-sandboxes", pattern=_DNS_LABEL, description="Where sandbox pods run.")
    image: str = Field(
        default="drydock-sandbox:latest", min_length=1, description="The sandbox image (Dockerfile.sandbox)."
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    image_pull_secrets: list[str] = Field(default_factory=list, description="Secrets in the namespace used to pull.")
    kubeconfig: str | None = Field(
        default=None,
        description="A kubeconfig file; unset: the in-cluster service account when running in a pod, "
        "else the default kubeconfig ($KUBECONFIG or ~/.kube/config).",
    )
    context: str | None = Field(default=None, description="The kubeconfig context; unset: its current context.")
    service_account: str | None = Field(
        default=None,
        description="The pods' service account (its token is never mounted); unset: the namespace's default.",
    )
    daemon_port: int = Field(default=8484, ge=1, le=65535)
    cpu_request: str = Field(default="250m", pattern=_QUANTITY)
    cpu_limit: str = Field(default="2", pattern=_QUANTITY)
    memory_request: str = Field(default="512Mi", pattern=_QUANTITY)
    memory_limit: str = Field(default="4Gi", pattern=_QUANTITY)
    ephemeral_storage_request: str = Field(default="1Gi", pattern=_QUANTITY)
    ephemeral_storage_limit: str = Field(default="20Gi", pattern=_QUANTITY)
    workspace_volume: Literal["emptyDir", "pvc"] = Field(
        default="emptyDir",
        description="emptyDir (node-local, gone with the pod) or pvc (a generic ephemeral volume: a PVC "
        "created and deleted with the pod, from workspace_storage_class).",
    )
    workspace_size: str = Field(default="10Gi", pattern=_QUANTITY, description="Size limit or claim size.")
    workspace_storage_class: str | None = Field(default=None, description="For pvc; unset: the cluster default.")
    run_as_user: int = Field(default=1000, ge=1, description="Non-root uid (the sandbox image's user).")
    run_as_group: int = Field(default=1000, ge=1)
    active_deadline: Duration = Field(
        default=timedelta(hours=24),
        gt=timedelta(0),
        description="activeDeadlineSeconds: the pod is stopped after this however busy it is; the thread's "
        "next run gets a new sandbox restored from its snapshot.",
    )
    runtime_class: str | None = Field(default=None, description="runtimeClassName, e.g. gvisor; unset: the default.")
    node_selector: dict[str, str] = Field(default_factory=dict)
    environment: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_SANDBOX_ENVIRONMENT),
        description="The sandbox's environment besides HOME, TMPDIR and its id.",
    )
    start_timeout: Duration = Field(
        default=timedelta(minutes=2),
        gt=timedelta(0),
        description="Bound on scheduling, image pull and container start; the daemon then has ready_timeout.",
    )
    delete_timeout: Duration = Field(
        default=timedelta(seconds=30), gt=timedelta(0), description="How long delete waits for the pod to be gone."
    )
    termination_grace: int = Field(default=5, ge=0, description="terminationGracePeriodSeconds of sandbox pods.")
    warm_pool_size: int = Field(
        default=0, ge=0, description="Idle pods kept ready for new threads; 0 turns the warm pool off."
    )
    warm_pool_refill_interval: Duration = Field(
        default=timedelta(seconds=10), gt=timedelta(0), description="How often the pool is checked and refilled."
    )
    warm_pool_claim_timeout: Duration = Field(
        default=timedelta(minutes=1),
        gt=timedelta(0),
        description="A claim not completed within this (its claimer died) is abandoned and its pod deleted.",
    )

    @field_validator("image_pull_secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?", name):
                raise ValueError(f"{name!r} is not a Kubernetes object name")
        return value


class SandboxSettings(BaseModel):
    """Sandboxes (``DRYDOCK_SANDBOX_*``): the provider, limits of the daemon, the lifecycle's
    timing, the ``local`` provider's options (``local_*``) and the ``kubernetes`` provider's
    section (``kubernetes_*``)."""

    provider: str = Field(default="local", description="A name in the provider factory map (local, kubernetes).")
    idle_ttl: Duration = Field(default=timedelta(hours=2), description="An unused sandbox is deleted after this.")
    orphan_grace: Duration = Field(
        default=timedelta(minutes=5),
        gt=timedelta(0),
        description="A sandbox no thread points at is reaped only when older than this (creation in flight).",
    )
    creation_timeout: Duration = Field(
        default=timedelta(minutes=3),
        gt=timedelta(0),
        description="A creation sentinel older than this is stale even if its owner still looks alive.",
    )
    creator_heartbeat: Duration = Field(
        default=timedelta(seconds=5),
        gt=timedelta(0),
        description="A creator renews its liveness this often (x3 is its TTL); a sentinel whose creator "
        "stopped renewing is stale.",
    )
    ready_timeout: Duration = Field(default=timedelta(seconds=30), gt=timedelta(0))
    health_timeout: Duration = Field(default=timedelta(seconds=2), gt=timedelta(0))
    exec_timeout: Duration = Field(default=timedelta(minutes=2), gt=timedelta(0), description="Default per command.")
    max_exec_timeout: Duration = Field(default=timedelta(hours=1), gt=timedelta(0))
    output_cap: int = Field(default=1024 * 1024, ge=0, description="Bytes of combined output kept per command.")
    max_concurrent_execs: int = Field(
        default=8, ge=1, description="Commands running at once per sandbox; more wait in a bounded queue."
    )
    max_queued_execs: int = Field(default=32, ge=0, description="Beyond this many waiting, the daemon answers 429.")
    git_user_name: str = Field(default="Drydock", min_length=1, description="Author of the agent's commits.")
    git_user_email: str = Field(default="drydock@users.noreply.github.com", pattern=r"^[^@\s]+@[^@\s]+$")
    local_root: str | None = Field(
        default=None, description="Directory holding local sandboxes; unset: <tmp>/drydock-sandboxes."
    )
    local_bubblewrap: bool = Field(
        default=True, description="Isolate local sandboxes with bwrap (its own network namespace); off: refused."
    )
    local_allow_unisolated: bool = Field(
        default=False,
        description="Development only: run local sandboxes as plain host processes when bwrap is missing or "
        "local_bubblewrap is off; refused when DRYDOCK_ENVIRONMENT is production.",
    )
    local_environment: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_SANDBOX_ENVIRONMENT),
        description="The whole environment of a local sandbox besides HOME, TMPDIR and its id; "
        "nothing is copied from the host.",
    )
    kubernetes: KubernetesSandboxSettings = Field(default_factory=KubernetesSandboxSettings)

    @model_validator(mode="before")
    @classmethod
    def _gather_kubernetes_fields(cls, data: Any) -> Any:
        """``kubernetes_image`` (from ``DRYDOCK_SANDBOX_KUBERNETES_IMAGE``) → ``kubernetes.image``."""
        if not isinstance(data, dict):
            return data
        if "local_share_network" in data:
            raise ValueError(
                "local_share_network was removed: a local sandbox always has its own network namespace "
                "and reaches only the credential proxy"
            )
        flat = {key: data[key] for key in data if isinstance(key, str) and key.startswith(_KUBERNETES_PREFIX)}
        if not flat:
            return data
        rest = {key: value for key, value in data.items() if key not in flat}
        section = rest.get("kubernetes") or {}
        if isinstance(section, BaseModel):
            section = section.model_dump()
        elif isinstance(section, str):
            section = _json_value(f"{ENV_PREFIX}SANDBOX_KUBERNETES", section)
        nested = dict(section)
        for key, value in flat.items():
            name = key.removeprefix(_KUBERNETES_PREFIX)
            field = KubernetesSandboxSettings.model_fields.get(name)
            if field is not None and isinstance(value, str) and get_origin(field.annotation) in (dict, list):
                value = _json_value(f"{ENV_PREFIX}SANDBOX_{key.upper()}", value)
            nested[name] = value
        rest["kubernetes"] = nested
        return rest

    @model_validator(mode="after")
    def _timeouts_ordered(self) -> SandboxSettings:
        if self.exec_timeout > self.max_exec_timeout:
            raise ValueError("exec_timeout must not exceed max_exec_timeout")
        pod_ready = self.kubernetes.start_timeout + self.ready_timeout
        if self.provider == "kubernetes" and pod_ready > self.creation_timeout:
            raise ValueError(
                "kubernetes.start_timeout + ready_timeout must not exceed creation_timeout, or another worker "
                "takes a sandbox still starting for abandoned"
            )
        return self


_KUBERNETES_PREFIX = "kubernetes_"
FLATTENED_SECTIONS = frozenset({"kubernetes"})
"""Sections nested inside a section whose fields have variables of their own (``DRYDOCK_SANDBOX_KUBERNETES_IMAGE``)."""


def _json_value(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"{name} must be JSON: {error}") from None


class SnapshotSettings(BaseModel):
    """Workspace snapshots in the NATS object store (DESIGN.md section 4)."""

    bucket: str = Field(
        default="drydock-snapshots",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Object store bucket holding every thread's snapshots; provisioned at start-up.",
    )
    max_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="Largest snapshot archive stored; a bigger one is not stored (and logged).",
    )
    keep: int = Field(default=5, ge=1, description="Snapshots kept per thread; older ones are pruned.")
    command_timeout: Duration = Field(
        default=timedelta(minutes=5),
        gt=timedelta(0),
        description="Bound on each step in the sandbox and each object store transfer.",
    )


class GithubSettings(BaseModel):
    host: str = Field(default="github.com")
    api_url: str = Field(
        default="https://api.github.com", description="REST API root; GitHub Enterprise: https://HOST/api/v3."
    )
    app_id: int | None = None
    app_slug: str | None = Field(
        default=None, description="The App's slug; comments by '<slug>[bot]' are the agent's own and never trigger."
    )
    private_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    token_refresh_margin: Duration = Field(
        default=timedelta(minutes=5), description="Mint a new installation token this long before the old expires."
    )
    request_timeout: float = Field(default=10.0, gt=0)
    redeliver_attempts: int = Field(
        default=8,
        ge=0,
        le=20,
        description="Times a webhook delivery GitHub recorded as failed (no answer, 408, 429 or 5xx) is asked "
        "for again by the active autofix controller, the pauses doubling from redeliver_interval up to an hour; "
        "0 turns redelivery off.",
    )
    redeliver_interval: Duration = Field(
        default=timedelta(minutes=1), gt=timedelta(0), description="How often failed deliveries are looked for."
    )
    redeliver_max_age: Duration = Field(
        default=timedelta(hours=24),
        gt=timedelta(0),
        le=timedelta(days=3),
        description="Failed deliveries older than this are not asked for again (GitHub keeps three days).",
    )


class SlackSettings(BaseModel):
    bot_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    api_url: str = Field(default="https://slack.com/api/")
    bot_user_id: str | None = Field(
        default=None, description="The bot's user id; read from each event's authorizations when unset."
    )
    timestamp_tolerance: Duration = Field(default=timedelta(seconds=300), gt=timedelta(0))
    request_timeout: int = Field(default=10, gt=0)


class LinearSettings(BaseModel):
    api_key: SecretStr | None = Field(
        default=None, description="A personal API key, or an OAuth access token prefixed with 'Bearer '."
    )
    webhook_secret: SecretStr | None = None
    api_url: str = Field(default="https://api.linear.app/graphql")
    agent_user_id: str | None = Field(
        default=None, description="Linear user the agent acts as; its own comments never trigger."
    )
    timestamp_tolerance: Duration = Field(default=timedelta(seconds=60), gt=timedelta(0))
    request_timeout: float = Field(default=10.0, gt=0)


class IngressSettings(BaseModel):
    """The webhook ingress (``DRYDOCK_INGRESS_*``)."""

    max_body_bytes: int = Field(
        default=25 * 1024 * 1024,
        gt=0,
        description="Larger webhook bodies are refused with 413. The default admits GitHub's largest (25 MB).",
    )
    dedup_ttl: Duration = Field(
        default=timedelta(hours=48),
        ge=timedelta(hours=24),
        description="How long a delivery id is remembered; at least 24 h.",
    )
    claim_ttl: Duration = Field(
        default=timedelta(seconds=60),
        gt=timedelta(0),
        description="How long a delivery in progress blocks its redeliveries; a crashed claim expires after it.",
    )
    mention_handle: str = Field(
        default="@drydock", pattern=r"^@[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Used when the team sets none."
    )
    org_membership_ttl: Duration = Field(default=timedelta(minutes=10), gt=timedelta(0))
    max_in_flight: int = Field(
        default=32,
        ge=1,
        le=1000,
        description="Deliveries routed at once per process; more wait their turn (below Redis's connection pool).",
    )
    outbound_timeout: float = Field(
        default=8.0, gt=0, description="Bound on a pickup acknowledgement or reply sent after answering."
    )
    accept_timeout: Duration = Field(
        default=timedelta(seconds=8),
        gt=timedelta(0),
        description="Bound on making one delivery durable (Redis and JetStream); past it the answer is 503. "
        "Below GitHub's 10 s webhook timeout, so the sender hears why.",
    )


class ModelPriceSetting(BaseModel):
    """One model's list price in US dollars per million tokens (``DRYDOCK_MODELS_PRICES``)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)


class ModelSettings(BaseModel):
    """The model endpoint (``DRYDOCK_MODELS_*``): OpenAI or any OpenAI-compatible Chat Completions
    API. Model ids and efforts are checked against the catalog in :mod:`drydock.models` when the
    workers build their :class:`~drydock.models.Models` at start-up."""

    base_url: str | None = Field(
        default=None, description="An OpenAI-compatible API root (…/v1); unset: OpenAI's own API."
    )
    api_key: SecretStr | None = None
    default: str = Field(default="gpt-5.1", description="The installation's model when no team default is set.")
    default_effort: str | None = Field(
        default=None, description="Reasoning effort of the default model; unset: the model's own default."
    )
    fallback: str | None = Field(
        default=None, description="Tried when the run's model fails; ignored when it is the run's model."
    )
    fallback_effort: str | None = None
    extra_models: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Model ids the endpoint serves beyond the built-in catalog, as JSON: "
        '{"id": ["low", "high"]} with the reasoning efforts each takes ([] for none).',
    )
    timeout: float = Field(default=300.0, gt=0, description="Seconds one model request may take.")
    max_retries: int = Field(default=2, ge=0, description="Retries of a failed request (429, 5xx, timeouts).")
    prices: dict[str, ModelPriceSetting] = Field(
        default_factory=dict,
        description="Prices in US dollars per million tokens, per model id, as JSON: "
        '{"id": {"input": 0.5, "cached_input": 0.05, "output": 2}}; they replace the catalog\'s '
        "(cached_input unset: the input price). A model with no price has an unknown cost.",
    )
    usage_retention_days: int = Field(
        default=90, ge=1, le=3660, description="Days the daily usage and cost roll-ups are kept in Redis."
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value.rstrip("/") if value is not None else None


_TEAM = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?/[A-Za-z0-9_.-]+$")


class DashboardSettings(BaseModel):
    """The dashboard (``DRYDOCK_DASHBOARD_*``): where browsers reach it, how people sign in (GitHub
    OAuth, optionally a generic OpenID Connect provider, a development login), who administers
    it, and its sessions."""

    public_url: str = Field(
        default="http://127.0.0.1:8000",
        description="The dashboard's URL as browsers reach it; sign-in callbacks and the accepted Origin derive "
        "from it. Unset in development: the web server's own address (DRYDOCK_HTTP_HOST, DRYDOCK_HTTP_PORT).",
    )
    dev_login: bool | None = Field(
        default=None,
        description="A sign-in form that takes any login without a password. Unset: on in development, "
        "off in production; set true in production, it stops start-up. The Helm chart never sets it.",
    )
    github_client_id: str | None = Field(
        default=None, description="The GitHub App's (or an OAuth App's) client id; unset: no GitHub sign-in."
    )
    github_client_secret: SecretStr | None = None
    github_web_url: str | None = Field(
        default=None,
        description="Where browsers reach the code host to sign in; unset: https://{DRYDOCK_GITHUB_HOST}.",
    )
    github_scopes: str = Field(
        default="read:user read:org",
        description="Scopes an OAuth App asks for; a GitHub App's user tokens ignore them.",
    )
    oidc_issuer: str | None = Field(
        default=None,
        description="An OpenID Connect issuer (discovery at /.well-known/openid-configuration); unset: none.",
    )
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_scopes: str = Field(default="openid profile email")
    oidc_username_claim: str = Field(default="preferred_username", description="The ID token claim shown as the login.")
    oidc_groups_claim: str = Field(default="groups", description="The ID token claim listing the person's groups.")
    admin_logins: list[str] = Field(
        default_factory=list,
        description='Administrators by GitHub login (or OpenID Connect username), as JSON: ["ada"].',
    )
    admin_teams: list[str] = Field(
        default_factory=list, description='Administrators by GitHub team, as JSON: ["acme/platform"] (org/team-slug).'
    )
    admin_groups: list[str] = Field(default_factory=list, description="Administrators by OpenID Connect group (JSON).")
    session_ttl: Duration = Field(
        default=timedelta(hours=8),
        gt=timedelta(0),
        description="A session's lifetime; by default that of a GitHub App's user token, which refreshes access.",
    )
    cookie_secure: bool = Field(
        default=True, description="Mark cookies Secure (HTTPS only); turn off only for plain-HTTP development."
    )
    access_ttl: Duration = Field(
        default=timedelta(minutes=10),
        gt=timedelta(0),
        description="How long the repositories a person may see are remembered before GitHub is asked again.",
    )
    page_size: int = Field(default=50, ge=1, le=500, description="Threads per page unless a request asks otherwise.")
    max_in_flight: int = Field(
        default=32,
        ge=1,
        le=1000,
        description="Requests handled at once per process; more wait their turn (below Redis's connection pool).",
    )
    event_heartbeat: Duration = Field(
        default=timedelta(seconds=15), gt=timedelta(0), description="Keep-alive interval of live event streams."
    )
    event_stream_lifetime: Duration = Field(
        default=timedelta(seconds=45),
        gt=timedelta(0),
        description="A live event stream ends after this and the browser reconnects where it left off, so a "
        "replica shutting down is never held open by its viewers (keep it below the termination grace period).",
    )

    @field_validator("public_url", "github_web_url", "oidc_issuer")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value.rstrip("/") if value is not None else None

    @field_validator("admin_teams")
    @classmethod
    def _teams(cls, value: list[str]) -> list[str]:
        for team in value:
            if not _TEAM.match(team):
                raise ValueError(f"{team!r} is not a team of the form org/team-slug")
        return [team.lower() for team in value]

    @model_validator(mode="after")
    def _client_pairs(self) -> DashboardSettings:
        if (self.github_client_id is None) != (self.github_client_secret is None):
            raise ValueError(
                "DRYDOCK_DASHBOARD_GITHUB_CLIENT_ID and DRYDOCK_DASHBOARD_GITHUB_CLIENT_SECRET are set together"
            )
        oidc = (self.oidc_issuer, self.oidc_client_id)
        if (oidc[0] is None) != (oidc[1] is None):
            raise ValueError("DRYDOCK_DASHBOARD_OIDC_ISSUER and DRYDOCK_DASHBOARD_OIDC_CLIENT_ID are set together")
        return self


class CryptoSettings(BaseModel):
    keys: list[SecretStr] = Field(
        default_factory=list,
        description="Fernet keys, newest first: the first encrypts, all decrypt (rotation).",
    )

    @field_validator("keys")
    @classmethod
    def _fernet_keys(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for position, key in enumerate(keys, start=1):
            try:
                Fernet(key.get_secret_value())
            except (ValueError, binascii.Error):
                raise ValueError(
                    f"key #{position} is not a Fernet key (32 url-safe base64-encoded bytes); generate one with "
                    "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
                ) from None
        return keys


DEFAULT_EGRESS_ALLOWLIST = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "proxy.golang.org",
    "sum.golang.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
)


class CredentialProxySettings(BaseModel):
    """The credential proxy (``DRYDOCK_PROXY_*``): where it listens, how sandboxes reach it,
    where it forwards to, and how long grants live."""

    url: str = Field(
        default="http://127.0.0.1:8081",
        description="The reverse proxy's URL as sandboxes reach it (git and the code host's API); for local "
        "sandboxes a loopback address, served inside each sandbox by a relay to socket_dir.",
    )
    egress_url: str = Field(
        default="http://127.0.0.1:8082",
        description="The egress (forward) proxy's URL as sandboxes reach it.",
    )
    host: str = Field(default="127.0.0.1", description="Address the proxy listens on.")
    socket_dir: str | None = Field(
        default=None,
        description="Directory of the proxy's Unix sockets, which local sandboxes reach it through; unset: "
        "<tmp>/drydock-proxy.",
    )
    port: int = Field(default=8081, ge=0, le=65535, description="Port of the reverse proxy and its health routes.")
    egress_port: int = Field(default=8082, ge=0, le=65535, description="Port of the egress forward proxy.")
    git_upstream: str | None = Field(
        default=None, description="Where git smart HTTP goes upstream; unset: https://{github host}."
    )
    grant_ttl: Duration = Field(default=timedelta(hours=1), gt=timedelta(0))
    grant_retention: Duration = Field(
        default=timedelta(days=1),
        description="How long a revoked or expired grant is remembered, so its refusal can say why.",
    )
    token_renew_margin: Duration = Field(
        default=timedelta(minutes=5),
        description="An upstream token closer than this to its expiry is replaced before use.",
    )
    grant_refresh_interval: Duration = Field(
        default=timedelta(minutes=5),
        ge=timedelta(0),
        description="A reused sandbox's grant extended less than this long ago is only checked (still live); "
        "an older one is extended and its upstream token minted anew.",
    )
    upstream_timeout: float = Field(default=30.0, gt=0, description="Seconds to connect to an upstream.")
    mirror_dir: str | None = Field(
        default=None,
        description="Where the proxy keeps bare mirrors of repositories to inspect pushes for protected paths; "
        "unset: a directory of its own under <tmp>, removed when it stops.",
    )
    max_inspected_push: int = Field(
        default=2 * 1024**3,
        ge=1024,
        description="Bytes of a push body the proxy spools to inspect it for protected paths; a larger push is "
        "refused.",
    )
    read_timeout: Duration = Field(
        default=timedelta(minutes=10),
        gt=timedelta(0),
        description="How long a sandbox may take to send a request's head (from the connection's opening or the "
        "previous answer), and again its body; past it the connection is closed.",
    )
    egress_allowlist: list[str] = Field(
        default_factory=lambda: list(DEFAULT_EGRESS_ALLOWLIST),
        description="Hosts sandboxes may reach through the egress proxy: `host` (ports 80 and 443; a CONNECT "
        "tunnel 443 only), `host:port`, or `*.domain` for its subdomains, which are reached at public addresses only.",
    )

    @field_validator("url", "egress_url", "git_upstream")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value.rstrip("/") if value is not None else None


class WorkerSettings(BaseModel):
    """The agent workers (``DRYDOCK_WORKER_*``): how many runs one process holds and how a run is
    bounded."""

    concurrency: int = Field(default=16, ge=1, description="Runs one worker process holds at a time.")
    heartbeat: Duration = Field(
        default=timedelta(seconds=15),
        description="Interval of the in-progress acknowledgements that keep a running wake alive.",
    )
    step_limit: int = Field(default=150, ge=1, description="Model calls per run before it ends at the step limit.")
    sandbox_failure_limit: int = Field(
        default=3, ge=1, description="Consecutive sandbox failures that trip the thread's circuit breaker."
    )


class AutofixSettings(BaseModel):
    """The autofix controller (``DRYDOCK_AUTOFIX_*``): the policy's loop limit, the confidence gate
    of repair runs, the fallback monitor, and the controller's lease and scheduler."""

    max_repairs: int = Field(
        default=3, ge=1, description="Repair runs per pull request before autofix stops (the loop limit)."
    )
    confidence_threshold: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="A repair run may push only once it reported at least this confidence (report_confidence).",
    )
    repair_timeout: Duration = Field(
        default=timedelta(hours=2),
        gt=timedelta(0),
        description="A repair whose run never reported its end is given up after this; its push gate lifts.",
    )
    monitor_interval: Duration = Field(
        default=timedelta(minutes=5),
        gt=timedelta(0),
        description="How often open agent pull requests are scanned through the GitHub API for missed events.",
    )
    failure_conclusions: list[str] = Field(
        default_factory=lambda: ["failure", "timed_out", "startup_failure"],
        description="Check and workflow conclusions that count as a failure.",
    )
    label_on: str = Field(default="drydock:autofix", min_length=1, description="A PR label that turns autofix on.")
    label_off: str = Field(default="drydock:no-autofix", min_length=1, description="A PR label that turns autofix off.")
    lease_ttl: Duration = Field(
        default=timedelta(seconds=15),
        gt=timedelta(0),
        description="The controller lease: a standby replica takes over this long after the active one died.",
    )
    concurrency: int = Field(
        default=48,
        ge=1,
        le=90,
        description="Events decided at once by the active controller (each holds at most one Redis connection: "
        "below Redis's connection pool of 100); events of one thread wait for each other.",
    )
    scheduler_poll: Duration = Field(
        default=timedelta(seconds=5), gt=timedelta(0), description="How often due wake-ups are looked for."
    )


class ToolSettings(BaseModel):
    """The coder's network tools (``DRYDOCK_TOOLS_*``)."""

    http_allowlist: list[str] = Field(
        default_factory=list,
        description="Hosts the http_request tool may call: `host`, `host:port`, or `*.domain`; empty: none.",
    )
    search_provider: str | None = Field(
        default=None, description="Web search provider: brave or searxng; unset: web search is off."
    )
    search_url: str | None = Field(default=None, description="The search provider's API root (searxng: required).")
    search_api_key: SecretStr | None = None
    fetch_max_bytes: int = Field(default=2_000_000, ge=1024, description="Largest response body a tool reads.")
    timeout: float = Field(default=20.0, gt=0, description="Seconds one tool request may take.")
    allow_private_addresses: bool = Field(
        default=False,
        description="Let fetch_url and http_request reach loopback and private addresses (development only).",
    )


class ReviewSettings(BaseModel):
    """The reviewer and the analyzer (``DRYDOCK_REVIEW_*``)."""

    min_severity: Literal["critical", "high", "medium", "low", "info"] = Field(
        default="low", description="Findings below this severity are not posted as review comments."
    )
    max_comments: int = Field(default=20, ge=1, le=100, description="Inline comments posted per review at most.")
    auto_bootstrap: bool = Field(
        default=True,
        description="The first review on a repository asks the analyzer to learn its guidelines from its history.",
    )
    bootstrap_pull_requests: int = Field(
        default=50, ge=1, le=500, description="Recent merged pull requests whose review comments bootstrap learns from."
    )
    bootstrap_min_comments: int = Field(
        default=20, ge=1, description="Human review comments bootstrap needs at least; fewer: no guidelines yet."
    )
    refine_interval: Duration = Field(
        default=timedelta(days=1),
        ge=timedelta(minutes=5),
        description="How often the analyzer refines a repository's guidelines from the outcomes of findings.",
    )
    auto_approve_guidelines: bool = Field(
        default=False, description="New guideline versions apply at once instead of waiting for approval."
    )


class HttpSettings(BaseModel):
    host: str = Field(default="127.0.0.1")
    port: int = Field(default=8000, ge=0, le=65535)
    keep_alive: Duration = Field(
        default=timedelta(seconds=75),
        gt=timedelta(0),
        description="How long an idle client connection stays open. Longer than a load balancer's or "
        "client's idle timeout (AWS ALB 60 s), so that none of them sends on a connection the "
        "server is just closing.",
    )
    read_timeout: Duration = Field(
        default=timedelta(seconds=30),
        gt=timedelta(0),
        description="How long a client may take to send a request, headers and body, from its first "
        "byte (or the connection's opening); past it the connection is closed.",
    )
    health_listener: bool = Field(
        default=True,
        description="`drydock serve` answers /healthz and /readyz on host:port (and /metrics on "
        "metrics_port) for a service without an HTTP app of its own (workers, the autofix controller).",
    )
    metrics_port: int = Field(
        default=9464,
        ge=1,
        le=65535,
        description="Where /metrics is served (on host): a port of its own, so that the public web port "
        "never answers it.",
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Processes serving the port of `drydock serve ingress`, `dashboard` or `web`: each "
        "listens on it with SO_REUSEPORT and the kernel spreads the connections over them; /metrics "
        "adds up the counters of all of them. The chart sets it from the CPU limit.",
    )
    worker_index: int = Field(
        default=0,
        ge=0,
        description="Set by `drydock serve` for the processes it starts when `workers` > 1 (1, 2, …); "
        "0 is a process serving alone, or the one that starts the workers.",
    )


class LogSettings(BaseModel):
    level: str = Field(default="INFO")
    format: LogFormat | None = Field(
        default=None, description="json or console; unset: console in development, json in production."
    )

    @field_validator("level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        upper = value.upper()
        if upper not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"{value!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return upper


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="_",
        env_nested_max_split=1,
        case_sensitive=False,
        extra="ignore",
    )

    environment: Environment = Environment.DEVELOPMENT
    nats: NatsSettings = Field(default_factory=NatsSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    lease: LeaseSettings = Field(default_factory=LeaseSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings)
    github: GithubSettings = Field(default_factory=GithubSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    linear: LinearSettings = Field(default_factory=LinearSettings)
    ingress: IngressSettings = Field(default_factory=IngressSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    crypto: CryptoSettings = Field(default_factory=CryptoSettings)
    proxy: CredentialProxySettings = Field(default_factory=CredentialProxySettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    autofix: AutofixSettings = Field(default_factory=AutofixSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    @model_validator(mode="after")
    def _no_unisolated_sandbox_in_production(self) -> Settings:
        if self.environment is Environment.PRODUCTION and self.sandbox.local_allow_unisolated:
            raise ValueError(
                "DRYDOCK_SANDBOX_LOCAL_ALLOW_UNISOLATED is for development: it is refused when "
                "DRYDOCK_ENVIRONMENT is production"
            )
        return self

    @model_validator(mode="after")
    def _development_public_url_follows_the_port(self) -> Settings:
        # In development the dashboard is browsed where the web server listens; a changed
        # DRYDOCK_HTTP_PORT must not leave the accepted Origin on port 8000.
        if self.environment is Environment.DEVELOPMENT and "public_url" not in self.dashboard.model_fields_set:
            host = "127.0.0.1" if self.http.host in {"0.0.0.0", "::", ""} else self.http.host
            host = f"[{host}]" if ":" in host else host
            self.dashboard.public_url = f"http://{host}:{self.http.port}"
        return self

    @model_validator(mode="after")
    def _development_login_only_in_development(self) -> Settings:
        if self.dashboard.dev_login is None:
            self.dashboard.dev_login = self.environment is Environment.DEVELOPMENT
        elif self.dashboard.dev_login and self.environment is Environment.PRODUCTION:
            raise ValueError(
                "DRYDOCK_DASHBOARD_DEV_LOGIN: the development sign-in takes any login without a password "
                "and is refused when DRYDOCK_ENVIRONMENT is production; unset it"
            )
        return self

    @property
    def log_format(self) -> LogFormat:
        if self.log.format is not None:
            return self.log.format
        return LogFormat.CONSOLE if self.environment is Environment.DEVELOPMENT else LogFormat.JSON


def env_name(loc: tuple[int | str, ...]) -> str:
    """The environment variable that sets the field at ``loc`` (``("nats", "url")`` → ``DRYDOCK_NATS_URL``)."""
    depth = 3 if len(loc) > 2 and str(loc[1]) in FLATTENED_SECTIONS else 2
    parts = [str(part) for part in loc[:depth]]
    return ENV_PREFIX + "_".join(parts).upper()


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment; raise :class:`ConfigError` naming every bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as error:
        problems = [_problem(detail) for detail in error.errors()]
        if len(problems) == 1:
            raise ConfigError(problems[0]) from None
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None
    except SettingsError as error:
        raise ConfigError(_unparsable(error, os.environ)) from None


def _problem(detail: ErrorDetails) -> str:
    message = detail["msg"].removeprefix("Value error, ")
    return f"{env_name(detail['loc'])}: {message}" if detail["loc"] else message


def _fields(model: type[BaseModel], prefix: str, flattened: bool) -> Iterator[tuple[str, Any]]:
    for name, field in model.model_fields.items():
        nested = field.annotation
        if flattened and name in FLATTENED_SECTIONS and isinstance(nested, type) and issubclass(nested, BaseModel):
            yield from _fields(nested, f"{prefix}{name.upper()}_", flattened=False)
        else:
            yield f"{prefix}{name.upper()}", nested


def variables() -> dict[str, Any]:
    """Every ``DRYDOCK_`` variable the settings read, with the type of its field."""
    found: dict[str, Any] = {}
    for section, field in Settings.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            found.update(_fields(model, f"{ENV_PREFIX}{section.upper()}_", flattened=True))
        else:
            found[f"{ENV_PREFIX}{section.upper()}"] = model
    return found


NOT_SETTINGS = frozenset({"DRYDOCK_SANDBOX_ID"})
"""``DRYDOCK_`` variables that are not settings: set inside sandboxes, or by the test suites (``DRYDOCK_TEST_*``)."""


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The ``DRYDOCK_`` variables in ``environ`` that no setting reads, each with the closest known name."""
    known = variables()
    unknown = [
        name
        for name in sorted(environ)
        if name.upper().startswith(ENV_PREFIX)
        and name.upper() not in known
        and name.upper() not in NOT_SETTINGS
        and not name.upper().startswith(f"{ENV_PREFIX}TEST_")
    ]
    return [
        (name, next(iter(difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.6)), None)) for name in unknown
    ]


def _unparsable(error: SettingsError, environ: Mapping[str, str]) -> str:
    """One line naming the variables whose value is not the JSON their field needs."""
    bad = []
    for name, annotation in variables().items():
        value = environ.get(name)
        if value is None or get_origin(annotation) not in (list, dict):
            continue
        try:
            json.loads(value)
        except ValueError:
            is_list = get_origin(annotation) is list
            example = _EXAMPLES.get(name, "[]" if is_list else "{}")
            bad.append(f"{name}: not valid JSON (expected a JSON {'list' if is_list else 'object'}, e.g. {example})")
    return "; ".join(bad) if bad else f"invalid configuration: {error}"


_EXAMPLES = {
    "DRYDOCK_CRYPTO_KEYS": '["<a Fernet key>"]',
    "DRYDOCK_MODELS_EXTRA_MODELS": '{"qwen3-coder": []}',
}
