"""Checking a model and reasoning effort chosen in a form or a request against the catalog
(:mod:`drydock.models`), with one field error per problem."""

from __future__ import annotations

from collections.abc import Sequence

from drydock.models import ModelCatalog, ModelError, ReasoningEffort
from services.dashboard.errors import FieldError


def model_errors(
    catalog: ModelCatalog, model: str | None, effort: str | None, *, at: Sequence[str | int]
) -> list[FieldError]:
    """What is wrong with choosing ``model`` and ``effort`` (either may be unset); ``at`` is the
    location of the object holding them (``("body",)``, ``("body", "models", "coder")``)."""
    errors: list[FieldError] = []
    spec = None
    if model is not None:
        try:
            spec = catalog.spec(model)
        except ModelError as error:
            errors.append(FieldError(loc=[*at, "model"], msg=str(error)))
    if effort is not None:
        try:
            chosen = ReasoningEffort(effort)
        except ValueError:
            allowed = ", ".join(value.value for value in ReasoningEffort)
            errors.append(FieldError(loc=[*at, "effort"], msg=f"{effort!r} is not a reasoning effort ({allowed})"))
        else:
            if spec is not None:
                try:
                    catalog.check(spec, chosen)
                except ModelError as error:
                    errors.append(FieldError(loc=[*at, "effort"], msg=str(error)))
    return errors


def blank_to_none(value: str | None) -> str | None:
    """Form fields send empty text for "not set"."""
    if value is None:
        return None
    stripped = value.strip()
    return stripped or None
