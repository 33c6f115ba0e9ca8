"""The dashboard under load: one ``drydock serve dashboard`` process (uvicorn, one event loop) on
embedded NATS and Valkey, driven over HTTP from this process.

- Thread list: 100,000 threads stored (50 repositories, four channels, 200 owners, mixed states);
  ``GET /api/v1/threads`` one request at a time for an administrator (newest page, filtered by
  repository, by state and channel, a page deep in the list), for a person who sees three
  repositories (their newest page, a repository they may not see) and for one who sees none of
  the threads. Target: p99 < 50 ms.
- Live events: 200 viewers follow one thread's server-sent-event stream; events are published
  on the bus ten a second; the latency from publish to each viewer, and to the last of the 200,
  is measured.

Run: ``pdm run bench dashboard``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import aiohttp
from cryptography.fernet import Fernet

from bench.harness import Figures, report
from drydock.accounts import AccountsStore, RepositorySettings
from drydock.bus import Bus, EventType, RunEvent, connect_nats
from drydock.config import load_settings
from drydock.embedded import EmbeddedUrls, embedded_infrastructure, free_port
from drydock.infra.redis import Keys, connect_redis
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.threads.fields import CHANNEL, CREATED_AT, OWNER, REPOSITORY, TITLE
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.states import ThreadState, ThreadStates
from services.dashboard.auth.sessions import SessionStore

THREADS = 100_000
REPOSITORIES = [f"acme/repo-{number:02}" for number in range(50)]
CHANNELS = ["github", "slack", "linear", "dashboard"]
OWNERS = [f"gh-{number}" for number in range(200)]
STATES = [ThreadState.IDLE, ThreadState.IDLE, ThreadState.IDLE, ThreadState.RUNNING, ThreadState.FAILED, None]
LIST_REQUESTS = 400
LIST_P99_TARGET_MS = 50.0
VIEWERS = 200
EVENTS = 100
EVENT_RATE = 10.0


async def seed(redis_url: str, prefix: str) -> tuple[str, str]:
    """``THREADS`` threads; returns one thread id and a person who sees three repositories."""
    settings = load_settings(redis={"url": redis_url})
    redis = await connect_redis(settings.redis)
    keys = Keys(prefix)
    metadata, states = ThreadMetadataStore(redis, keys), ThreadStates(redis, keys)
    accounts = AccountsStore(redis, keys, host="github.com")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        for repository in REPOSITORIES:
            await accounts.save_repository(RepositorySettings(full_name=repository))

        async def create(number: int) -> str:
            thread_id = str(uuid.uuid4())
            fields = {
                REPOSITORY: REPOSITORIES[number % len(REPOSITORIES)],
                CHANNEL: CHANNELS[number % len(CHANNELS)],
                OWNER: OWNERS[number % len(OWNERS)],
                CREATED_AT: (start + timedelta(seconds=number * 37)).isoformat(),
                TITLE: f"Thread {number}",
            }
            await metadata.create(thread_id, kind=Role.CODER, fields=fields)
            state = STATES[number % len(STATES)]
            if state is not None:
                await states.set(thread_id, state)
            return thread_id

        created: list[str] = []
        for batch in range(0, THREADS, 50):
            created += await asyncio.gather(*(create(number) for number in range(batch, min(batch + 50, THREADS))))
        await redis.set(keys.threads_indexed(), "bench")
        await redis.sadd(keys.user_repositories("gh-restricted"), "", *REPOSITORIES[:3])
        await redis.sadd(keys.user_repositories("gh-nobody"), "")
        return created[-1], "gh-restricted"
    finally:
        await redis.aclose()


CRYPTO_KEY = Fernet.generate_key().decode()
"""The dashboard process's DRYDOCK_CRYPTO_KEYS, so that sessions made here verify there."""


@contextlib.asynccontextmanager
async def dashboard_process(urls: EmbeddedUrls, prefix: str) -> AsyncIterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DRYDOCK_")} | {
        "DRYDOCK_NATS_URL": str(urls.nats),
        "DRYDOCK_REDIS_URL": str(urls.redis),
        "DRYDOCK_REDIS_KEY_PREFIX": prefix,
        "DRYDOCK_HTTP_PORT": str(port),
        # Not the default: another process on this machine may hold it.
        "DRYDOCK_HTTP_METRICS_PORT": str(free_port()),
        "DRYDOCK_DASHBOARD_PUBLIC_URL": url,
        "DRYDOCK_DASHBOARD_DEV_LOGIN": "true",
        "DRYDOCK_DASHBOARD_COOKIE_SECURE": "false",
        "DRYDOCK_DASHBOARD_EVENT_STREAM_LIFETIME": "600",
        "DRYDOCK_LOG_LEVEL": "WARNING",
        "DRYDOCK_CRYPTO_KEYS": json.dumps([CRYPTO_KEY]),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drydock", "serve", "dashboard", env=environment, stdout=asyncio.subprocess.DEVNULL
    )
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(600):
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(url + "/readyz") as response:
                        if response.status == 200:
                            break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("the dashboard did not become ready")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)


async def signed_in(url: str, login: str, *, admin: bool) -> aiohttp.ClientSession:
    # The jar keeps cookies of IP hosts only when "unsafe".
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=VIEWERS + 10), cookie_jar=aiohttp.CookieJar(unsafe=True)
    )
    async with session.get(url + "/login") as page:
        token = re.search(r'name="csrf_token" value="([^"]+)"', await page.text())
    assert token is not None
    form = {"login": login, "csrf_token": token.group(1)} | ({"admin": "true"} if admin else {})
    async with session.post(url + "/auth/dev", data=form) as answer:
        assert answer.status == 200, answer.status
    return session


