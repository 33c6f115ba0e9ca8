from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph_cli.config import validate_config_file
from pydantic import SecretStr
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.config import ModelSettings
from drydock.graphs.entrypoints import INPUTS_KEY, MissingInputs, with_inputs
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.manifest import DEFAULT_MANIFEST, Manifest, ManifestError
from drydock.infra.redis import Keys
from drydock.models import Models
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.failures import SandboxFailures
from drydock.sandbox.handle import SandboxHandle
from drydock.threads.inbox import Inbox
from drydock.threads.scope import ThreadScope


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps(content))
    return path


class TestManifest:
    def test_the_repository_manifest_is_valid(self) -> None:
        manifest = Manifest.load(DEFAULT_MANIFEST)
        assert manifest.python_version == "3.12"
        assert manifest.http_app is not None
        app = manifest.resolve(manifest.http_app)
        assert app.title == "Drydock web"
        for name in manifest.graphs:
            assert callable(manifest.graph_factory(name))

    def test_module_and_file_forms(self, tmp_path: Path) -> None:
        manifest = Manifest.load(write(tmp_path, {"graphs": {"coder": "drydock.roles:Role"}}))
        assert manifest.graph_factory("coder") is Role

    def test_missing_role(self, tmp_path: Path) -> None:
        manifest = Manifest.load(write(tmp_path, {"graphs": {}}))
        with pytest.raises(ManifestError, match="names no graph 'reviewer'"):
            manifest.graph_factory("reviewer")

    @pytest.mark.parametrize(
        ("spec", "problem"),
        [
            ("drydock.roles", "no ':attribute'"),
            ("drydock.nope:x", "cannot import"),
            ("drydock.roles:Nope", "no attribute"),
        ],
    )
    def test_bad_specs(self, tmp_path: Path, spec: str, problem: str) -> None:
        manifest = Manifest.load(write(tmp_path, {"graphs": {"coder": spec}}))
        with pytest.raises(ManifestError, match=problem):
            manifest.graph_factory("coder")

    def test_malformed(self, tmp_path: Path) -> None:
        path = tmp_path / "langgraph.json"
        path.write_text("{")
        with pytest.raises(ManifestError, match="cannot read"):
            Manifest.load(path)
        with pytest.raises(ManifestError, match="'graphs' must map"):
            Manifest.load(write(tmp_path, {"graphs": ["coder"]}))


class TestLangGraphConventions:
    """``langgraph.json`` as LangGraph's own tools read it: the CLI's validation, then each graph
    factory imported from its ``path:attr`` and called with a ``RunnableConfig``, as the server does."""

    def test_the_langgraph_cli_validates_the_manifest(self) -> None:
        config = validate_config_file(DEFAULT_MANIFEST)
        assert set(config["graphs"]) == {role.value for role in Role}
        http = config.get("http")
        assert http is not None
        assert http.get("app") == "./services/web/app.py:app"
        assert config["python_version"] == "3.12"

    def test_the_web_app_is_declared_once(self) -> None:
        manifest = Manifest.load(DEFAULT_MANIFEST)
        app = manifest.resolve(manifest.http_app or "")
        from services.web.app import ROUTERS

        assert app is manifest.resolve("./services/web/app.py:app")
        assert [router.__module__ for router in ROUTERS] == ["services.dashboard.app", "services.ingress.app"]
        pyproject = (DEFAULT_MANIFEST.parent / "pyproject.toml").read_text()
        assert "drydock.web_routers" not in pyproject

    @pytest.fixture
    async def inputs(self, bus: Bus, redis: Redis, keys: Keys) -> AsyncIterator[AgentInputs]:
        handle = SandboxHandle(
            id="sbx-manifest", provider="local", thread_id="t-manifest", base_url="http://127.0.0.1:9",
            token="unused", workspace="/workspace", created_at=datetime.now(UTC), isolation="none",
        )  # fmt: skip
        backend = SandboxBackend(handle)
        models = Models(ModelSettings(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("unused")))
        yield AgentInputs(
            scope=ThreadScope("t-manifest", "run-1", Role.CODER, "acme/widgets", ReplyAddress(channel=Channel.GITHUB)),
            model=models.chat_model(models.default),
            fallback=None,
            backend=backend,
            tools=[],
            checkpointer=InMemorySaver(),
            inbox=Inbox(bus),
            sandbox_failures=SandboxFailures(redis, keys),
            status=None,
            notifier=None,
            checkout=None,
        )
        await backend.aclose()

    @pytest.mark.parametrize("role", list(Role))
    def test_each_factory_takes_a_runnable_config_and_returns_a_compiled_graph(
        self, role: Role, inputs: AgentInputs
    ) -> None:
        spec = json.loads(DEFAULT_MANIFEST.read_text())["graphs"][role.value]
        factory = Manifest.load(DEFAULT_MANIFEST).resolve(spec)
        config: RunnableConfig = {"configurable": {"thread_id": "t-manifest"}}
        graph: Any = factory(with_inputs(config, inputs))
        assert isinstance(graph, CompiledStateGraph)
        assert graph.name == role.value
        assert config == {"configurable": {"thread_id": "t-manifest"}}, "the caller's config is left as it was"

    def test_a_config_without_drydock_inputs_is_refused_with_the_reason(self) -> None:
        factory = Manifest.load(DEFAULT_MANIFEST).graph_factory("coder")
        with pytest.raises(MissingInputs, match=rf"config\['configurable'\]\['{INPUTS_KEY}'\] must hold"):
            factory({"configurable": {"thread_id": "t-1"}})
