"""Reading what a message says to the agent: mentions of the handle, ``repo:owner/name`` and
``model=… effort=…``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drydock.channels.text import MAX_PARSED, ModelRequest, link_command, mentions, model_request_in, repository_in


class TestMentions:
    @pytest.mark.parametrize(
        "text",
        ["@drydock fix it", "hey @drydock, please", "(@Drydock)", "cc @drydock.", "@drydock\nmore", "x\n@DRYDOCK"],
    )
    def test_mentions(self, text: str) -> None:
        assert mentions(text, "@drydock")

    @pytest.mark.parametrize(
        "text",
        [
            "drydock fix it",
            "@drydock-bot",
            "@drydock_2",
            "ops@drydock.io",
            "@drydockyard",
            "/@drydock",
            "run `@drydock fix` to ask it",
            "```\n@drydock in a code block\n```",
            "~~~\n@drydock in a tilde fence\n~~~",
            "see:\n\n    @drydock in indented code\n",
            "run ``@drydock `fix` `` to ask it",
            "<!-- @drydock hidden in a comment -->",
            "<details>\n@drydock in HTML\n</details>",
            "![@drydock](https://example.com/badge.svg)",
        ],
    )
    def test_not_mentions(self, text: str) -> None:
        assert not mentions(text, "@drydock")

    @pytest.mark.parametrize(
        "text",
        [
            "> @drydock in a quote",
            "- @drydock in a list",
            "**@drydock** please",
            "[@drydock](https://example.com) link text",
            "`code` and then @drydock",
            "~~~\ncode\n~~~\n@drydock after a fence",
        ],
    )
    def test_mentions_in_markdown_prose(self, text: str) -> None:
        assert mentions(text, "@drydock")

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=80).filter(lambda text: not any(mark in text for mark in "`~<")))
    def test_a_handle_in_a_paragraph_of_its_own_is_always_found(self, text: str) -> None:
        assert mentions(f"{text}\n\n@drydock please", "@drydock")

    def test_a_text_longer_than_markdown_is_read_for_has_its_backtick_code_removed(self) -> None:
        log = "x" * MAX_PARSED
        assert not mentions(f"```\n{log}\n@drydock\n```", "@drydock")
        assert mentions(f"~~~\n{log}\n@drydock\n~~~", "@drydock")


class TestRepository:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("fix it repo:acme/api", "acme/api"),
            ("repo: acme/web-app please", "acme/web-app"),
            ("see repo:<https://github.com/acme/api|acme/api>", "acme/api"),
            ("repo:https://ghe.example.com/acme/api.git, thanks", "acme/api"),
            ("first repo:a/b then repo:c/d", "a/b"),
        ],
    )
    def test_found(self, text: str, expected: str) -> None:
        assert repository_in(text) == expected

    @pytest.mark.parametrize("text", ["no repository", "repo:acme", "myrepo:acme/api", "repo:../etc", "repo:acme/.."])
    def test_not_found(self, text: str) -> None:
        assert repository_in(text) is None


class TestLinkCommand:
    @pytest.mark.parametrize(
        ("text", "code"),
        [
            ("<@U0DRYBOT> link K7QX-2M9P-RT4V", "K7QX-2M9P-RT4V"),
            ("link k7qx2m9prt4v", "k7qx2m9prt4v"),
            ("@drydock   link K7QX-2M9P-RT4V  ", "K7QX-2M9P-RT4V"),
            ("@Drydock LINK K7QX 2M9P RT4V", "K7QX 2M9P RT4V"),
        ],
    )
    def test_the_code_of_a_link_message(self, text: str, code: str) -> None:
        assert link_command(text, "@drydock") == code

    @pytest.mark.parametrize(
        "text",
        [
            "@drydock please link K7QX-2M9P-RT4V to the issue",
            "@drydock link",
            "@drydock fix the link checker",
            "@drydock link K7QX-2M9P-RT4V and then fix the build",
            "@drydock link this page from the docs",
        ],
    )
    def test_anything_else_is_not_a_link_message(self, text: str) -> None:
        assert link_command(text, "@drydock") is None


class TestModelRequests:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("@drydock model=o3 effort=high fix it", ModelRequest("o3", "high")),
            ("@drydock effort=LOW, please", ModelRequest(None, "low")),
            ("<@U0DRYBOT> model=gpt-5.2. Thanks", ModelRequest("gpt-5.2", None)),
            ("@drydock model = qwen/qwen3-coder:30b go", ModelRequest("qwen/qwen3-coder:30b", None)),
            ("@drydock model=o3 model=gpt-5 effort=low", ModelRequest("o3", "low")),
            ("@drydock MODEL=o3 " + "and a long comment " * 400, ModelRequest("o3", None)),
            ("@drydock Effort=High", ModelRequest(None, "high")),
        ],
    )
    def test_options_are_read(self, text: str, expected: ModelRequest) -> None:
        assert model_request_in(text) == expected

    @pytest.mark.parametrize(
        "text",
        [
            "@drydock fix the model",
            "@drydock why does `load(model=resnet)` fail?",
            "@drydock see\n```\ntrain(model=big, effort=high)\n```",
            "@drydock set sub_model=x and foo.model=y",
            "@drydock the effort and the model are fine " * 400,
            "@drydock x = 1 " * 400,
        ],
    )
    def test_no_options_outside_code(self, text: str) -> None:
        assert model_request_in(text) is None
