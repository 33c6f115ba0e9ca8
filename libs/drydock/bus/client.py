"""The NATS connection and acknowledged publishing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import nats
import structlog
from nats.aio.client import Client as NatsClient
from nats.errors import AuthorizationError, MaxPayloadError
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import PubAck
from pydantic import BaseModel

from drydock.bus import subjects
from drydock.bus.envelopes import GithubEvent, RunEvent, Wake
from drydock.bus.story import tell
from drydock.config import NatsSettings
from drydock.errors import describe, without_password
from drydock.telemetry.tracing import inject_headers, publish_span

log = structlog.get_logger(__name__)

MSG_ID_HEADER = "Nats-Msg-Id"
_FIRST_CONNECT_ATTEMPTS = 3


def inbox_prefix(user: str) -> str:
    """Where replies to ``user``'s requests arrive: its permissions let it subscribe there and
    nowhere else, so no user reads another's replies."""
    return f"_INBOX_{user}"


class BusUnavailable(RuntimeError):
    """NATS cannot be reached, or JetStream did not acknowledge a publish."""


class MessageTooLarge(ValueError):
    """The message is larger than the NATS server accepts (its ``max_payload``): no retry helps."""

    def __init__(self, subject: str, limit: int) -> None:
        super().__init__(f"a message to {subject} would be larger than the {limit} bytes NATS accepts")
        self.limit = limit


async def connect_nats(settings: NatsSettings, *, name: str, url: str | None = None) -> NatsClient:
    """Connect, reconnecting forever once connected; fail fast when the first connect fails."""
    target = url or settings.url
    if target is None:
        raise BusUnavailable("DRYDOCK_NATS_URL is not set")

    refused: list[Exception] = []

    async def on_error(error: Exception) -> None:
        if "authorization violation" in str(error).lower():
            refused.append(error)
        log.warning("nats error", error=describe(error))

    async def on_disconnected() -> None:
        if not nc.is_closed:
            log.warning("nats disconnected")

    async def on_reconnected() -> None:
        log.info("nats reconnected")

    credentials: dict[str, str] = {}
    if settings.user is not None:
        credentials = {"user": settings.user, "inbox_prefix": inbox_prefix(settings.user)}
        if settings.password is not None:
            credentials["password"] = settings.password.get_secret_value()
    try:
        nc = await nats.connect(
            servers=[server.strip() for server in target.split(",")],
            name=name,
            connect_timeout=settings.connect_timeout,
            allow_reconnect=True,
            max_reconnect_attempts=_FIRST_CONNECT_ATTEMPTS,
            reconnect_time_wait=0.5,
            error_cb=on_error,
            disconnected_cb=on_disconnected,
            reconnected_cb=on_reconnected,
            **credentials,
        )
    except (NatsError, OSError, TimeoutError) as error:
        where = without_password(target)
        if refused or isinstance(error, AuthorizationError):
            who = f"user {settings.user!r}" if settings.user else "a connection without a user (or the URL's)"
            raise BusUnavailable(f"NATS at {where} refused {who}: check DRYDOCK_NATS_USER/PASSWORD") from None
        raise BusUnavailable(f"cannot reach NATS at {where}: {describe(error)}") from None
    # nats-py applies one attempt limit to the first connect and to reconnects; -1 from the
    # start would retry an unreachable first server forever instead of failing start-up.
    nc.options["max_reconnect_attempts"] = -1
    return nc


