"""The ingress's floor: a bare ASGI app doing only the irreducible work of a GitHub webhook, on
the same HTTP server (uvicorn with Drydock's configuration, uvloop), Redis client (one
:class:`~drydock.infra.redis.Batch`) and NATS client (JetStream's asynchronous publish) as
``drydock serve ingress``:

read the body, verify its HMAC-SHA256 signature, parse it (orjson), one Redis round trip for
the claim and five reads, two JetStream publishes awaited for their acknowledgements (the inbox
message, then the wake) and a 200 with a small JSON body.

``python -m bench.floor_ingress PORT`` serves it on ``127.0.0.1:PORT`` with ``DRYDOCK_NATS_URL``,
``DRYDOCK_REDIS_URL`` and ``DRYDOCK_GITHUB_WEBHOOK_SECRET`` from the environment, until SIGTERM
(uvicorn's own signal handling).
It exists to be measured against (``pdm run bench ingress``), not to be deployed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import sys
from typing import Any

import nats
import orjson
import uvicorn
from starlette.types import Receive, Scope, Send

from drydock.cli import event_loop_factory
from drydock.config import load_settings
from drydock.http import server_config
from drydock.infra.redis import Batch, BatchConnections, Keys, redis_client

WAKE_BYTES = b'{"role":"coder","reason":"mention"}'


class FloorIngress:
    """The floor app; :meth:`start` connects it, :meth:`close` disconnects it."""

    def __init__(self, secret: str, prefix: str, *, subjects: str = "drydock") -> None:
        """``subjects``: the first token of the subjects published on (``drydock``: the ingress's
        streams; another one keeps the wakes away from a running worker)."""
        self._secret = secret.encode()
        self._subjects = subjects
        self._keys = Keys(prefix)
        self._batches: BatchConnections | None = None
        self._nc: Any = None
        self._js: Any = None

    async def start(self, nats_url: str, redis_url: str) -> None:
        settings = load_settings(redis={"url": redis_url})
        self._redis = redis_client(settings.redis, redis_url, decode_responses=True, socket_timeout=None)
        self._batches = BatchConnections(self._redis)
        self._nc = await nats.connect(nats_url)
        self._js = self._nc.jetstream()

    async def close(self) -> None:
        if self._batches is not None:
            await self._batches.aclose()
            await self._redis.aclose()
        if self._nc is not None:
            await self._nc.drain()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        headers = dict(scope["headers"])
        if scope["path"] == "/readyz":
            await _answer(send, 200, b'{"status":"ready"}')
            return
        expected = "sha256=" + hmac.new(self._secret, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), headers.get(b"x-hub-signature-256", b"")):
            await _answer(send, 401, b'{"error":"bad signature"}')
            return
        payload = orjson.loads(body)
        delivery = headers[b"x-github-delivery"].decode()
        repository = payload["repository"]["full_name"]
        number = payload["issue"]["number"]
        sender = str(payload["sender"]["id"])
        thread_id = f"github-{repository.replace('/', '-')}-{number}"
        assert self._batches is not None
        batch = Batch(self._batches)
        batch.set(self._keys.delivery("github", delivery), "claimed", px=600_000, nx=True)
        batch.get(self._keys.team())
        batch.get(self._keys.store_epoch())
        batch.get(self._keys.account_link("github", sender))
        batch.get(self._keys.repository("github.com", repository))
        batch.hmget(self._keys.thread(thread_id), ["kind", "repository"])
        await batch.execute()
        inbox = orjson.dumps({"thread_id": thread_id, "delivery_id": delivery, "text": payload["comment"]["body"]})
        acknowledged = await self._js.publish_async(
            f"{self._subjects}.inbox.{thread_id}", inbox, headers={"Nats-Msg-Id": f"{thread_id}:{delivery}"}
        )
        await acknowledged
        woken = await self._js.publish_async(
            f"{self._subjects}.run.coder.{thread_id}",
            WAKE_BYTES,
            headers={"Nats-Msg-Id": f"wake:{thread_id}:{delivery}"},
        )
        await woken
        await _answer(send, 200, orjson.dumps({"status": "accepted", "delivery": delivery, "thread_id": thread_id}))


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve(port: int) -> None:
    settings = load_settings()
    assert settings.nats.url is not None
    assert settings.redis.url is not None
    assert settings.github.webhook_secret is not None
    app = FloorIngress(settings.github.webhook_secret.get_secret_value(), settings.redis.key_prefix)
    await app.start(str(settings.nats.url), str(settings.redis.url))
    server = uvicorn.Server(server_config(app, settings.http, host="127.0.0.1", port=port))
    try:
        await server.serve()
    finally:
        await app.close()


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(serve(int(sys.argv[1])))
