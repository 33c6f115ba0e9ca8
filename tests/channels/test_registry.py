"""The channel map: every external channel has one adapter, and what the rest of Drydock
derives from it fits together."""

from __future__ import annotations

from drydock.accounts import Provider
from drydock.bus.envelopes import Channel
from drydock.channels.registry import CHANNELS
from drydock.worker.roles.coder import TOOLS as CODER_TOOLS
from services.ingress.webhooks import ENDPOINTS

INTERNAL = {Channel.DASHBOARD, Channel.AUTOFIX, Channel.SCHEDULER}
"""Sources inside Drydock: no webhook, no conversation outside."""


class TestChannelMap:
    def test_every_external_channel_has_an_adapter(self) -> None:
        assert set(CHANNELS) == set(Channel) - INTERNAL
        assert all(channel is adapter.channel for channel, adapter in CHANNELS.items())

    def test_every_channel_has_accounts_to_link(self) -> None:
        assert {Provider(channel.value) for channel in CHANNELS} == set(Provider)

    def test_each_conversation_kind_belongs_to_one_channel(self) -> None:
        kinds = [adapter.conversation for adapter in CHANNELS.values()]
        assert len(set(kinds)) == len(kinds)
        assert all(adapter.conversation.source is channel for channel, adapter in CHANNELS.items())

    def test_the_webhook_endpoints_are_the_adapters_paths_once_each(self) -> None:
        paths = [webhook.path for adapter in CHANNELS.values() for webhook in adapter.webhooks]
        assert len(set(paths)) == len(paths)
        assert all(path.startswith("/webhooks/") for path in paths)
        served = {path: channel for path, channel, _, _ in ENDPOINTS}
        assert served == {
            webhook.path: channel for channel, adapter in CHANNELS.items() for webhook in adapter.webhooks
        }

    def test_the_reply_tool_of_each_channel_is_a_coder_tool(self) -> None:
        for adapter in CHANNELS.values():
            assert adapter.reply_tool.split()[0] in CODER_TOOLS, adapter.channel
