"""What a Helm install needs from a cluster that the k8s lab (``../shared/k8s-lab``) leaves out:
Service routing, cluster DNS, and the API server as seen from pods.

    python -m integration.cluster.lab_network        # as root, beside a running lab; Ctrl-C stops it

- **kube-proxy** (iptables mode) from the lab's own Kubernetes source tree (built there with
  ``make WHAT=cmd/kube-proxy`` when missing), so that ClusterIPs route to pods.
- **Cluster DNS** for ``<service>.<namespace>.svc.cluster.local``: a small responder on the lab
  bridge's gateway address, behind a selector-less Service at the kubelet's ``clusterDNS``
  (10.96.0.10). It answers A queries from the Services' ClusterIPs and refuses nothing else
  silently: other names get NXDOMAIN (the lab reaches no outside name anyway).
- **The API server from pods**: the lab's API server listens on loopback only, so the
  ``kubernetes`` Service gets an endpoint on the bridge gateway where a relay forwards to it (its
  certificate names 10.96.0.1 and ``kubernetes.default.svc``, so in-cluster clients verify it).

Only the lab's own addresses are used: loopback and the bridge it made for its pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

LAB = Path(os.environ.get("K8S_LAB", Path.home() / ".cache" / "drydock-k8s-lab"))
KUBECONFIG = LAB / "admin.kubeconfig"
BRIDGE_GATEWAY = "10.244.77.1"
POD_CIDR = "10.244.77.0/24"
CLUSTER_DNS = "10.96.0.10"
API_PORT = 16443
DNS_NAMESPACE = "kube-system"
DNS_SERVICE = "lab-dns"
ZONE = "svc.cluster.local"
GATEWAY_WAIT = 120.0
"""Seconds to wait for the lab bridge's gateway address."""
_A, _AAAA, _IN = 1, 28, 1


def kubectl(*argv: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(KUBECONFIG), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(argv)}: {result.stderr.strip()}")
    return result.stdout


def kube_proxy_binary() -> Path:
    binary = LAB / "bin" / "kube-proxy"
    if binary.exists():
        return binary
    tree = next((LAB / "src").glob("kubernetes-*/"), None)
    if tree is None:
        raise RuntimeError(f"no Kubernetes source tree under {LAB / 'src'}: run the lab's setup.sh first")
    print("lab-network: building kube-proxy from the lab's source tree (a few minutes)", flush=True)
    environment = os.environ | {
        "KUBE_GIT_VERSION_FILE": str(LAB / "src" / "version.env"),
        "GOFLAGS": "",
        "GOCACHE": str(LAB / "src" / "gocache"),
    }
    subprocess.run(["nice", "-n", "15", "make", "WHAT=cmd/kube-proxy"], cwd=tree, env=environment, check=True)
    shutil.copy2(tree / "_output" / "bin" / "kube-proxy", binary)
    return binary


