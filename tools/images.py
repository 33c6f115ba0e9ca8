"""``pdm run images``: build Drydock's two images from the real ``Dockerfile`` and
``Dockerfile.sandbox`` with podman (or docker), and load them into a cluster's runtime.

    pdm run images                              # base images from the registry (python:3.12-slim-bookworm)
    pdm run images --base debootstrap           # no registry: a Debian base made here with debootstrap
    pdm run images --load kind                  # also: k3d, minikube, containerd:SOCKET, none (default: none)
    pdm run images --infra                      # also NATS and Valkey (drydock-infra:dev), for the lab

``--base debootstrap`` builds ``localhost/drydock-base:bookworm`` once: Debian bookworm (minbase)
with python3, venv and pip, from the first mirror of this machine's apt sources, carrying this
machine's CA bundle (so that builds behind a TLS-inspecting proxy verify as the host does), and
without Debian's "externally managed" marker, so that the Dockerfiles' ``pip install`` works as on
the official Python images. Both images are then the production Dockerfiles built on that base:
``--build-arg PYTHON=`` for the service image, ``--build-arg BASE=`` for the sandbox image.

Images: ``drydock:dev`` (every service: ``drydock serve NAME``) and ``drydock-sandbox:dev`` (the
sandbox daemon as uid 1000), the names ``charts/drydock/dev-values.yaml`` and the Tiltfile use.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = "localhost/drydock-base:bookworm"
SERVICE_IMAGE = "drydock:dev"
SANDBOX_IMAGE = "drydock-sandbox:dev"
INFRA_IMAGE = "drydock-infra:dev"
INFRA_DOCKERFILE = "integration/cluster/Dockerfile.infra"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class ImageError(RuntimeError):
    """A build or load step failed; the message says which and why."""


def _run(argv: list[str], **kwargs: object) -> None:
    print("+ " + " ".join(argv), flush=True)
    result = subprocess.run(argv, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise ImageError(f"{argv[0]} {argv[1]} failed with exit code {result.returncode}")


def builder() -> str:
    """podman where installed, else docker."""
    for name in ("podman", "docker"):
        found = shutil.which(name)
        if found:
            return found
    raise ImageError("neither podman nor docker is installed (Debian: apt-get install podman)")


def _image_exists(tool: str, image: str) -> bool:
    return subprocess.run([tool, "image", "inspect", image], capture_output=True, check=False).returncode == 0


def apt_mirror(sources: Path = Path("/etc/apt/sources.list.d/debian.sources")) -> str:
    """The first Debian mirror of this machine's apt sources (deb822 or one-line format)."""
    candidates = [sources, Path("/etc/apt/sources.list")]
    for path in candidates:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1:
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2:
                return next(word for word in words[1:] if "://" in word)
    raise ImageError("no Debian mirror found in the apt sources")


def debootstrap_base(tool: str, cache: Path) -> None:
    """Build :data:`BASE_IMAGE` unless it exists."""
    if _image_exists(tool, BASE_IMAGE):
        print(f"{BASE_IMAGE}: present", flush=True)
        return
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed (Debian: apt-get install debootstrap)")
    rootfs = cache / "base-rootfs"
    if not (rootfs / "usr/bin/python3").exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        rootfs.parent.mkdir(parents=True, exist_ok=True)
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                "bookworm",
                str(rootfs),
                apt_mirror(),
            ],
            stdout=subprocess.DEVNULL,
        )
    if HOST_CA_BUNDLE.exists():
        shutil.copyfile(HOST_CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
    for marker in (rootfs / "usr/lib").glob("python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for leftover in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        leftover.unlink()
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-cf", "-", "."], stdout=subprocess.PIPE)
    try:
        _run(
            [tool, "import", "--change", "ENV=LANG=C.UTF-8", "--change", 'CMD=["python3"]', "-", BASE_IMAGE],
            stdin=tar.stdout,
            stdout=subprocess.DEVNULL,
        )
    finally:
        tar.wait()


def build(tool: str, *, base: str | None, infra: bool) -> list[str]:
    """Build both images from the repository's Dockerfiles, on ``base`` when given, and the
    NATS and Valkey image when ``infra``; return the images built."""
    service_args = ["--build-arg", f"PYTHON={base}"] if base else []
    sandbox_args = ["--build-arg", f"BASE={base}"] if base else []
    _run([tool, "build", "-f", "Dockerfile", *service_args, "-t", SERVICE_IMAGE, "."], cwd=ROOT)
    _run([tool, "build", "-f", "Dockerfile.sandbox", *sandbox_args, "-t", SANDBOX_IMAGE, "."], cwd=ROOT)
    if not infra:
        return [SERVICE_IMAGE, SANDBOX_IMAGE]
    _run([tool, "build", "-f", INFRA_DOCKERFILE, *service_args, "-t", INFRA_IMAGE, "."], cwd=ROOT)
    return [SERVICE_IMAGE, SANDBOX_IMAGE, INFRA_IMAGE]


def load(tool: str, target: str, images: list[str]) -> None:
    """Hand ``images`` to a cluster's runtime: kind, k3d, minikube or a containerd socket."""
    for image in images:
        if target == "kind":
            _run(["kind", "load", "docker-image", image, "--name", os.environ.get("KIND_CLUSTER", "drydock")])
        elif target == "k3d":
            _run(["k3d", "image", "import", image, "--cluster", os.environ.get("K3D_CLUSTER", "drydock")])
        elif target == "minikube":
            _run(["minikube", "image", "load", image])
        elif target.startswith("containerd:"):
            socket = target.removeprefix("containerd:")
            # The kubelet looks images up in containerd's k8s.io namespace under the name it
            # normalises a short one to (docker.io/library/NAME:TAG), so the archive carries that name.
            full = kubelet_name(image)
            _run([tool, "tag", image, full])
            with tempfile.TemporaryDirectory(prefix="drydock-images-") as scratch:
                archive = Path(scratch) / "image.tar"
                _run([tool, "save", "--format", "docker-archive", "-o", str(archive), full])
                _run(["ctr", "-a", socket, "-n", "k8s.io", "images", "import", str(archive)])
        else:
            raise ImageError(f"unknown --load target {target!r}: kind, k3d, minikube, containerd:SOCKET or none")


def kubelet_name(image: str) -> str:
    """The fully qualified name Kubernetes resolves ``image`` to (``drydock:dev`` →
    ``docker.io/library/drydock:dev``)."""
    first, _, rest = image.partition("/")
    if not rest:
        return f"docker.io/library/{image}"
    if "." in first or ":" in first or first == "localhost":
        return image
    return f"docker.io/{image}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="pdm run images", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", choices=("registry", "debootstrap"), default="registry")
    parser.add_argument("--load", default="none", help="kind, k3d, minikube, containerd:SOCKET or none")
    parser.add_argument(
        "--infra", action="store_true", help=f"also build {INFRA_IMAGE} (NATS and Valkey, for a cluster without them)"
    )
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "drydock-images", help="where the base's rootfs is kept"
    )
    args = parser.parse_args(argv)
    try:
        tool = builder()
        base = None
        if args.base == "debootstrap":
            debootstrap_base(tool, args.cache)
            base = BASE_IMAGE
        images = build(tool, base=base, infra=args.infra)
        if args.load != "none":
            load(tool, args.load, images)
    except ImageError as error:
        print(f"images: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"images: {', '.join(images)} built", flush=True)


if __name__ == "__main__":
    main()
