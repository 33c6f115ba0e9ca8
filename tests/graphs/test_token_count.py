from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from drydock.graphs.token_count import CachedTokenCounter


@tool
def search(query: str, limit: int = 10) -> str:
    """Search the web for ``query``."""
    return query


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return url


def reply(text: str, *, provider: str | None = "openai", total: int | None = None, calls: int = 0) -> AIMessage:
    return AIMessage(
        content=text,
        tool_calls=[{"name": "search", "args": {"query": f"q{n}"}, "id": f"call-{n}"} for n in range(calls)],
        response_metadata={"model_provider": provider} if provider else {},
        usage_metadata={"input_tokens": total, "output_tokens": 0, "total_tokens": total} if total else None,
    )


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix the flaky test in tests/test_api.py " * 20, name="alice"),
        reply("Looking.", total=900, calls=2),
        ToolMessage("result one", tool_call_id="call-0"),
        ToolMessage("result two", tool_call_id="call-1"),
        HumanMessage(content=[{"type": "text", "text": "and this"}, {"type": "image_url", "image_url": "x"}]),
        reply("Done.", total=1400),
    ]


def expected(messages: list[BaseMessage], tools: list[Any] | None = None) -> int:
    return count_tokens_approximately(messages, tools=tools, use_usage_metadata_scaling=True)


class TestCachedTokenCounter:
    def test_counts_what_langchain_counts(self) -> None:
        messages = conversation()
        counter = CachedTokenCounter()
        for end in range(len(messages) + 1):
            assert counter(messages[:end]) == expected(messages[:end])
            assert counter(messages[:end], tools=[search, fetch]) == expected(messages[:end], [search, fetch])

    def test_scaling_follows_the_last_reported_usage_and_its_bounds(self) -> None:
        counter = CachedTokenCounter()
        modest = [HumanMessage("x" * 400), reply("y" * 40, total=150)]
        huge = [HumanMessage("x" * 400), reply("y" * 40, total=100_000)]
        below = [HumanMessage("x" * 400), reply("y" * 40, total=10)]
        for messages in (modest, huge, below):
            assert counter(messages) == expected(messages)
        assert counter(huge) == count_tokens_approximately(huge, use_usage_metadata_scaling=False) * 1.25

    def test_mixed_providers_are_not_scaled(self) -> None:
        messages = [HumanMessage("hello " * 50), reply("a", provider="openai", total=500), reply("b", provider="x")]
        assert CachedTokenCounter()(messages) == expected(messages)
        assert CachedTokenCounter()(messages) == count_tokens_approximately(messages)

    def test_a_message_edited_in_place_is_counted_again(self) -> None:
        message = HumanMessage("short")
        counter = CachedTokenCounter()
        before = counter([message])
        message.content = "a much longer text than before " * 10
        assert counter([message]) == expected([message]) > before

    def test_each_message_and_tool_list_is_counted_once(self, monkeypatch: Any) -> None:
        import drydock.graphs.token_count as module

        calls: list[int] = []

        def counting(messages: list[BaseMessage], **kwargs: Any) -> int:
            calls.append(len(messages))
            return count_tokens_approximately(messages, **kwargs)

        monkeypatch.setattr(module, "count_tokens_approximately", counting)
        monkeypatch.setattr(CachedTokenCounter, "_tools", {})
        messages = conversation()
        counter = CachedTokenCounter()
        counter(messages, tools=[search, fetch])
        first = len(calls)
        counter([*messages, HumanMessage("one more")], tools=[search, fetch])
        assert first == len(messages) + 1
        assert len(calls) == first + 1
        copies = [search.model_copy(), fetch.model_copy()]
        assert counter(messages, tools=copies) == expected(messages, [search, fetch])
        assert len(calls) == first + 1
        # The next run's counter counts its messages, not the same tools again.
        assert CachedTokenCounter()(messages, tools=copies) == expected(messages, [search, fetch])
        assert len(calls) == first + 1 + len(messages)


class TestSummarization:
    def test_replaces_the_default_summarization_by_name(self) -> None:
        from deepagents.backends import StateBackend
        from deepagents.middleware.summarization import create_summarization_middleware
        from langchain_openai import ChatOpenAI

        from drydock.graphs.token_count import summarization

        model = ChatOpenAI(model="gpt-4o", api_key="unused")  # type: ignore[arg-type]
        backend = StateBackend()
        ours = summarization(model, backend)
        assert ours.name == create_summarization_middleware(model, backend).name
        assert isinstance(getattr(ours, "token_counter", None), CachedTokenCounter)
