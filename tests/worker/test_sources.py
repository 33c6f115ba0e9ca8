"""The status and notice adapters over the outbound clients, bound to a thread's source."""

from __future__ import annotations

from redis.asyncio import Redis

from drydock.bus.envelopes import Channel, InboxMessage, ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.channels.run_status import RunStatus
from drydock.infra.redis import Keys
from drydock.redaction import Redactor
from drydock.roles import Role
from drydock.threads.fields import REPLY_TO
from drydock.threads.metadata import ThreadMetadataStore
from drydock.worker.sources import SourceNotices, SourceStatus


class RecordingChannel:
    """A channel's replies and status indicator that record calls; the first status hands back
    a field to keep, like GitHub's check run id."""

    def __init__(self) -> None:
        self.replies: list[tuple[dict[str, str], str]] = []
        self.statuses: list[tuple[dict[str, str], RunStatus]] = []

    async def reply(self, address: ReplyAddress, text: str, *, effect: str | None = None) -> None:
        self.replies.append((address.address, text))

    async def find_reply(self, address: ReplyAddress, effect: str) -> bool:
        return False

    async def acknowledge(self, message: InboxMessage) -> bool:
        return False

    async def show(self, address: ReplyAddress, status: RunStatus, detail: str = "") -> dict[str, str]:
        self.statuses.append((dict(address.address), status))
        return {} if "check_run_id" in address.address else {"check_run_id": "77"}


class TestSourceStatus:
    async def test_fields_the_channel_hands_back_are_kept_for_the_next_update(
        self, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        metadata = ThreadMetadataStore(redis, keys)
        address = ReplyAddress(channel=Channel.GITHUB, address={"repository": "acme/widgets", "head_sha": "abc"})
        await metadata.create(thread_id, kind=Role.CODER, fields={REPLY_TO: address.model_dump_json()})
        channel = RecordingChannel()
        outbound = Outbound({Channel.GITHUB: channel}, {Channel.GITHUB: channel}, [])

        status = SourceStatus(outbound, metadata, thread_id, address)
        await status.show(RunStatus.WORKING)
        await status.show(RunStatus.FINISHED)

        assert [shown for _, shown in channel.statuses] == [RunStatus.WORKING, RunStatus.FINISHED]
        assert channel.statuses[1][0]["check_run_id"] == "77"
        stored = (await metadata.get(thread_id)).require_reply_to()
        assert stored.address == {"repository": "acme/widgets", "head_sha": "abc", "check_run_id": "77"}


class TestSourceNotices:
    async def test_a_notice_is_a_reply_to_the_source(self) -> None:
        channel = RecordingChannel()
        address = ReplyAddress(channel=Channel.SLACK, address={"channel": "C1", "thread_ts": "1.0"})
        await SourceNotices(Outbound({Channel.SLACK: channel}, {}, []), address).notify("stopped")
        assert channel.replies == [({"channel": "C1", "thread_ts": "1.0"}, "stopped")]

    async def test_a_notice_quoting_command_output_has_its_secrets_redacted(self) -> None:
        channel = RecordingChannel()
        address = ReplyAddress(channel=Channel.SLACK, address={"channel": "C1", "thread_ts": "1.0"})
        redactor = Redactor().with_values({"grant-0123456789abcdef": "sandbox grant"})
        notices = SourceNotices(Outbound({Channel.SLACK: channel}, {}, []), address, redactor)

        await notices.notify("I could not clone:\n```\nfatal: bad grant grant-0123456789abcdef\n```")

        note = "[redacted: Drydock's sandbox grant]"
        assert channel.replies[0][1] == f"I could not clone:\n```\nfatal: bad grant {note}\n```"
