"""One typed settings object for every Drydock process.

Variables use the prefix ``DRYDOCK_`` and one underscore between section and field:
``DRYDOCK_NATS_URL`` sets ``settings.nats.url``. Settings are read once at start-up
(:func:`load_settings`) and passed down; nothing else reads the environment.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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
    key_prefix: str = Field(default="drydock", min_length=1)

    @field_validator("url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"{value!r} is not a redis://, rediss:// or unix:// URL")
        return value


class LeaseSettings(BaseModel):
    ttl: Duration = Field(default=timedelta(seconds=30), gt=timedelta(0))


class SandboxSettings(BaseModel):
    provider: str = Field(default="local")
    idle_ttl: Duration = Field(default=timedelta(hours=2))


class GithubSettings(BaseModel):
    host: str = Field(default="github.com")
    api_url: str = Field(default="https://api.github.com")
    app_id: int | None = None
    private_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None


class SlackSettings(BaseModel):
    bot_token: SecretStr | None = None
    signing_secret: SecretStr | None = None


class LinearSettings(BaseModel):
    api_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None


class ModelSettings(BaseModel):
    base_url: str | None = None
    api_key: SecretStr | None = None
    default: str = Field(default="gpt-5.1")
    fallback: str | None = None


class DashboardSettings(BaseModel):
    public_url: str = Field(default="http://127.0.0.1:8000")
    dev_login: bool = False


class CryptoSettings(BaseModel):
    keys: list[SecretStr] = Field(
        default_factory=list,
        description="Fernet keys, newest first: the first encrypts, all decrypt (rotation).",
    )


class HttpSettings(BaseModel):
    host: str = Field(default="127.0.0.1")
    port: int = Field(default=8000, ge=0, le=65535)


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
    github: GithubSettings = Field(default_factory=GithubSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    linear: LinearSettings = Field(default_factory=LinearSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    crypto: CryptoSettings = Field(default_factory=CryptoSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    @property
    def log_format(self) -> LogFormat:
        if self.log.format is not None:
            return self.log.format
        return LogFormat.CONSOLE if self.environment is Environment.DEVELOPMENT else LogFormat.JSON


def env_name(loc: tuple[int | str, ...]) -> str:
    """The environment variable that sets the field at ``loc`` (``("nats", "url")`` → ``DRYDOCK_NATS_URL``)."""
    parts = [str(part) for part in loc[:2]]
    return ENV_PREFIX + "_".join(parts).upper()


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment; raise :class:`ConfigError` naming every bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as error:
        problems = [f"{env_name(detail['loc'])}: {detail['msg']}" for detail in error.errors()]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None
