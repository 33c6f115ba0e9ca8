"""The ``drydock`` command: ``dev``, ``serve SERVICE``, ``config check``, ``provision``, ``version``,
``asyncapi``, ``nats-permissions``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Coroutine
from typing import Any

import structlog
from nats.errors import Error as NatsError

import drydock
from drydock import services
from drydock.bus import BusUnavailable
from drydock.bus.asyncapi import asyncapi_document
from drydock.bus.permissions import nats_authorization, password_variables
from drydock.config import ConfigError, Environment, Settings, load_settings, unknown_variables
from drydock.configuration_report import configuration_report
from drydock.embedded import EmbeddedServerError
from drydock.errors import describe
from drydock.http import ListenError, run_with_health
from drydock.infra.redis import StoreUnavailable
from drydock.runtime import Runtime, open_runtime
from drydock.telemetry import configure_logging
from drydock.telemetry.metrics import MULTIPROCESS_DIRECTORY
from drydock.telemetry.tracing import configure_tracing

log = structlog.get_logger(__name__)

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 1
EXIT_STORE_LOST = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drydock", description="Self-hosted coding agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="run every service in one process, with embedded NATS and Valkey if unset")
    dev.add_argument("--fresh", action="store_true", help="start the embedded servers empty (remove .drydock/dev)")
    provision = commands.add_parser(
        "provision", help="create or update the NATS streams and consumers and the store epoch, then exit"
    )
    provision.add_argument(
        "--accept-store-loss",
        action="store_true",
        help="adopt a store that lost its data (wiped or replaced): services become ready again",
    )
    commands.add_parser(
        "nats-permissions", help="print the nats-server authorization block: one user per service, passwords from $ENV"
    )
    serve = commands.add_parser(
        "serve",
        help="run one service",
        add_help=False,
        description="Run one service until SIGINT or SIGTERM.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("-h", "--help", action=_ServeHelp, help="show this help and the services, then exit")
    serve.add_argument("service", metavar="SERVICE", help="one of the services listed by --help")
    config = commands.add_parser("config", help="inspect the configuration")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    config_commands.add_parser(
        "check", help="print the effective configuration (secrets masked) and what is not configured"
    )
    commands.add_parser("version", help="print the version")
    commands.add_parser("asyncapi", help="print the AsyncAPI description of the bus")
    return parser


class _ServeHelp(argparse.Action):
    """``serve --help``: the usual help plus every service with its description, loaded only here
    (importing every service costs seconds that no other command should pay)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        listed = "\n".join(f"  {name:<20} {service.description}" for name, service in services.available().items())
        parser.epilog = f"services:\n{listed}"
        parser.print_help()
        parser.exit()


async def serve(settings: Settings, name: str) -> None:
    service = services.get(name)
    http = settings.http
    if service.http_workers and http.workers > 1 and http.worker_index == 0:
        await serve_workers(name, http.workers)
        return
    async with open_runtime(settings, name=name) as runtime:
        print(f"drydock {name}: {service.listens(runtime)}", flush=True)
        await run_service(service, runtime)


async def serve_workers(name: str, count: int) -> None:
    """Run ``count`` processes of ``drydock serve NAME`` (``DRYDOCK_HTTP_WORKER_INDEX`` 1 to
    ``count``), which share its port, until cancelled (then each is stopped with SIGTERM) or until
    one of them ends: then the others are stopped, and this one exits with its code."""
    with tempfile.TemporaryDirectory(prefix="drydock-metrics-") as directory:
        environment = dict(os.environ) | {MULTIPROCESS_DIRECTORY: directory}
        workers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "drydock",
                "serve",
                name,
                env=environment | {"DRYDOCK_HTTP_WORKER_INDEX": str(index)},
            )
            for index in range(1, count + 1)
        ]
        print(f"drydock {name}: {count} worker processes ({', '.join(str(w.pid) for w in workers)})", flush=True)
        waits = [asyncio.create_task(worker.wait()) for worker in workers]
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for worker in workers:
                if worker.returncode is None:
                    worker.send_signal(signal.SIGTERM)
            await asyncio.gather(*waits, return_exceptions=True)
    code = next(task.result() for task in done)
    log.error("a worker process ended; stopped the others", service=name, exit_code=code)
    raise SystemExit(code or EXIT_UNAVAILABLE)


