from __future__ import annotations

import asyncio
import gc
import importlib
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock import services
from drydock.bus import Bus
from drydock.config import load_settings
from drydock.embedded import EmbeddedUrls, free_port
from drydock.infra.collector import YOUNG_THRESHOLD, freeze_startup_objects
from drydock.infra.redis import Keys
from drydock.runtime import Runtime


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def in_view(target: object) -> bool:
    return any(candidate is target for candidate in gc.get_objects())


@pytest.mark.usefixtures("collector")
class TestFreezeStartupObjects:
    def test_objects_alive_at_start_up_leave_the_collectors_view(self) -> None:
        startup = Node()
        assert in_view(startup)
        freeze_startup_objects()
        assert gc.get_freeze_count() > 0
        assert not in_view(startup)

    def test_objects_made_afterwards_stay_in_view_and_their_cycles_are_collected(self) -> None:
        freeze_startup_objects()
        first, second = Node(), Node()
        first.other, second.other = second, first
        assert in_view(first)
        gone = weakref.ref(first)
        del first, second
        gc.collect()
        assert gone() is None

    def test_the_young_generation_is_collected_less_often_and_the_older_ones_as_before(self) -> None:
        _, older, oldest = gc.get_threshold()
        freeze_startup_objects()
        assert gc.get_threshold() == (YOUNG_THRESHOLD, older, oldest)


FREEZING_SERVICES = {
    "ingress": "services.ingress.app",
    "dashboard": "services.dashboard.app",
    "credential-proxy": "services.credential_proxy",
    "autofix-controller": "services.autofix_controller",
    "coder-worker": "services.coder_worker",
    "reviewer-worker": "services.reviewer_worker",
    "analyzer-worker": "services.analyzer_worker",
}
"""Each long-running service, and the module its ``run`` finds the collector's helper in."""


@pytest.mark.parametrize(("name", "module"), FREEZING_SERVICES.items())
async def test_every_long_running_service_freezes_its_start_up_objects_before_it_serves(
    name: str,
    module: str,
    infra: EmbeddedUrls,
    crypto_key: str,
    nats_client: NatsClient,
    bus: Bus,
    redis: Redis,
    keys: Keys,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen = asyncio.Event()
    monkeypatch.setattr(importlib.import_module(module), "freeze_startup_objects", frozen.set)
    settings = load_settings(
        nats={"url": infra.nats},
        redis={"url": infra.redis},
        crypto={"keys": [crypto_key]},
        http={"port": free_port(), "metrics_port": free_port()},
        proxy={"port": free_port(), "egress_port": free_port(), "socket_dir": str(tmp_path / "proxy")},
        sandbox={"local_root": str(tmp_path / "sandboxes")},
    )
    serving = asyncio.create_task(services.get(name).run(Runtime(settings, nats_client, bus, redis, keys)))
    waiting = asyncio.create_task(frozen.wait())
    try:
        await asyncio.wait({serving, waiting}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        ended = f"; it ended: {serving.exception()!r}" if serving.done() else ""
        assert frozen.is_set(), f"{name} did not freeze its start-up objects within 60 s{ended}"
    finally:
        for task in (serving, waiting):
            task.cancel()
        await asyncio.gather(serving, waiting, return_exceptions=True)
