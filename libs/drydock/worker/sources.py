"""The middleware's channel-facing protocols, bound to one thread's source conversation: the
status indicator (:class:`SourceStatus`) and notices (:class:`SourceNotices`), both over
:class:`~drydock.channels.outbound.Outbound`."""

from __future__ import annotations

from drydock.bus.envelopes import ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.channels.run_status import RunStatus
from drydock.redaction import Redactor
from drydock.threads.metadata import ThreadMetadataStore


class SourceStatus:
    """Shows a run's status in the source's indicator. Fields the channel hands back (the id of a
    GitHub check run) are kept in the thread's reply address, so the next run updates the same
    indicator instead of creating another."""

    def __init__(
        self, outbound: Outbound, metadata: ThreadMetadataStore, thread_id: str, address: ReplyAddress
    ) -> None:
        self._outbound = outbound
        self._metadata = metadata
        self._thread_id = thread_id
        self.address = address

    async def show(self, status: RunStatus, detail: str = "") -> None:
        kept = await self._outbound.show_status(self.address, status, detail)
        if not kept:
            return
        self.address = self.address.model_copy(update={"address": {**self.address.address, **kept}})
        await self._metadata.set_reply_to(self._thread_id, self.address)


class SourceNotices:
    """Posts notices (the step limit, the circuit breaker, failures) to the source conversation."""

    def __init__(self, outbound: Outbound, address: ReplyAddress, redactor: Redactor | None = None) -> None:
        self._outbound = outbound
        self._address = address
        self.redactor = redactor
        """Set once the run knows its sandbox's secrets; notices quote command output (a failed clone)."""

    async def notify(self, text: str, *, continue_button: bool = False) -> None:
        """Post ``text``; with ``continue_button``, a Continue button under it where the channel
        has buttons (Slack), for a thread paused at a budget."""
        if self.redactor is not None:
            text = self.redactor.redact(text, where="notice")
        if continue_button:
            await self._outbound.reply_with_continue(self._address, text)
            return
        await self._outbound.reply(self._address, text)