async def provision_store(settings: Settings, *, accept_store_loss: bool) -> None:
    """Create or update every stream and consumer and the store epoch (as ``DRYDOCK_NATS_USER``,
    who may), then return; with ``accept_store_loss``, write a new store epoch."""
    settings = settings.model_copy(update={"nats": settings.nats.model_copy(update={"provision": True})})
    try:
        async with open_runtime(settings, name="provision", accept_store_loss=accept_store_loss) as runtime:
            assert runtime.store is not None
            lost = await runtime.store.check()
    except (NatsError, TimeoutError) as error:
        who = settings.nats.user or "the URL's user"
        raise BusUnavailable(f"cannot provision the streams as {who}: {describe(error)}") from None
    done = f"streams and consumers are up to date; store epoch {runtime.store.expected}"
    print(f"drydock provision: {lost or done}", flush=True)
    if lost is not None:
        raise SystemExit(EXIT_STORE_LOST)


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


def _check(settings: Settings, args: argparse.Namespace) -> None:
    """Run the settings checks of every service about to start, before anything starts."""
    if args.command == "dev":
        chosen = [service for service in services.available().values() if service.in_dev]
    elif args.command == "serve":
        chosen = [services.get(args.service)]
    else:
        return
    for service in chosen:
        if service.check is not None:
            service.check(settings)
    missing = [name for name, url in (("NATS", settings.nats.url), ("REDIS", settings.redis.url)) if url is None]
    if args.command == "serve" and missing:
        raise ConfigError(
            f"{' and '.join(f'DRYDOCK_{name}_URL' for name in missing)} not set: `drydock serve` runs one "
            "service against NATS and Redis that run elsewhere; `pdm run dev` starts embedded ones with "
            "every service"
        )


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
    if args.command == "nats-permissions":
        print(nats_authorization(password_variables()), end="")
        return
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    if args.command == "config":
        print(configuration_report(settings))
        return
    configure_logging(settings.log, settings.log_format)
    try:
        configure_tracing(os.environ, service="drydock" if args.command != "serve" else f"drydock-{args.service}")
    except ConfigError as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    for name, closest in unknown_variables(os.environ):
        log.warning("unknown setting ignored" + (f"; did you mean {closest}?" if closest else ""), variable=name)
    try:
        _check(settings, args)
    except (ConfigError, services.UnknownService) as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    try:
        if args.command == "provision":
            run_until_signalled(provision_store(settings, accept_store_loss=args.accept_store_loss))
            return
        settings = _with_crypto_keys(settings, args)
        if args.command == "dev":
            from drydock.dev import run_dev

            run_until_signalled(run_dev(settings, fresh=args.fresh))
        else:
            run_until_signalled(serve(settings, args.service))
    except MissingCryptoKeys as error:
        print(f"drydock: {error}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    except (ListenError, BusUnavailable, StoreUnavailable, EmbeddedServerError, BaseExceptionGroup) as error:
        # Services run in a task group, so a start-up error arrives wrapped in an exception group.
        found = _start_up_error(error)
        if found is None:
            raise
        print(f"drydock: {found}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG if isinstance(found, ListenError) else EXIT_UNAVAILABLE) from None


def _start_up_error(error: BaseException) -> BaseException | None:
    """The start-up error with a message of its own in ``error``, looking inside exception groups."""
    if isinstance(error, ListenError | BusUnavailable | StoreUnavailable | EmbeddedServerError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _start_up_error(inner)
            if found is not None:
                return found
    return None
