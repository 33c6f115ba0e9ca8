"""The bubblewrap command line that isolates a local sandbox.

Inside, the sandbox sees its own workspace at ``/workspace``, its own home and ``/tmp``, the
host's system directories, the configuration files in :data:`ETC_FILES` and the Python that runs
the daemon read-only, and nothing else of the host's filesystem (no other home directories, no
repository checkouts, no ``/etc/shadow`` or host keys, no sockets under ``/run``). It gets its own
PID, IPC and UTS namespaces and a new session (no terminal injection); when the worker runs as
root, every capability is dropped, so root inside cannot mount or trace host processes. That
root is still the host's uid 0, which the kernel lets write its settings under ``/proc/sys``
without any capability (``kernel.core_pattern`` names a program the kernel then runs as root
on the host): :data:`PROC_READ_ONLY` are bound read-only over the sandbox's ``/proc``.

Network: a namespace of its own with only loopback, so no host port (Redis, NATS, the web port,
another sandbox's daemon) and no other address is reachable. The credential proxy's socket
directory is bound read-only at :data:`PROXY_SOCKETS`, where the daemon's relay reaches it; the
daemon itself still answers on the listening socket it inherited from the host's namespace.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

WORKSPACE = "/workspace"
HOME = "/home/sandbox"
TMP = "/tmp"
PROXY_SOCKETS = "/run/drydock-proxy"

_SYSTEM_DIRECTORIES = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

ETC_FILES = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "gai.conf",
    "gitconfig",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
)
"""What of the host's ``/etc`` a sandbox sees (where present): name resolution, certificates,
the dynamic linker, users and groups, locale and shell defaults. Not secrets."""


PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
"""The kernel's switches in ``/proc`` (where present), read-only inside, as container runtimes keep them."""


def _system_mounts() -> list[str]:
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for name in _SYSTEM_DIRECTORIES:
        path = Path(name)
        if path.is_symlink():
            argv += ["--symlink", str(path.readlink()), name]
        elif path.is_dir():
            argv += ["--ro-bind", name, name]
    return argv


def bubblewrap_argv(
    bwrap: str,
    *,
    workspace: Path,
    home: Path,
    tmp: Path,
    readonly: Iterable[Path],
    proxy_sockets: Path,
) -> list[str]:
    """The ``bwrap ... --`` prefix; ``readonly`` are host directories the daemon needs (its Python),
    ``proxy_sockets`` the credential proxy's socket directory (seen at :data:`PROXY_SOCKETS`)."""
    argv = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    argv += ["--new-session", "--hostname", "sandbox", *_system_mounts()]
    argv += ["--proc", "/proc"]
    for path in PROC_READ_ONLY:
        argv += ["--ro-bind-try", path, path]
    argv += ["--dev", "/dev"]
    argv += ["--bind", str(workspace), WORKSPACE, "--bind", str(home), HOME, "--bind", str(tmp), TMP]
    argv += ["--ro-bind", str(proxy_sockets), PROXY_SOCKETS]
    # After the sandbox's own /tmp and home: a checkout or virtualenv under /tmp (as in a CI
    # clone) would otherwise be hidden by them and the daemon's Python would not start.
    for path in sorted({str(Path(p)) for p in readonly}):
        if not path.startswith("/usr/"):
            argv += ["--ro-bind", path, path]
    argv += ["--chdir", WORKSPACE, "--"]
    return argv
