"""One model call's token usage and cost, from the provider's response."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from drydock.model_catalog import PriceTable


@dataclass(frozen=True)
class CallUsage:
    """Tokens of one model call as the provider counted them: ``input_tokens`` includes the
    cached ones, ``output_tokens`` the reasoning ones. ``cost_usd`` is None when the model has no
    known price (unknown, never zero)."""

    model: str
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float | None

    @classmethod
    def of(cls, message: AIMessage, model: str, prices: PriceTable) -> CallUsage | None:
        """The usage ``message`` reports (None: the provider sent none). ``model`` is the id the
        call asked for; the model the provider says answered is counted instead when the price
        table knows it (a dated snapshot counts as its model)."""
        usage = message.usage_metadata
        if usage is None:
            return None
        input_details: dict[str, Any] = dict(usage.get("input_token_details") or {})
        output_details: dict[str, Any] = dict(usage.get("output_token_details") or {})
        input_tokens = int(usage.get("input_tokens") or 0)
        cached = int(input_details.get("cache_read") or 0)
        output_tokens = int(usage.get("output_tokens") or 0)
        answered = message.response_metadata.get("model_name")
        # The model that answered (a fallback's, perhaps), as the table names it; else the one asked.
        model = prices.known_id(answered if isinstance(answered, str) else None) or model
        price = prices.price(model)
        return cls(
            model=model,
            input_tokens=input_tokens,
            cached_input_tokens=cached,
            output_tokens=output_tokens,
            reasoning_tokens=int(output_details.get("reasoning") or 0),
            cost_usd=price.cost(input_tokens, cached, output_tokens) if price is not None else None,
        )

    def as_event(self) -> dict[str, Any]:
        """The fields a ``model_call`` run event carries."""
        return {
            "model": self.model,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": self.cost_usd,
        }
