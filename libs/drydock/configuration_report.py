"""``drydock config check``: the effective configuration with secrets masked, and what is not
configured yet with the variables that configure it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from drydock.config import ENV_PREFIX, Settings, variables

_USERINFO_PASSWORD = re.compile(r"(//[^/:@\s]*):[^@/\s]+@")
"""A password in a URL's userinfo (``redis://user:secret@host``)."""


def _flatten(prefix: str, value: Any, known: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and prefix.upper() not in known:
        for key, item in value.items():
            yield from _flatten(f"{prefix}_{key}", item, known)
    else:
        yield prefix.upper(), value


def effective(settings: Settings) -> list[tuple[str, str]]:
    """Every setting as ``(variable, value)``; secrets (``SecretStr`` fields) are dumped masked."""
    known = variables()
    rows = []
    for section, value in settings.model_dump(mode="json").items():
        for name, item in _flatten(f"{ENV_PREFIX}{section}", value, known):
            shown = "" if item is None else item if isinstance(item, str) else json.dumps(item)
            rows.append((name, _USERINFO_PASSWORD.sub(r"\1:**********@", shown)))
    return sorted(rows)


def missing(settings: Settings) -> list[str]:
    """What is not configured, one line each, naming the variables that configure it."""
    found = []
    if settings.models.base_url is None and settings.models.api_key is None:
        found.append("a model endpoint: DRYDOCK_MODELS_API_KEY (OpenAI) or DRYDOCK_MODELS_BASE_URL")
    if not settings.crypto.keys:
        found.append("encryption keys for stored tokens: DRYDOCK_CRYPTO_KEYS")
    if settings.github.app_id is None or settings.github.private_key is None:
        found.append("a GitHub App: DRYDOCK_GITHUB_APP_ID, DRYDOCK_GITHUB_PRIVATE_KEY")
    if settings.github.webhook_secret is None:
        found.append("GitHub webhooks: DRYDOCK_GITHUB_WEBHOOK_SECRET")
    if settings.slack.bot_token is None or settings.slack.signing_secret is None:
        found.append("Slack: DRYDOCK_SLACK_BOT_TOKEN, DRYDOCK_SLACK_SIGNING_SECRET")
    if settings.linear.api_key is None or settings.linear.webhook_secret is None:
        found.append("Linear: DRYDOCK_LINEAR_API_KEY, DRYDOCK_LINEAR_WEBHOOK_SECRET")
    dashboard = settings.dashboard
    if dashboard.github_client_id is None and dashboard.oidc_issuer is None and not dashboard.dev_login:
        found.append(
            "dashboard sign-in: DRYDOCK_DASHBOARD_GITHUB_CLIENT_ID or DRYDOCK_DASHBOARD_OIDC_ISSUER "
            "(DRYDOCK_DASHBOARD_DEV_LOGIN=true in development)"
        )
    return found


def configuration_report(settings: Settings) -> str:
    """The text ``drydock config check`` prints."""
    lines = [f"{name}={value}" for name, value in effective(settings)]
    gaps = missing(settings)
    lines.append("")
    lines.append("not configured:" if gaps else "not configured: nothing")
    lines.extend(f"  {gap}" for gap in gaps)
    return "\n".join(lines)