def start_kube_proxy() -> subprocess.Popen[bytes]:
    log = (LAB / "logs" / "kube-proxy.log").open("ab")
    return subprocess.Popen(
        [
            str(kube_proxy_binary()),
            f"--kubeconfig={KUBECONFIG}",
            "--hostname-override=lab-node",
            f"--cluster-cidr={POD_CIDR}",
            "--proxy-mode=iptables",
            "--conntrack-max-per-core=0",
            "--metrics-bind-address=127.0.0.1:10249",
            "--healthz-bind-address=127.0.0.1:10256",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


class ServiceAddresses:
    """``name.namespace`` → ClusterIP, refreshed from the API every second."""

    def __init__(self) -> None:
        self.addresses: dict[str, str] = {}

    async def refresh_forever(self) -> None:
        while True:
            listed = await asyncio.to_thread(kubectl, "get", "services", "--all-namespaces", "-o", "json")
            self.addresses = {
                f"{item['metadata']['name']}.{item['metadata']['namespace']}": item["spec"]["clusterIP"]
                for item in json.loads(listed)["items"]
                if item["spec"].get("clusterIP") not in (None, "", "None")
            }
            await asyncio.sleep(1)

    def lookup(self, name: str) -> str | None:
        name = name.rstrip(".").lower()
        if not name.endswith("." + ZONE):
            return None
        return self.addresses.get(name.removesuffix("." + ZONE))


def _question(packet: bytes) -> tuple[str, int, int, int]:
    """The first question's name, type and class, and where the question section ends."""
    labels, offset = [], 12
    while packet[offset]:
        length = packet[offset]
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += 1 + length
    qtype, qclass = struct.unpack("!HH", packet[offset + 1 : offset + 5])
    return ".".join(labels), qtype, qclass, offset + 5


def answer(packet: bytes, services: ServiceAddresses) -> bytes | None:
    """The reply to one DNS query (RFC 1035): an A record for a Service, else no data or NXDOMAIN."""
    if len(packet) < 17:
        return None
    (ident, flags, questions) = struct.unpack("!HHH", packet[:6])
    if questions != 1 or flags & 0x8000:
        return None
    name, qtype, qclass, end = _question(packet)
    address = services.lookup(name)
    rcode = 0 if address is not None else 3
    records = b""
    count = 0
    if address is not None and qtype == _A and qclass == _IN:
        records = struct.pack("!HHHIH", 0xC00C, _A, _IN, 5, 4) + bytes(int(part) for part in address.split("."))
        count = 1
    reply_flags = 0x8000 | 0x0400 | (flags & 0x0100) | 0x0080 | rcode
    return struct.pack("!HHHHHH", ident, reply_flags, 1, count, 0, 0) + packet[12:end] + records


class _Dns(asyncio.DatagramProtocol):
    def __init__(self, services: ServiceAddresses) -> None:
        self._services = services
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        with contextlib.suppress(Exception):
            reply = answer(data, self._services)
            if reply is not None and self._transport is not None:
                self._transport.sendto(reply, addr)


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", API_PORT)
    except OSError:
        writer.close()
        return

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await source.read(65536):
                sink.write(chunk)
                await sink.drain()
        sink.close()

    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


def _endpoints(namespace: str, name: str, port: int, protocols: tuple[str, ...]) -> str:
    ports = [{"name": f"{protocol.lower()}", "port": port, "protocol": protocol} for protocol in protocols]
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": name, "namespace": namespace},
            "subsets": [{"addresses": [{"ip": BRIDGE_GATEWAY}], "ports": ports}],
        }
    )


def publish_services() -> None:
    """The DNS Service at the kubelet's clusterDNS and the API server's endpoint, both on the gateway."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": DNS_SERVICE, "namespace": DNS_NAMESPACE},
        "spec": {
            "clusterIP": CLUSTER_DNS,
            "ports": [{"name": "udp", "port": 53, "protocol": "UDP"}, {"name": "tcp", "port": 53, "protocol": "TCP"}],
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(service))
    kubectl("apply", "-f", "-", stdin=_endpoints(DNS_NAMESPACE, DNS_SERVICE, 53, ("UDP", "TCP")))
    endpoints = json.loads(_endpoints("default", "kubernetes", API_PORT, ("TCP",)))
    endpoints["subsets"][0]["ports"][0]["name"] = "https"
    kubectl("apply", "-f", "-", stdin=json.dumps(endpoints))


def _gateway_present() -> bool:
    shown = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True, check=False).stdout
    return f"inet {BRIDGE_GATEWAY}/" in shown


BRIDGE_POD = "lab-bridge"
"""A pause pod started on a fresh lab, whose only purpose is to make the CNI plugin create the bridge."""


def wait_for_gateway() -> None:
    """Wait until the lab bridge carries its gateway address; the CNI plugin adds it with the first
    pod, so on a fresh lab a pause pod is started for it and deleted once the address is there."""
    started = False
    if not _gateway_present():
        kubectl("run", BRIDGE_POD, "--namespace", "default", "--image=localhost/pause:lab", "--image-pull-policy=Never")
        started = True
    deadline = time.monotonic() + GATEWAY_WAIT
    try:
        while not _gateway_present():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the lab bridge has no {BRIDGE_GATEWAY} after {GATEWAY_WAIT:g} s")
            time.sleep(0.5)
    finally:
        if started:
            kubectl("delete", "pod", BRIDGE_POD, "--namespace", "default", "--wait=false")


async def main() -> None:
    proxy = start_kube_proxy()
    try:
        await asyncio.to_thread(wait_for_gateway)
        services = ServiceAddresses()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _Dns(services), local_addr=(BRIDGE_GATEWAY, 53))
        relay = await asyncio.start_server(_relay, BRIDGE_GATEWAY, API_PORT)
        publish_services()
        print(
            f"lab-network: kube-proxy running; DNS {CLUSTER_DNS} → {BRIDGE_GATEWAY}:53; "
            f"API server for pods at 10.96.0.1 → {BRIDGE_GATEWAY}:{API_PORT}",
            flush=True,
        )
        try:
            await services.refresh_forever()
        finally:
            transport.close()
            relay.close()
    finally:
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(10)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    sys.exit(0)
