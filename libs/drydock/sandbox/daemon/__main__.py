"""``python -m drydock.sandbox.daemon``: serve one sandbox.

The token is read from standard input (first line) or from ``--token-file``; never from the
environment or the command line, because commands run by the daemon inherit its environment
and can read every process's command line. A token file is deleted after reading when the
daemon may delete it.

Listening: ``--listen-fd N`` serves on an already bound and listening socket inherited from the
provider (no port race, ready to accept before the daemon has started); otherwise ``--host`` and
``--port``.

Relays: each ``--relay HOST:PORT=PATH`` listens on ``HOST:PORT`` (inside the sandbox's network
namespace) and carries connections to the Unix socket ``PATH``: how an isolated sandbox reaches
the credential proxy (see :mod:`drydock.sandbox.daemon.relay`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import socket
import sys
from pathlib import Path

from drydock.sandbox.daemon.app import DaemonConfig
from drydock.sandbox.daemon.protocol import DEFAULT_PORT
from drydock.sandbox.daemon.relay import Relay
from drydock.sandbox.daemon.server import serve

PR_SET_DUMPABLE = 4


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m drydock.sandbox.daemon", description=__doc__)
    parser.add_argument("--workspace", type=Path, required=True, help="the directory files and commands live in")
    parser.add_argument(
        "--root", type=Path, action="append", default=[], help="another directory file transfer may touch (repeatable)"
    )
    parser.add_argument("--token-file", type=Path, help="read the token from this file (default: standard input)")
    parser.add_argument("--listen-fd", type=int, help="serve on this inherited listening socket")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--relay", type=Relay.parse, action="append", default=[], help="HOST:PORT=UNIX_SOCKET (repeatable)"
    )
    parser.add_argument("--shell", help="the shell commands run with (default: bash if present, else sh)")
    parser.add_argument("--max-concurrent-execs", type=int, default=8)
    parser.add_argument("--max-queued-execs", type=int, default=32)
    parser.add_argument("--default-timeout", type=float, default=120.0)
    parser.add_argument("--max-timeout", type=float, default=3600.0)
    parser.add_argument("--output-cap", type=int, default=1024 * 1024, help="bytes of output kept per command")
    parser.add_argument("--max-file-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--max-request-bytes", type=int, default=256 * 1024 * 1024)
    parser.add_argument(
        "--dumpable",
        action="store_true",
        help="stay dumpable: only for a sandbox without isolation, whose commands reach the host anyway",
    )
    return parser.parse_args(argv)


def _not_dumpable() -> None:
    """Keep the commands, which run as the daemon's user, out of the daemon: a dumpable process
    lets its own user read its memory (the token) and take its sockets (``/proc/PID/mem``,
    ``pidfd_getfd``); a process that is not needs a capability the sandbox does not have."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_DUMPABLE) failed: {os.strerror(ctypes.get_errno())}")


def _read_token(token_file: Path | None) -> str:
    if token_file is None:
        return sys.stdin.readline().strip()
    token = token_file.read_text().strip()
    with contextlib.suppress(OSError):
        token_file.unlink()
    return token


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    if not args.dumpable:
        _not_dumpable()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    token = _read_token(args.token_file)
    if not token:
        raise SystemExit("no token: pass it on standard input or with --token-file")
    if not args.workspace.is_dir():
        raise SystemExit(f"workspace {args.workspace} is not a directory")
    shell = args.shell or shutil.which("bash") or "/bin/sh"
    try:
        config = DaemonConfig(
            token=token,
            workspace=args.workspace,
            extra_roots=tuple(args.root),
            shell=shell,
            max_concurrent_execs=args.max_concurrent_execs,
            max_queued_execs=args.max_queued_execs,
            default_timeout=args.default_timeout,
            max_timeout=args.max_timeout,
            output_cap=args.output_cap,
            max_file_bytes=args.max_file_bytes,
            max_request_bytes=args.max_request_bytes,
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    sock = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
    asyncio.run(serve(config, sock=sock, host=args.host, port=args.port, relays=args.relay))


if __name__ == "__main__":
    main()
