from __future__ import annotations

import pytest

from drydock.bus import subjects
from drydock.roles import Role


class TestSubjects:
    def test_builders(self) -> None:
        assert subjects.inbox("t1") == "drydock.inbox.t1"
        assert subjects.run(Role.REVIEWER, "t1") == "drydock.run.reviewer.t1"
        assert subjects.runs_of(Role.CODER) == "drydock.run.coder.*"
        assert subjects.event("t1", "started") == "drydock.event.t1.started"
        assert subjects.events_of("t1") == "drydock.event.t1.*"
        assert subjects.github("check_run") == "drydock.github.check_run"

    @pytest.mark.parametrize("bad", ["", "a.b", "a b", "*", ">", "a\nb"])
    def test_tokens_that_would_change_the_subject_are_refused(self, bad: str) -> None:
        with pytest.raises(ValueError, match="subject token"):
            subjects.inbox(bad)
