"""The ``drydock`` command: ``dev``, ``serve SERVICE``, ``provision``, ``version``, ``asyncapi``,
``nats-permissions``."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from nats.errors import Error as NatsError

import drydock
from drydock import services
from drydock.bus import BusUnavailable, connect_nats, provision, topology
from drydock.bus.asyncapi import asyncapi_document
from drydock.bus.permissions import nats_authorization, password_variables
from drydock.config import ConfigError, Settings, load_settings
from drydock.errors import describe
from drydock.http import ListenError, run_with_health
from drydock.infra.embedded import EmbeddedServerError
from drydock.infra.redis import StoreUnavailable
from drydock.runtime import Runtime, open_runtime
from drydock.telemetry import configure_logging

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drydock", description="Self-hosted coding agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="run every service in one process, with embedded NATS and Valkey if unset")
    dev.add_argument("--fresh", action="store_true", help="start the embedded servers empty (remove .drydock/dev)")
    commands.add_parser("provision", help="create or update the NATS streams and consumers, then exit")
    commands.add_parser(
        "nats-permissions", help="print the nats-server authorization block: one user per service, passwords from $ENV"
    )
    serve = commands.add_parser("serve", help="run one service")
    serve.add_argument("service", help="the service's name, e.g. web, ingress, coder-worker")
    commands.add_parser("version", help="print the version")
    commands.add_parser("asyncapi", help="print the AsyncAPI description of the bus")
    return parser


async def provision_only(settings: Settings) -> None:
    """Create or update every stream and consumer (as ``DRYDOCK_NATS_USER``, who may), then return."""
    nc = await connect_nats(settings.nats, name="drydock-provision")
    try:
        await provision(nc.jetstream(timeout=10), topology(settings.nats, settings.snapshots))
    except (NatsError, TimeoutError) as error:
        who = settings.nats.user or "the URL's user"
        raise BusUnavailable(f"cannot provision the streams as {who}: {describe(error)}") from None
    finally:
        await nc.close()
    print("drydock provision: streams and consumers are up to date", flush=True)


async def serve(settings: Settings, name: str) -> None:
    service = services.get(name)
    async with open_runtime(settings, name=name) as runtime:
        print(f"drydock {name}: {service.listens(runtime)}", flush=True)
        await run_service(service, runtime)


async def run_service(service: services.Service, runtime: Runtime) -> None:
    """Run ``service``; one without an HTTP app of its own gets the health listener beside it
    (``DRYDOCK_HTTP_HEALTH_LISTENER``, on by default), so that probes can reach every service."""
    http = runtime.settings.http
    if service.has_http or not http.health_listener:
        await service.run(runtime)
        return
    print(f"drydock {service.name}: health and metrics on http://{http.host}:{http.port}", flush=True)
    await run_with_health(service.name, service.run(runtime), runtime)


def run_until_signalled(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main``; SIGINT and SIGTERM cancel it so that it shuts down in order."""

    async def wrapper() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        try:
            await main
        except asyncio.CancelledError:
            print("drydock: stopped", file=sys.stderr, flush=True)

    # uvloop (installed with uvicorn[standard]) serves HTTP about twice as fast as the default loop.
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(wrapper())


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop the services run on: uvloop when installed, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(drydock.__version__)
        return
    if args.command == "asyncapi":
        print(json.dumps(asyncapi_document(), indent=2))
        return
    if args.command == "nats-permissions":
        print(nats_authorization(password_variables()), end="")
        return
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    configure_logging(settings.log, settings.log_format)
    try:
        if args.command == "dev":
            from drydock.dev import run_dev

            run_until_signalled(run_dev(settings, fresh=args.fresh))
        elif args.command == "provision":
            run_until_signalled(provision_only(settings))
        else:
            run_until_signalled(serve(settings, args.service))
    except services.UnknownService as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    except (BusUnavailable, StoreUnavailable, EmbeddedServerError, ListenError) as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_UNAVAILABLE) from None
