"""The per-PR override command's grammar."""

from __future__ import annotations

import pytest

from drydock.autofix.commands import parse_command
from drydock.autofix.policy import OverrideState
from drydock.channels.commands import looks_like_autofix_command


class TestCommand:
    @pytest.mark.parametrize(
        ("text", "state"),
        [
            ("@drydock autofix on", OverrideState.ON),
            ("@drydock autofix off", OverrideState.OFF),
            ("  @Drydock   AUTOFIX Off.\n", OverrideState.OFF),
        ],
    )
    def test_the_whole_comment_is_the_command(self, text: str, state: OverrideState) -> None:
        assert looks_like_autofix_command(text)
        assert parse_command(text, "@drydock") is state

    @pytest.mark.parametrize(
        "text",
        [
            "@drydock please turn autofix off for now",
            "autofix off",
            "@drydock autofix",
            "@drydock autofix maybe",
            "Thanks! @drydock autofix on\nand also fix the typo",
        ],
    )
    def test_anything_else_is_no_command(self, text: str) -> None:
        assert parse_command(text, "@drydock") is None

    def test_another_handle_is_not_ours(self) -> None:
        assert looks_like_autofix_command("@someone autofix off")
        assert parse_command("@someone autofix off", "@drydock") is None
        assert parse_command("@bot autofix on", "@bot") is OverrideState.ON
