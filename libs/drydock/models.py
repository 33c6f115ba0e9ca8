"""Models: the supported ids, their reasoning-effort rules, resolution per run, fallback
selection and construction through ``langchain-openai``.

Drydock talks to models over the Chat Completions API, which OpenAI and every
OpenAI-compatible endpoint (vLLM, LiteLLM, Ollama, gateways) serve; models that only exist on
OpenAI's Responses API are not in the catalog. More ids come from
``DRYDOCK_MODELS_EXTRA_MODELS``, each with the efforts it takes.

Every run resolves its model and effort in this order (DESIGN.md section 7): the thread's
settings, then the user's profile override, then the team default, then the installation
default (``DRYDOCK_MODELS_DEFAULT``). The model comes from the first layer that names one. The
effort comes from the first layer that names one that applies: an effort from a layer *below*
the one that chose the model is a preference for another model, skipped when the chosen model
does not take it; an effort from the same or a higher layer that the model does not take is an
error. Without an effort the model's own default applies.

Every invalid choice raises :class:`ModelError`, once, where the object is built:
:class:`Models` checks the installation's default and fallback at start-up, :meth:`Models.resolve`
checks the layers of one run.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from langchain_core.tools import BaseTool
from pydantic import SecretStr

from drydock.config import ModelSettings
from drydock.model_catalog import (
    BUILTIN_MODELS,
    Layer,
    ModelCatalog,
    ModelChoice,
    ModelError,
    ModelNotConfigured,
    ModelSpec,
    ReasoningEffort,
    ResolvedModel,
    _effort,
)

if TYPE_CHECKING:
    from drydock.chat_openai import DrydockChatOpenAI

__all__ = [
    "BUILTIN_MODELS",
    "Layer",
    "ModelCatalog",
    "ModelChoice",
    "ModelError",
    "ModelNotConfigured",
    "ModelSpec",
    "Models",
    "ReasoningEffort",
    "ResolvedModel",
    "SchemaDerived",
    "tool_identity",
]

CHAT_MODELS = 32
"""Model clients a process keeps (one per model and effort in use)."""


def tool_identity(tool: BaseTool) -> Hashable:
    """What a tool's schema depends on. Each run builds its tools anew, but over the same
    argument schema objects, so the tool's own identity would never match."""
    return (type(tool), tool.name, tool.description, id(tool.args_schema), repr(tool.extras))


T = TypeVar("T")


class SchemaDerived(Generic[T]):
    """What a process derives from tools' schemas, kept by :func:`tool_identity` (plus the
    caller's qualifiers) so that each run's new tools find it: deriving it anew for every run
    (a JSON schema through pydantic, or the subset model ``tool_call_schema`` builds) cost
    about a millisecond per tool, a large share of the step that needed it. Each entry keeps its
    tool's schema object, so that the id in its key is not reused; at ``bound`` entries all are
    dropped."""

    def __init__(self, bound: int = 4096) -> None:
        self._bound = bound
        self._known: dict[Hashable, tuple[object, T]] = {}

    def get(self, tool: BaseTool, derive: Callable[[], T], *qualifiers: Hashable) -> T:
        key = (tool_identity(tool), *qualifiers)
        known = self._known.get(key)
        if known is None:
            if len(self._known) >= self._bound:
                self._known.clear()
            known = self._known[key] = (tool.args_schema, derive())
        return known[1]


