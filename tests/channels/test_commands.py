"""The commands a message gives the agent: ``approve`` only when it is the whole message
addressed to the agent (the autofix command's shape is tested with the autofix policy)."""

from __future__ import annotations

import pytest

from drydock.channels.commands import is_approve_command


class TestCommand:
    @pytest.mark.parametrize(
        ("text", "addressed", "expected"),
        [
            ("@drydock approve", False, True),
            ("@Drydock approve.", False, True),
            ("<@U0BOT> approve", False, True),
            ("approve", True, True),
            ("approve", False, False),
            ("@drydock approve this and push", False, False),
            ("@drydock please do not approve", False, False),
            ("@other approve", False, False),
            ("@DRYDOCK APPROVE!", False, True),
            ("@drydock\n\n  Approve  ", False, True),
            ("@drydock @drydock approve", False, True),
            ("@drydock please take a look. " * 300, False, False),
            ("@drydock " + "x" * 8000, True, False),
        ],
    )
    def test_the_whole_message_is_the_command(self, text: str, addressed: bool, expected: bool) -> None:
        assert is_approve_command(text, "@drydock", addressed=addressed) is expected
