"""Attempts to leave a sandbox pod, run inside it by the agent's ``execute`` tool
(``integration/test_whole_path.py``). Standard library only: the sandbox image has Python and
nothing of Drydock's.

``python3 - TARGETS_JSON`` prints one JSON object: what each attempt got. It judges nothing; the
test does, so that a refusal by the network and one by the server can be told apart.
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import socket
import ssl
import sys
from typing import Any

TIMEOUT = 5.0


def _exchange(host: str, port: int, lines: list[bytes], *, greeting: bool = False) -> dict[str, Any]:
    """Connect, read a greeting if the server sends one first, then send each line and read its
    first reply line; ``connected`` is false when no connection was made."""
    try:
        connection = socket.create_connection((host, port), timeout=TIMEOUT)
    except OSError as error:
        return {"connected": False, "error": f"{type(error).__name__}: {error}"}
    replies = []
    with connection, connection.makefile("rb") as stream:
        try:
            if greeting:
                stream.readline()
            for line in lines:
                connection.sendall(line)
                replies.append(stream.readline().decode("utf-8", "replace").strip())
        except OSError as error:
            replies.append(f"{type(error).__name__}: {error}")
    return {"connected": True, "replies": replies}


def _http(host: str, port: int, method: str, path: str, *, tls: bool = False, **headers: str) -> str:
    """The status of one request, or the error that stopped it."""
    try:
        if tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=TIMEOUT, context=context
            )
        else:
            connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
        connection.request(method, path, body=b"{}" if method == "POST" else None, headers=headers)
        status = connection.getresponse().status
        connection.close()
        return str(status)
    except (OSError, http.client.HTTPException) as error:
        return f"{type(error).__name__}: {error}"


def _status_fields(*names: str) -> dict[str, str]:
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in names:
                fields[name] = value.strip()
    return fields


def _process_texts() -> list[str]:
    """The environment and command line of every process this user can read (its own, the
    daemon's, and any other it can see)."""
    texts = []
    for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as source:
                texts.append(source.read().replace(b"\0", b"\n").decode("utf-8", "replace"))
        except OSError:
            continue
    return texts


def _write_to_the_image() -> str:
    """Write to ``/var/tmp``, which any user may write to on the image's own filesystem."""
    try:
        with open("/var/tmp/drydock-probe", "w") as target:
            target.write("x")
    except OSError as error:
        return f"{type(error).__name__}: {error.strerror}"
    return "written"


def probe(targets: dict[str, Any]) -> dict[str, Any]:
    valkey_host, valkey_port = targets["valkey"]
    nats_host, nats_port = targets["nats"]
    daemon_host, daemon_port = targets["sibling_daemon"]
    api_host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    api_port = int(os.environ.get("KUBERNETES_SERVICE_PORT", "443"))
    return {
        "identity": {"uid": os.getuid(), "gid": os.getgid()}
        | _status_fields("CapEff", "CapPrm", "NoNewPrivs", "Seccomp"),
        "service_account": sorted(glob.glob("/var/run/secrets/kubernetes.io/serviceaccount/*")),
        "kubernetes_api": {
            path: _http(api_host, api_port, "GET", path, tls=True) for path in targets["kubernetes_paths"]
        },
        "valkey": _exchange(
            valkey_host,
            valkey_port,
            [b"PING\r\n", b"GET drydock\r\n", b"AUTH " + targets["redis_user"].encode() + b" guessed\r\n"],
        ),
        "nats": _exchange(
            nats_host,
            nats_port,
            [b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n'],
            greeting=True,
        ),
        "nats_guessed_user": _exchange(
            nats_host,
            nats_port,
            [b"CONNECT " + json.dumps({"user": targets["nats_user"], "pass": "guessed"}).encode() + b"\r\nPING\r\n"],
            greeting=True,
        ),
        "sibling_daemon": {
            "no_token": _http(daemon_host, daemon_port, "POST", "/exec"),
            "made_up_token": _http(daemon_host, daemon_port, "POST", "/exec", Authorization="Bearer made-up"),
        },
        "web": {name: _http(host, port, method, path) for name, (host, port, method, path) in targets["web"].items()},
        "mounted_secrets": {
            directory: sorted(os.listdir(directory)) if os.path.isdir(directory) else None
            for directory in targets["secret_directories"]
        },
        "write_to_the_image": _write_to_the_image(),
        "processes": _process_texts(),
    }


if __name__ == "__main__":
    print(json.dumps(probe(json.loads(sys.argv[1]))))
