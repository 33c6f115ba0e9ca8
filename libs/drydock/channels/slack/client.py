"""The Slack Web API as the Drydock bot, through ``slack_sdk``'s ``AsyncWebClient``.

One aiohttp session per client, opened on first use (it needs the running loop) and closed by
:meth:`SlackClient.aclose`. Slack answers HTTP 200 with ``{"ok": false, "error": ...}`` for
most failures; they become :class:`OutboundFailed` carrying Slack's error code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.config import SlackSettings
from drydock.errors import describe
from drydock.telemetry.tracing import aiohttp_tracing

EFFECT_EVENT = "drydock_effect"
"""The metadata event type of a message Drydock posted as an effect (:mod:`drydock.effects`)."""


class SlackClient:
    def __init__(self, settings: SlackSettings) -> None:
        if settings.bot_token is None:
            raise ChannelNotConfigured("Slack not configured: set DRYDOCK_SLACK_BOT_TOKEN")
        self._token = settings.bot_token.get_secret_value()
        self._base_url = settings.api_url if settings.api_url.endswith("/") else settings.api_url + "/"
        self._timeout = settings.request_timeout
        self._session: aiohttp.ClientSession | None = None
        self._web: AsyncWebClient | None = None

    def _client(self) -> AsyncWebClient:
        if self._web is None:
            self._session = aiohttp.ClientSession(trace_configs=aiohttp_tracing())
            self._web = AsyncWebClient(
                token=self._token, base_url=self._base_url, timeout=self._timeout, session=self._session
            )
        return self._web

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = self._web = None

    async def _call(
        self, method: str, doing: str, request: Callable[[AsyncWebClient], Awaitable[AsyncSlackResponse]]
    ) -> dict[str, Any]:
        try:
            response = await request(self._client())
        except SlackApiError as error:
            code = error.response.get("error") if error.response is not None else None
            status = error.response.status_code if error.response is not None else None
            raise OutboundFailed(f"Slack {method} failed ({code or error}) {doing}", status=status) from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as error:
            raise OutboundFailed(f"Slack unreachable {doing}: {describe(error)}") from None
        return dict(response.data) if isinstance(response.data, dict) else {}

    async def post_in_thread(
        self,
        channel: str,
        thread_ts: str,
        text: str,
        *,
        effect: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str:
        """Post ``text`` as a reply in the thread; returns the new message's ``ts``. ``effect``
        goes into the message's metadata, for :meth:`find_effect`; ``blocks`` lay the message out
        (``text`` stays its notification text)."""
        metadata = None if effect is None else {"event_type": EFFECT_EVENT, "event_payload": {"effect": effect}}
        found = await self._call(
            "chat.postMessage",
            f"posting in {channel}",
            lambda web: web.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=text, metadata=metadata, blocks=blocks
            ),
        )
        return str(found.get("ts", ""))

    @staticmethod
    def _replies(
        channel: str, thread_ts: str, cursor: str | None
    ) -> Callable[[AsyncWebClient], Awaitable[AsyncSlackResponse]]:
        return lambda web: web.conversations_replies(
            channel=channel, ts=thread_ts, include_all_metadata=True, limit=200, cursor=cursor
        )

    async def find_effect(self, channel: str, thread_ts: str, effect: str, *, limit: int = 1000) -> str | None:
        """The ``ts`` of the thread's message posted with ``effect`` in its metadata, if any."""
        cursor: str | None = None
        seen = 0
        while seen < limit:
            page = await self._call(
                "conversations.replies",
                f"reading the thread {thread_ts} in {channel}",
                self._replies(channel, thread_ts, cursor),
            )
            messages = page.get("messages") or []
            for message in messages:
                metadata = message.get("metadata") or {}
                if (
                    metadata.get("event_type") == EFFECT_EVENT
                    and (metadata.get("event_payload") or {}).get("effect") == effect
                ):
                    return str(message.get("ts", ""))
            seen += len(messages)
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not page.get("has_more") or cursor is None:
                return None
        return None

    async def add_reaction(self, channel: str, ts: str, name: str = "eyes") -> None:
        """React to a message; a reaction that is already there counts as done."""
        try:
            await self._call(
                "reactions.add",
                f"reacting in {channel}",
                lambda web: web.reactions_add(channel=channel, timestamp=ts, name=name),
            )
        except OutboundFailed as failure:
            if "already_reacted" not in failure.reason:
                raise

    async def set_assistant_status(self, channel: str, thread_ts: str, status: str) -> None:
        """The status line under an assistant thread; an empty status clears it."""
        await self._call(
            "assistant.threads.setStatus",
            f"setting the status in {channel}",
            lambda web: web.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status=status),
        )
