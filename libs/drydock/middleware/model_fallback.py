"""Middleware 10: retry a failed model call with the fallback model, present only when a
fallback distinct from the run's model is configured (chosen by
:meth:`drydock.models.Models.fallback_for`). The client's own retries run first."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import ModelFallbackMiddleware
from langchain_core.language_models import BaseChatModel


def model_fallback(fallback: BaseChatModel | None) -> ModelFallbackMiddleware[Any, Any] | None:
    """LangChain's fallback middleware around ``fallback``; None without a fallback."""
    return ModelFallbackMiddleware(fallback) if fallback is not None else None
