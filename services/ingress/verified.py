"""Each endpoint's first step: verify the delivery with its channel's secret, then parse it.
Nothing about the body is interpreted before its signature checks out."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import SecretStr

from drydock.channels.errors import ChannelNotConfigured
from drydock.channels.github import parse as github_parse
from drydock.channels.github import verify as github_verify
from drydock.channels.intents import Delivery
from drydock.channels.linear import parse as linear_parse
from drydock.channels.linear import verify as linear_verify
from drydock.channels.payload import load_json
from drydock.channels.slack import parse as slack_parse
from drydock.channels.slack import verify as slack_verify
from drydock.config import Settings


def _secret(value: SecretStr | None, variable: str) -> bytes:
    if value is None:
        raise ChannelNotConfigured(f"this channel is not configured here ({variable} is unset)")
    return value.get_secret_value().encode()


def github(settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
    secret = _secret(settings.github.webhook_secret, "DRYDOCK_GITHUB_WEBHOOK_SECRET")
    github_verify.verify(secret, body, headers.get(github_verify.SIGNATURE_HEADER))
    return github_parse.parse(headers, body, host=settings.github.host, app_slug=settings.github.app_slug)


def _slack_verified(settings: Settings, headers: Mapping[str, str], body: bytes) -> None:
    secret = _secret(settings.slack.signing_secret, "DRYDOCK_SLACK_SIGNING_SECRET")
    slack_verify.verify(
        secret,
        body,
        timestamp=headers.get(slack_verify.TIMESTAMP_HEADER),
        header=headers.get(slack_verify.SIGNATURE_HEADER),
        tolerance=settings.slack.timestamp_tolerance,
    )


def slack_event(settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
    _slack_verified(settings, headers, body)
    return slack_parse.parse_event(headers, body, bot_user_id=settings.slack.bot_user_id)


def slack_interaction(settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
    _slack_verified(settings, headers, body)
    return slack_parse.parse_interaction(headers, body)


def linear(settings: Settings, headers: Mapping[str, str], body: bytes) -> Delivery:
    secret = _secret(settings.linear.webhook_secret, "DRYDOCK_LINEAR_WEBHOOK_SECRET")
    linear_verify.verify_signature(secret, body, headers.get(linear_verify.SIGNATURE_HEADER))
    linear_verify.verify_timestamp(load_json(body), tolerance=settings.linear.timestamp_tolerance)
    return linear_parse.parse(headers, body, agent_user_id=settings.linear.agent_user_id)