class Models:
    """The models of this installation, built once at start-up from ``DRYDOCK_MODELS_*``.

    Construction checks the default and the fallback against the catalog and raises
    :class:`ModelError` for an unknown id or an effort the model does not take.
    """

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._clients: dict[tuple[str, ReasoningEffort | None], DrydockChatOpenAI] = {}
        self.catalog = ModelCatalog.with_extra(settings.extra_models)
        self.default = self._installation(settings.default, settings.default_effort, "DRYDOCK_MODELS_DEFAULT")
        self.fallback = (
            None
            if settings.fallback is None
            else self._installation(settings.fallback, settings.fallback_effort, "DRYDOCK_MODELS_FALLBACK")
        )

    def _installation(self, model_id: str, effort_name: str | None, where: str) -> ResolvedModel:
        try:
            spec = self.catalog.spec(model_id)
            effort = _effort(effort_name, f"{where}_EFFORT")
            self.catalog.check(spec, effort)
        except ModelError as error:
            raise ModelError(f"{where}: {error}") from None
        return ResolvedModel(spec, effort if effort is not None else spec.default_effort, Layer.INSTALLATION)

    @property
    def configured(self) -> bool:
        """Whether a model endpoint is configured (a base URL or an API key for OpenAI)."""
        return self.settings.base_url is not None or self.settings.api_key is not None

    def resolve(
        self,
        thread: ModelChoice | None = None,
        user: ModelChoice | None = None,
        team: ModelChoice | None = None,
    ) -> ResolvedModel:
        """The run's model and effort from its layers (see the module docstring)."""
        layers = [(Layer.THREAD, thread), (Layer.USER, user), (Layer.TEAM, team)]
        chosen = [(layer, choice) for layer, choice in layers if choice is not None]
        source, spec = next(
            ((layer, self.catalog.spec(c.model)) for layer, c in chosen if c.model is not None),
            (Layer.INSTALLATION, self.default.spec),
        )
        precedence = list(Layer)
        for layer, choice in [*chosen, (Layer.INSTALLATION, ModelChoice(effort=self._installation_effort(spec)))]:
            if choice.effort is None:
                continue
            if precedence.index(layer) <= precedence.index(source):
                self.catalog.check(spec, choice.effort)
                return ResolvedModel(spec, choice.effort, source)
            if choice.effort in spec.efforts:
                return ResolvedModel(spec, choice.effort, source)
        return ResolvedModel(spec, spec.default_effort, source)

    def _installation_effort(self, spec: ModelSpec) -> ReasoningEffort | None:
        return self.default.effort if spec.id == self.default.id else None

    def fallback_for(self, primary: ResolvedModel) -> ResolvedModel | None:
        """The fallback model, or None when none is configured or it is the primary model."""
        if self.fallback is None or self.fallback.id == primary.id:
            return None
        return self.fallback

    def provider_arguments(self, model: ResolvedModel) -> dict[str, Any]:
        """The arguments ``ChatOpenAI`` is built with for ``model`` (without the API key)."""
        arguments: dict[str, Any] = {
            "model": model.id,
            "timeout": self.settings.timeout,
            "max_retries": self.settings.max_retries,
            "use_responses_api": False,
            "stream_usage": True,
        }
        if self.settings.base_url is not None:
            arguments["base_url"] = self.settings.base_url
        if model.effort is not None:
            arguments["reasoning_effort"] = model.effort.value
        return arguments

    def chat_model(self, model: ResolvedModel) -> DrydockChatOpenAI:
        """The ``ChatOpenAI`` client for ``model``; :class:`ModelNotConfigured` without an endpoint.

        One per model and effort, shared by the process's runs: a client holds no run's state,
        and building one took about a millisecond of every run's start. A base URL without an
        API key is allowed (local servers often need none); the client then sends a placeholder
        key.
        """
        if not self.configured:
            raise ModelNotConfigured(
                "no model endpoint is configured: set DRYDOCK_MODELS_API_KEY for OpenAI, or "
                "DRYDOCK_MODELS_BASE_URL (and DRYDOCK_MODELS_API_KEY if it needs one) for an "
                "OpenAI-compatible endpoint"
            )
        key = (model.id, model.effort)
        client = self._clients.get(key)
        if client is None:
            from drydock.chat_openai import DrydockChatOpenAI

            if len(self._clients) >= CHAT_MODELS:
                self._clients.clear()
            api_key = self.settings.api_key or SecretStr("not-needed")
            client = self._clients[key] = DrydockChatOpenAI(api_key=api_key, **self.provider_arguments(model))
        return client
