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

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, SecretStr

from drydock.config import ModelSettings

if TYPE_CHECKING:
    from drydock.chat_openai import DrydockChatOpenAI


def tool_identity(tool: BaseTool) -> Hashable:
    """What a tool's schema depends on. Each run builds its tools anew, but over the same
    argument schema objects, so the tool's own identity would never match."""
    return (type(tool), tool.name, tool.description, id(tool.args_schema), repr(tool.extras))


class ModelError(ValueError):
    """An unknown model id, an effort the model does not take, or no model endpoint configured."""


class ModelNotConfigured(ModelError):
    """Neither a base URL nor an API key is configured: there is no model to call."""


class ReasoningEffort(StrEnum):
    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"


class Layer(StrEnum):
    """Where a run's model choice came from, highest precedence first."""

    THREAD = "thread"
    USER = "user"
    TEAM = "team"
    INSTALLATION = "installation"


@dataclass(frozen=True)
class ModelSpec:
    """A model id and the reasoning efforts it takes (none: not a reasoning model)."""

    id: str
    efforts: tuple[ReasoningEffort, ...] = ()
    default_effort: ReasoningEffort | None = None

    def __post_init__(self) -> None:
        if (self.default_effort is None) != (not self.efforts) or (
            self.default_effort is not None and self.default_effort not in self.efforts
        ):
            raise ModelError(f"model {self.id!r}: the default effort must be one of its efforts")

    @property
    def reasoning(self) -> bool:
        return bool(self.efforts)


def _reasoning(model_id: str, *efforts: ReasoningEffort) -> ModelSpec:
    # A coding agent wants real reasoning by default; providers' own defaults vary (none, medium).
    default = ReasoningEffort.MEDIUM if ReasoningEffort.MEDIUM in efforts else efforts[0]
    return ModelSpec(model_id, efforts, default)


_E = ReasoningEffort
BUILTIN_MODELS: tuple[ModelSpec, ...] = (
    _reasoning("gpt-5.2", _E.NONE, _E.LOW, _E.MEDIUM, _E.HIGH, _E.XHIGH),
    _reasoning("gpt-5.1", _E.NONE, _E.LOW, _E.MEDIUM, _E.HIGH),
    _reasoning("gpt-5", _E.MINIMAL, _E.LOW, _E.MEDIUM, _E.HIGH),
    _reasoning("gpt-5-mini", _E.MINIMAL, _E.LOW, _E.MEDIUM, _E.HIGH),
    _reasoning("gpt-5-nano", _E.MINIMAL, _E.LOW, _E.MEDIUM, _E.HIGH),
    _reasoning("o3", _E.LOW, _E.MEDIUM, _E.HIGH),
    _reasoning("o4-mini", _E.LOW, _E.MEDIUM, _E.HIGH),
    ModelSpec("gpt-4.1"),
    ModelSpec("gpt-4.1-mini"),
)
"""The models Drydock knows without configuration (OpenAI's, over Chat Completions)."""


class ModelChoice(BaseModel):
    """One layer's preference (a thread's settings, a user's override, the team default);
    either part may be unset."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    effort: ReasoningEffort | None = None

    @classmethod
    def of(cls, model: str | None = None, effort: str | None = None, *, where: str = "model settings") -> ModelChoice:
        """A choice from untyped input (a webhook, a form, a stored profile); an unknown effort
        name raises :class:`ModelError` naming ``where``. Model ids are checked on resolution."""
        return cls(model=model or None, effort=_effort(effort or None, where))


@dataclass(frozen=True)
class ResolvedModel:
    """The model and effort a run uses, and the layer that chose the model."""

    spec: ModelSpec
    effort: ReasoningEffort | None
    source: Layer

    @property
    def id(self) -> str:
        return self.spec.id


class ModelCatalog:
    """The supported model ids: the built-in ones and those the settings add."""

    def __init__(self, specs: Iterable[ModelSpec]) -> None:
        self._specs: dict[str, ModelSpec] = {}
        for spec in specs:
            self._specs[spec.id] = spec

    @classmethod
    def with_extra(cls, extra: Mapping[str, list[str]]) -> ModelCatalog:
        """The built-in catalog plus ``extra`` (id → efforts); an extra id replaces a built-in one."""
        added = []
        for model_id, names in extra.items():
            efforts = tuple(_parse_effort(name, f"DRYDOCK_MODELS_EXTRA_MODELS[{model_id!r}]") for name in names)
            added.append(_reasoning(model_id, *efforts) if efforts else ModelSpec(model_id))
        return cls([*BUILTIN_MODELS, *added])

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def spec(self, model_id: str) -> ModelSpec:
        found = self._specs.get(model_id)
        if found is None:
            raise ModelError(f"unknown model {model_id!r}; supported: {', '.join(sorted(self._specs))}")
        return found

    def check(self, spec: ModelSpec, effort: ReasoningEffort | None) -> None:
        """Raise :class:`ModelError` unless ``spec`` takes ``effort``."""
        if effort is None or effort in spec.efforts:
            return
        if not spec.reasoning:
            raise ModelError(f"model {spec.id!r} takes no reasoning effort (got {effort.value!r})")
        allowed = ", ".join(e.value for e in spec.efforts)
        raise ModelError(f"model {spec.id!r} takes reasoning effort {allowed}; not {effort.value!r}")


def _effort(value: str | None, where: str) -> ReasoningEffort | None:
    return None if value is None else _parse_effort(value, where)


def _parse_effort(value: str, where: str) -> ReasoningEffort:
    try:
        return ReasoningEffort(value)
    except ValueError:
        allowed = ", ".join(e.value for e in ReasoningEffort)
        raise ModelError(f"{where}: {value!r} is not a reasoning effort ({allowed})") from None


class Models:
    """The models of this installation, built once at start-up from ``DRYDOCK_MODELS_*``.

    Construction checks the default and the fallback against the catalog and raises
    :class:`ModelError` for an unknown id or an effort the model does not take.
    """

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
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
        """A ``ChatOpenAI`` client for ``model``; :class:`ModelNotConfigured` without an endpoint.

        A base URL without an API key is allowed (local servers often need none); the client
        then sends a placeholder key.
        """
        if not self.configured:
            raise ModelNotConfigured(
                "no model endpoint is configured: set DRYDOCK_MODELS_API_KEY for OpenAI, or "
                "DRYDOCK_MODELS_BASE_URL (and DRYDOCK_MODELS_API_KEY if it needs one) for an "
                "OpenAI-compatible endpoint"
            )
        api_key = self.settings.api_key or SecretStr("not-needed")
        from drydock.chat_openai import DrydockChatOpenAI

        return DrydockChatOpenAI(api_key=api_key, **self.provider_arguments(model))
