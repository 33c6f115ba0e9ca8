"""Thread ids must never change across releases: these vectors are frozen."""

from __future__ import annotations

import uuid

import pytest

from drydock.threads import ids


class TestPinnedVectors:
    @pytest.mark.parametrize(
        ("derived", "expected"),
        [
            (lambda: ids.github_issue("github.com", "acme", "widgets", 42), "ecfe65b2-d7eb-5c0a-9ca0-43b0bf21707d"),
            (lambda: ids.github_pr("github.com", "acme", "widgets", 7), "0c0454d8-da11-56e4-ab71-004f0d125759"),
            (lambda: ids.linear_issue("org-1", "ISSUE-uuid-1"), "38decdfe-1068-5802-b7e1-5e0205f73dcc"),
            (lambda: ids.slack_thread("T01", "C02", "1700000000.000100"), "b89ea08b-4033-57d8-b29f-8278f4c63486"),
            (lambda: ids.reviewer("github.com", "acme", "widgets", 7), "4a0af3da-7a84-5706-a02d-47a88a50ab89"),
            (lambda: ids.analyzer("github.com", "acme", "widgets"), "665dd722-d34b-529c-9e36-6d7466d95aea"),
            (
                lambda: ids.github_issue("ghe.example.com", "acme", "widgets", 42),
                "8666d430-8e2f-51da-a893-8927993bb0e3",
            ),
        ],
        ids=["github-issue", "github-pr", "linear", "slack", "reviewer", "analyzer", "github-enterprise"],
    )
    def test_vector(self, derived: object, expected: str) -> None:
        assert callable(derived)
        assert derived() == expected

    def test_canonical_keys(self) -> None:
        assert ids.github_issue_key("github.com", "acme", "widgets", 42) == "github:github.com:acme/widgets:issue:42"
        assert ids.reviewer_key("github.com", "acme", "w", 7) == "reviewer:github:github.com:acme/w:pr:7"
        assert ids.analyzer_key("github.com", "acme", "w") == "analyzer:github:github.com:acme/w"
        assert ids.slack_thread_key("T1", "C1", "1.2") == "slack:T1:C1:1.2"
        assert ids.linear_issue_key("o", "i") == "linear:o:issue:i"


class TestDerivation:
    def test_code_host_names_are_case_insensitive(self) -> None:
        assert ids.github_issue("GitHub.com", "Acme", "Widgets", 42) == ids.github_issue(
            "github.com", "acme", "widgets", 42
        )

    def test_slack_ids_keep_their_case(self) -> None:
        assert ids.slack_thread("T01", "C02", "1.1") != ids.slack_thread("t01", "c02", "1.1")

    def test_issue_and_pr_of_one_number_differ(self) -> None:
        assert ids.github_issue("github.com", "a", "b", 1) != ids.github_pr("github.com", "a", "b", 1)

    def test_reviewer_namespace_is_distinct_from_the_pr(self) -> None:
        assert ids.reviewer("github.com", "a", "b", 1) != ids.github_pr("github.com", "a", "b", 1)

    def test_dashboard_threads_are_fresh(self) -> None:
        first, second = ids.dashboard(), ids.dashboard()
        assert first != second
        assert uuid.UUID(first).version == 4

    def test_short_id_is_a_prefix_of_the_hex(self) -> None:
        thread = ids.github_issue("github.com", "acme", "widgets", 42)
        assert ids.short_id(thread) == "ecfe65b2d7eb"

    @pytest.mark.parametrize(
        ("owner", "repo", "number"), [("", "r", 1), ("a/b", "r", 1), ("o", "r:x", 1), ("o", "r", 0), ("o", "r", -3)]
    )
    def test_invalid_parts_are_refused(self, owner: str, repo: str, number: int) -> None:
        with pytest.raises(ValueError, match="invalid"):
            ids.github_issue("github.com", owner, repo, number)

    def test_missing_slack_parts_are_refused(self) -> None:
        with pytest.raises(ValueError, match="required"):
            ids.slack_thread("T1", "", "1.1")