class Bus:
    """Acknowledged publishing of envelopes. A publish returns only once JetStream stored it."""

    def __init__(self, nc: NatsClient, *, timeout: float = 5.0) -> None:
        self.nc = nc
        self.timeout = timeout
        self.js: JetStreamContext = nc.jetstream(timeout=timeout)

    def encode(self, subject: str, envelope: BaseModel) -> bytes:
        """``envelope`` as :meth:`publish` sends it to ``subject``; raises
        :class:`MessageTooLarge` when NATS would refuse it (the client's own check: the payload
        against the server's ``max_payload``), so a caller can check every message before it
        publishes any."""
        data = envelope.model_dump_json().encode()
        if len(data) > self.nc.max_payload:
            raise MessageTooLarge(subject, self.nc.max_payload)
        return data

    async def publish(
        self,
        subject: str,
        envelope: BaseModel | bytes,
        *,
        msg_id: str | None = None,
        headers: dict[str, str] | None = None,
        bounded: bool = True,
    ) -> PubAck:
        """Publish and await the stream's acknowledgement; ``msg_id`` de-duplicates in the stream.
        ``envelope`` may be given as :meth:`encode` returned it.

        ``bounded=False`` leaves out the bus's timeout, for a caller whose own deadline bounds
        all its work (the ingress's per delivery): a timeout per publish is a timer each."""
        try:
            with publish_span(subject):
                if not bounded:
                    return await (await self._send(subject, envelope, msg_id, headers))
                async with asyncio.timeout(self.timeout):
                    return await (await self._send(subject, envelope, msg_id, headers))
        except MaxPayloadError:
            raise MessageTooLarge(subject, self.nc.max_payload) from None
        except (NatsError, TimeoutError) as error:
            raise BusUnavailable(f"publish to {subject} not acknowledged: {describe(error)}") from None

    async def publish_soon(self, subject: str, envelope: BaseModel) -> asyncio.Future[PubAck]:
        """Publish without waiting: the future resolves with the stream's acknowledgement.

        Messages published on one connection are stored in the order they were published, so a
        later acknowledged publish is stored after this one. Await the future (see
        :meth:`acknowledged`) before counting the message as stored.
        """
        try:
            with publish_span(subject):
                return await self._send(subject, envelope, None, None)
        except MaxPayloadError:
            raise MessageTooLarge(subject, self.nc.max_payload) from None
        except (NatsError, TimeoutError) as error:
            raise BusUnavailable(f"publish to {subject} not sent: {describe(error)}") from None

    async def _send(
        self, subject: str, envelope: BaseModel | bytes, msg_id: str | None, headers: dict[str, str] | None
    ) -> asyncio.Future[PubAck]:
        # JetStream's asynchronous publish, also for acknowledged publishes: the request-reply
        # publish pays a random reply token and a wait_for per message.
        all_headers = inject_headers(dict(headers or {}))
        if msg_id is not None:
            all_headers[MSG_ID_HEADER] = msg_id
        data = envelope if isinstance(envelope, bytes) else envelope.model_dump_json().encode()
        return await self.js.publish_async(subject, data, headers=all_headers)

    async def acknowledged(self, pending: Sequence[asyncio.Future[PubAck]]) -> None:
        """Wait for the acknowledgements of ``pending`` publishes, within the bus's timeout."""
        if not pending:
            return
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.gather(*pending)
        except (NatsError, TimeoutError) as error:
            raise BusUnavailable(f"{len(pending)} publishes not acknowledged: {describe(error)}") from None

    async def wake(self, wake: Wake, *, msg_id: str | None = None, bounded: bool = True) -> PubAck:
        return await self.publish(subjects.run(wake.role, wake.thread_id), wake, msg_id=msg_id, bounded=bounded)

    async def emit(self, event: RunEvent) -> PubAck:
        tell(event)
        return await self.publish(subjects.event(event.thread_id, event.type.value), event)

    async def emit_soon(self, event: RunEvent) -> asyncio.Future[PubAck]:
        tell(event)
        return await self.publish_soon(subjects.event(event.thread_id, event.type.value), event)

    def encode_github(self, event: GithubEvent) -> bytes:
        """``event`` as :meth:`github` publishes it (see :meth:`encode`)."""
        return self.encode(subjects.github(event.event), event)

    async def github(self, event: GithubEvent, *, bounded: bool = True, encoded: bytes | None = None) -> PubAck:
        """Forward ``event``; ``encoded``: the event as :meth:`encode_github` returned it."""
        envelope = encoded if encoded is not None else event
        return await self.publish(subjects.github(event.event), envelope, msg_id=event.delivery_id, bounded=bounded)

    async def close(self) -> None:
        await self.nc.drain()
