"""The two images agree with what runs them: users match the chart's and the provider's security
contexts, the sandbox image carries the daemon (which imports nothing outside what is copied)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml  # type: ignore[import-untyped]

from drydock.config import KubernetesSandboxSettings

ROOT = Path(__file__).resolve().parent.parent


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / dockerfile).read_text())
    pairs = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            instruction, _, arguments = line.strip().partition(" ")
            pairs.append((instruction.upper(), arguments.strip()))
    return pairs


def last(dockerfile: str, instruction: str) -> str:
    return [arguments for name, arguments in instructions(dockerfile) if name == instruction][-1]


class TestServiceImage:
    def test_python_312_slim_and_a_non_root_user_the_chart_runs_as(self) -> None:
        bases = [arguments for name, arguments in instructions("Dockerfile") if name == "ARG"]
        assert any(re.fullmatch(r"PYTHON=python:3\.12-slim(-\w+)?", base) for base in bases)
        assert last("Dockerfile", "FROM") == "${PYTHON}"
        chart = yaml.safe_load((ROOT / "charts/drydock/values.yaml").read_text())
        context = chart["defaults"]["podSecurityContext"]
        assert last("Dockerfile", "USER") == f"{context['runAsUser']}:{context['runAsGroup']}"
        assert context["runAsUser"] != 0

    def test_the_service_is_chosen_by_the_command(self) -> None:
        assert last("Dockerfile", "ENTRYPOINT") == '["drydock"]'
        assert last("Dockerfile", "CMD") == '["serve", "web"]'

    def test_the_build_context_holds_the_code(self) -> None:
        allowed = (ROOT / ".dockerignore").read_text().split()
        assert {"!libs/**", "!services/**", "!pdm.lock", "!pyproject.toml"} <= set(allowed)


class TestSandboxImage:
    def test_the_user_is_the_one_the_provider_runs_pods_as(self) -> None:
        defaults = KubernetesSandboxSettings()
        assert last("Dockerfile.sandbox", "USER") == f"{defaults.run_as_user}:{defaults.run_as_group}"

    def test_the_base_is_a_build_argument_defaulting_to_python_312_slim(self) -> None:
        assert last("Dockerfile.sandbox", "FROM") == "${BASE}"
        arguments = [arguments for name, arguments in instructions("Dockerfile.sandbox") if name == "ARG"]
        assert any(re.fullmatch(r"BASE=python:3\.12-slim(-\w+)?", argument) for argument in arguments)

    def test_the_daemon_is_found_by_an_isolated_python_whatever_the_base(self) -> None:
        runs = " ".join(arguments for name, arguments in instructions("Dockerfile.sandbox") if name == "RUN")
        assert "sysconfig.get_paths()['purelib'] + '/drydock.pth'" in runs
        assert 'python3 -I -c "import drydock.sandbox.daemon.server"' in runs

    def test_the_tools_agents_need_are_installed(self) -> None:
        runs = [arguments for name, arguments in instructions("Dockerfile.sandbox") if name == "RUN"]
        packages = set(" ".join(runs).split())
        assert {"git", "coreutils", "grep", "build-essential", "ca-certificates", "tar"} <= packages

    def test_the_daemon_is_copied_with_every_module_it_imports(self) -> None:
        copies = [arguments.split() for name, arguments in instructions("Dockerfile.sandbox") if name == "COPY"]
        assert copies == [
            ["libs/drydock/__init__.py", "/opt/drydock/drydock/__init__.py"],
            ["libs/drydock/sandbox/__init__.py", "/opt/drydock/drydock/sandbox/__init__.py"],
            ["libs/drydock/sandbox/daemon/", "/opt/drydock/drydock/sandbox/daemon/"],
        ]
        for package_init in ("libs/drydock/__init__.py", "libs/drydock/sandbox/__init__.py"):
            tree = ast.parse((ROOT / package_init).read_text())
            assert not [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
        for module in (ROOT / "libs/drydock/sandbox/daemon").glob("*.py"):
            for node in ast.walk(ast.parse(module.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("drydock"):
                    assert node.module.startswith("drydock.sandbox.daemon"), f"{module.name} imports {node.module}"


class TestImagesCommand:
    """``pdm run images`` (tools/images.py): what it hands a cluster's runtime."""

    def test_short_names_get_the_name_the_kubelet_looks_up(self) -> None:
        from tools.images import kubelet_name

        assert kubelet_name("drydock:dev") == "docker.io/library/drydock:dev"
        assert kubelet_name("acme/drydock:1") == "docker.io/acme/drydock:1"
        assert kubelet_name("registry.example.com/drydock:1") == "registry.example.com/drydock:1"
        assert kubelet_name("localhost/drydock:dev") == "localhost/drydock:dev"

    def test_the_mirror_comes_from_the_apt_sources(self, tmp_path: Path) -> None:
        from tools.images import apt_mirror

        deb822 = tmp_path / "debian.sources"
        deb822.write_text("Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm\n")
        assert apt_mirror(deb822) == "http://mirror.invalid/debian"
