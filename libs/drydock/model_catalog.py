"""The model catalog: the supported model ids and the reasoning efforts each takes, and the
choices people make among them. Light on purpose (no model client), so the ingress can check
a message's ``model=… effort=…`` without loading ``langchain-openai``; :mod:`drydock.models`
re-exports all of it and adds resolution, fallback and construction."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from drydock.config import ConfigError, Settings


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

    def choice(self, model: str | None, effort: str | None) -> ModelChoice:
        """A choice written by a person (a message's ``model=… effort=…``), checked against the
        catalog: :class:`ModelError` names the supported models, or the efforts the chosen
        model takes. An effort alone is checked only as an effort name: the model it meets is
        resolved per run."""
        chosen = ModelChoice.of(model, effort, where="effort")
        if chosen.model is not None:
            self.check(self.spec(chosen.model), chosen.effort)
        return chosen

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


def check_settings(settings: Settings) -> None:
    """Raise :class:`~drydock.config.ConfigError` when the installation's default or fallback
    model is not in the catalog or takes no such effort; an unknown id names
    ``DRYDOCK_MODELS_EXTRA_MODELS`` as the way to add it. Run before a worker starts."""
    models = settings.models
    try:
        catalog = ModelCatalog.with_extra(models.extra_models)
    except ModelError as error:
        raise ConfigError(str(error)) from None
    for model_id, effort, where in (
        (models.default, models.default_effort, "DRYDOCK_MODELS_DEFAULT"),
        (models.fallback, models.fallback_effort, "DRYDOCK_MODELS_FALLBACK"),
    ):
        if model_id is None:
            continue
        try:
            catalog.check(catalog.spec(model_id), _effort(effort, f"{where}_EFFORT"))
        except ModelError as error:
            hint = ""
            if model_id not in catalog.ids:
                hint = (
                    f"; for a model your endpoint serves, add it: DRYDOCK_MODELS_EXTRA_MODELS='{{\"{model_id}\": []}}'"
                )
            raise ConfigError(f"{where}: {error}{hint}") from None


@dataclass(frozen=True)
class Price:
    """A model's price in US dollars per million tokens. Reasoning tokens are billed as output."""

    input: float
    cached_input: float
    output: float

    def cost(self, input_tokens: int, cached_input_tokens: int, output_tokens: int) -> float:
        """US dollars for one call; ``input_tokens`` includes the cached ones, as providers count."""
        uncached = max(0, input_tokens - cached_input_tokens)
        return (
            uncached * self.input + cached_input_tokens * self.cached_input + output_tokens * self.output
        ) / 1_000_000


# OpenAI's standard-tier list prices (https://developers.openai.com/api/docs/pricing), as read on
# 2026-11-05 and reported in "OpenAI API Pricing: What Every Model Costs Per Million Tokens"
# (api-evangelist, 2026-11-06) and nicolalazzari.ai's 2026 table; checked 2026-12-04.
BUILTIN_PRICES: Mapping[str, Price] = {
    "gpt-5.2": Price(1.75, 0.175, 14.00),
    "gpt-5.1": Price(1.25, 0.125, 10.00),
    "gpt-5": Price(1.25, 0.125, 10.00),
    "gpt-5-mini": Price(0.25, 0.025, 2.00),
    "gpt-5-nano": Price(0.05, 0.005, 0.40),
    "o3": Price(2.00, 0.50, 8.00),
    "o4-mini": Price(1.10, 0.275, 4.40),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
}

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class PriceTable:
    """Prices per model id: the built-in list prices, replaced per id by ``DRYDOCK_MODELS_PRICES``.
    An id with no price is unknown (``None``), never free."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    @classmethod
    def from_settings(cls, settings: Settings) -> PriceTable:
        configured = {
            model_id: Price(
                price.input, price.input if price.cached_input is None else price.cached_input, price.output
            )
            for model_id, price in settings.models.prices.items()
        }
        return cls({**BUILTIN_PRICES, **configured})

    def price(self, model_id: str | None) -> Price | None:
        """The price of ``model_id``, also when the provider names a dated snapshot of it
        (``gpt-5-2025-08-07``); None when unknown."""
        known = self.known_id(model_id)
        return self._prices[known] if known is not None else None

    def known_id(self, model_id: str | None) -> str | None:
        """The id the table prices ``model_id`` under (a snapshot's model), or None."""
        if not model_id:
            return None
        if model_id in self._prices:
            return model_id
        base = _SNAPSHOT.sub("", model_id)
        return base if base in self._prices else None
