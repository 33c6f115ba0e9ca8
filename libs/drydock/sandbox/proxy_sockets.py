"""The credential proxy's Unix sockets: how local sandboxes, which have no network of their own
but loopback, reach the proxy on the same host.

The proxy listens on ``reverse.sock`` and ``egress.sock`` in one directory (``proxy.socket_dir``)
besides its TCP ports. The local provider binds the directory (not the sockets) read-only into
each sandbox, so a socket the restarted proxy put in place is seen by sandboxes started before.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from drydock.config import CredentialProxySettings

REVERSE_SOCKET = "reverse.sock"
EGRESS_SOCKET = "egress.sock"


class SocketDirectoryRefused(PermissionError):
    """The socket directory is not a directory of this user's that only this user can enter."""


def socket_directory(settings: CredentialProxySettings) -> Path:
    """``settings.socket_dir``, or ``<tmp>/drydock-proxy`` when unset."""
    return Path(settings.socket_dir) if settings.socket_dir else Path(tempfile.gettempdir()) / "drydock-proxy"


def prepare_socket_directory(directory: Path) -> Path:
    """Create ``directory`` (mode 0700) if missing; refuse one that another user owns or can enter,
    since whoever can put a socket there would receive the sandboxes' git and egress traffic."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise SocketDirectoryRefused(f"{directory} is not a directory owned by this user (proxy.socket_dir)")
    if info.st_mode & 0o077:
        directory.chmod(0o700)
    return directory