async def session_as(url: str, redis_url: str, prefix: str, user_id: str) -> aiohttp.ClientSession:
    """A session of a GitHub person (its access is what :func:`seed` stored)."""
    redis = await connect_redis(load_settings(redis={"url": redis_url}).redis)
    try:
        token, _ = await SessionStore(redis, Keys(prefix), ServerKeys([CRYPTO_KEY]), ttl=timedelta(hours=1)).create(
            user_id=user_id, provider="github", login="restricted"
        )
    finally:
        await redis.aclose()
    return aiohttp.ClientSession(cookies={"drydock_session": token})


async def time_list(session: aiohttp.ClientSession, url: str, name: str, query: str) -> Figures:
    latencies: list[float] = []
    started = time.perf_counter()
    for index in range(LIST_REQUESTS + 20):
        begin = time.perf_counter()
        async with session.get(f"{url}/api/v1/threads?{query}") as answer:
            body = await answer.read()
            assert answer.status == 200, body[:300]
        if index >= 20:
            latencies.append((time.perf_counter() - begin) * 1000)
    figures = Figures(name, LIST_REQUESTS, time.perf_counter() - started, latencies)
    verdict = "met" if figures.percentile(99) < LIST_P99_TARGET_MS else "MISSED"
    report(figures)
    print(f"  p99 target < {LIST_P99_TARGET_MS:.0f} ms: {verdict} ({len(json.loads(body)['threads'])} threads a page)")
    return figures


async def deep_cursor(session: aiohttp.ClientSession, url: str, pages: int) -> str:
    cursor = ""
    for _ in range(pages):
        async with session.get(f"{url}/api/v1/threads?limit=50{cursor}") as answer:
            cursor = "&cursor=" + (await answer.json())["next_cursor"]
    return cursor


async def thread_list(url: str, redis_url: str, prefix: str, restricted: str) -> None:
    admin = await signed_in(url, "root", admin=True)
    person = await session_as(url, redis_url, prefix, restricted)
    nobody = await session_as(url, redis_url, prefix, "gh-nobody")
    try:
        await time_list(admin, url, "list, administrator, newest 50", "limit=50")
        await time_list(admin, url, "list, administrator, one repository", "repository=acme/repo-07")
        await time_list(admin, url, "list, administrator, running on slack", "state=running&channel=slack")
        await time_list(admin, url, "list, administrator, page 40", "limit=50" + await deep_cursor(admin, url, 40))
        await time_list(person, url, "list, sees 3 repositories, newest 50", "limit=50")
        await time_list(person, url, "list, sees 3 repositories, another repo", "repository=acme/repo-40")
        await time_list(nobody, url, f"list, sees none of the {THREADS:,}", "limit=50")
    finally:
        await admin.close()
        await person.close()
        await nobody.close()


async def live_events(url: str, nats_url: str, thread_id: str) -> None:
    session = await signed_in(url, "root", admin=True)
    nc = await connect_nats(load_settings(nats={"url": nats_url}).nats, name="bench-dashboard")
    bus = Bus(nc)
    received: dict[int, list[float]] = {}
    connected = asyncio.Event()
    ready = 0

    async def viewer() -> None:
        nonlocal ready
        async with session.get(f"{url}/api/v1/threads/{thread_id}/events/stream") as stream:
            assert stream.status == 200, (stream.status, await stream.text())
            ready += 1
            if ready == VIEWERS:
                connected.set()
            async for raw in stream.content:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    data = json.loads(line[6:])["data"]
                    received.setdefault(data["n"], []).append(time.time() - data["sent"])
                    if data["n"] == EVENTS - 1:
                        return

    try:
        viewers = [asyncio.create_task(viewer()) for _ in range(VIEWERS)]
        await asyncio.wait_for(connected.wait(), 60)
        await asyncio.sleep(1.0)
        started = time.perf_counter()
        for number in range(EVENTS):
            event = RunEvent(
                thread_id=thread_id, run_id="bench", type=EventType.TOOL_CALL, data={"n": number, "sent": time.time()}
            )
            await bus.emit(event)
            await asyncio.sleep(max(0.0, started + (number + 1) / EVENT_RATE - time.perf_counter()))
        await asyncio.wait_for(asyncio.gather(*viewers), 60)
        seconds = time.perf_counter() - started
        every = [latency * 1000 for latencies in received.values() for latency in latencies]
        last = [max(latencies) * 1000 for latencies in received.values()]
        complete = sum(len(latencies) == VIEWERS for latencies in received.values())
        report(Figures(f"live events, {VIEWERS} viewers, each delivery", len(every), seconds, every))
        report(Figures(f"live events, {VIEWERS} viewers, the last viewer", len(last), seconds, last))
        print(f"  {complete} of {EVENTS} events reached all {VIEWERS} viewers ({len(every)} deliveries)", flush=True)
    finally:
        await session.close()
        await nc.close()


async def main() -> None:
    async with embedded_infrastructure() as urls:
        prefix = f"bench-{uuid.uuid4().hex[:6]}"
        seeding = time.perf_counter()
        thread_id, restricted = await seed(str(urls.redis), prefix)
        print(f"  seeded {THREADS} threads in {time.perf_counter() - seeding:.1f} s", flush=True)
        async with dashboard_process(urls, prefix) as url:
            await thread_list(url, str(urls.redis), prefix, restricted)
            await live_events(url, str(urls.nats), thread_id)


if __name__ == "__main__":
    asyncio.run(main())
