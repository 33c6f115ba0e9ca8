"""Each role's exact tool set (AGENTS.md: a test pins each role's tools). The reviewer may read
and record findings, nothing that writes files, commits, pushes or opens pull requests; the
analyzer's only tool saves guidelines."""

from __future__ import annotations

from drydock.tools import REGISTRY
from drydock.worker.roles.analyzer import TOOLS as ANALYZER_TOOLS
from drydock.worker.roles.reviewer import TOOLS as REVIEWER_TOOLS

WRITING = {"github_comment", "open_pull_request", "update_pull_request", "http_request", "linear", "slack_reply"}


class TestReviewer:
    def test_the_reviewers_tools_are_exactly_these(self) -> None:
        assert REVIEWER_TOOLS == (
            "http_get",
            "web_search",
            "fetch_url",
            "list_findings",
            "add_finding",
            "update_finding",
            "publish_review",
        )

    def test_no_reviewer_tool_writes_to_the_code_host_or_elsewhere(self) -> None:
        assert not WRITING & set(REVIEWER_TOOLS)
        assert all(name in REGISTRY for name in REVIEWER_TOOLS)


class TestAnalyzer:
    def test_the_analyzers_only_tool_saves_guidelines(self) -> None:
        assert ANALYZER_TOOLS == ("save_guidelines",)
        assert "save_guidelines" in REGISTRY
