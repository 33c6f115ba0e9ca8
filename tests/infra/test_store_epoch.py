"""The store epoch on a private embedded NATS and Valkey: written at the first provisioning,
kept across restarts of the services, reported when Redis loses it, and re-established only by
``drydock provision --accept-store-loss``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from drydock.cli import EXIT_STORE_LOST, provision_store
from drydock.config import Settings, load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import connect_redis
from drydock.runtime import open_runtime


@contextlib.asynccontextmanager
async def own_settings() -> AsyncIterator[Settings]:
    async with embedded_infrastructure() as urls:
        yield load_settings(nats={"url": urls.nats}, redis={"url": urls.redis})


class TestStoreEpoch:
    async def test_a_restarted_service_keeps_the_epoch_it_found(self) -> None:
        async with own_settings() as settings:
            async with open_runtime(settings, name="first") as first:
                assert first.store is not None
                epoch = first.store.expected
            async with open_runtime(settings, name="second") as second:
                assert second.store is not None
                assert second.store.expected == epoch
                assert await second.store.check() is None

    async def test_a_wiped_store_stays_lost_across_a_restart_until_the_loss_is_accepted(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        async with own_settings() as settings:
            async with open_runtime(settings, name="first"):
                pass
            redis = await connect_redis(settings.redis)
            await redis.flushall()
            await redis.aclose()

            async with open_runtime(settings, name="restarted") as restarted:
                assert restarted.store is not None
                assert (await restarted.store.check() or "").startswith("the store lost its data")
            with pytest.raises(SystemExit) as exited:
                await provision_store(settings, accept_store_loss=False)
            assert exited.value.code == EXIT_STORE_LOST

            await provision_store(settings, accept_store_loss=True)
            assert "store epoch" in capsys.readouterr().out
            async with open_runtime(settings, name="after") as after:
                assert after.store is not None
                assert await after.store.check() is None
