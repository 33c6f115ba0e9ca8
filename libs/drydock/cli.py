"""The ``drydock`` command: ``dev``, ``serve SERVICE``, ``version``, ``asyncapi``."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import drydock
from drydock import services
from drydock.bus import BusUnavailable
from drydock.bus.asyncapi import asyncapi_document
from drydock.config import ConfigError, Environment, Settings, load_settings
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
    commands.add_parser("dev", help="run every service in one process, with embedded NATS and Valkey if unset")
    serve = commands.add_parser("serve", help="run one service")
    serve.add_argument("service", help="the service's name, e.g. web, ingress, coder-worker")
    commands.add_parser("version", help="print the version")
    commands.add_parser("asyncapi", help="print the AsyncAPI description of the bus")
    return parser


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


class MissingCryptoKeys(RuntimeError):
    """Production without ``DRYDOCK_CRYPTO_KEYS`` for a service that needs them."""


def _with_crypto_keys(settings: Settings, args: argparse.Namespace) -> Settings:
    """Settings with ``DRYDOCK_CRYPTO_KEYS`` where the services to run need them: the configured
    keys; in development, the generated development key; in production, :class:`MissingCryptoKeys`."""
    if settings.crypto.keys:
        return settings
    chosen = [services.get(args.service)] if args.command == "serve" else list(services.available().values())
    needing = [service.name for service in chosen if service.needs_crypto_keys]
    if not needing:
        return settings
    if settings.environment is Environment.PRODUCTION:
        raise MissingCryptoKeys(
            f"DRYDOCK_CRYPTO_KEYS is unset; {', '.join(needing)} cannot sign or verify grants, sessions and "
            "sandbox records without it (a JSON list of Fernet keys, newest first)"
        )
    from drydock.dev import with_development_keys

    return with_development_keys(settings)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(drydock.__version__)
        return
    if args.command == "asyncapi":
        print(json.dumps(asyncapi_document(), indent=2))
        return
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    configure_logging(settings.log, settings.log_format)
    try:
        settings = _with_crypto_keys(settings, args)
        if args.command == "dev":
            from drydock.dev import run_dev

            run_until_signalled(run_dev(settings))
        else:
            run_until_signalled(serve(settings, args.service))
    except (services.UnknownService, MissingCryptoKeys) as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    except (BusUnavailable, StoreUnavailable, EmbeddedServerError, ListenError) as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_UNAVAILABLE) from None
