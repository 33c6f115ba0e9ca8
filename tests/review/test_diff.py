"""Anchoring findings in a pull request's diff: which lines, on which side, may carry a comment."""

from __future__ import annotations

import pytest

from drydock.review.diff import AnchorError, DiffMap, FileDiff, Side

PATCH = "\n".join(
    [
        "@@ -1,4 +1,5 @@",
        " import os",
        "-import sys",
        "+import json",
        "+import re",
        " ",
        " def main():",
        "@@ -20,3 +21,4 @@ def main():",
        "     run()",
        "+    log()",
        "     stop()",
        " # end",
    ]
)


@pytest.fixture
def diff() -> DiffMap:
    return DiffMap.from_files(
        [
            {"filename": "app.py", "status": "modified", "patch": PATCH},
            {"filename": "logo.png", "status": "added"},
            {
                "filename": "new.py",
                "status": "renamed",
                "previous_filename": "old.py",
                "patch": "@@ -0,0 +1,2 @@\n+a\n+b",
            },
        ]
    )


class TestLines:
    def test_added_and_context_lines_are_on_the_right_removed_and_context_on_the_left(self, diff: DiffMap) -> None:
        app = diff.file("app.py")
        assert app.ranges(Side.RIGHT) == [(1, 5), (21, 24)]
        assert app.ranges(Side.LEFT) == [(1, 4), (20, 22)]
        assert app.text(Side.RIGHT, 2, 3) == ["import json", "import re"]
        assert app.text(Side.LEFT, 2, 2) == ["import sys"]
        assert app.text(Side.RIGHT, 22, 22) == ["    log()"]

    def test_a_range_inside_one_hunk_is_accepted(self, diff: DiffMap) -> None:
        assert diff.check("app.py", 2, 4).path == "app.py"
        assert diff.check("/app.py", 22, 22).path == "app.py"
        diff.check("app.py", 2, 2, Side.LEFT)

    def test_a_renamed_file_keeps_its_old_name(self, diff: DiffMap) -> None:
        assert diff.file("new.py").previous_path == "old.py"


class TestRefusals:
    def test_a_line_outside_the_hunks_names_the_commentable_ranges(self, diff: DiffMap) -> None:
        with pytest.raises(
            AnchorError, match=r"app.py line 10 \(RIGHT\) is not in the pull request's diff.*1-5, 21-24"
        ):
            diff.check("app.py", 10, 10)

    def test_a_range_across_hunks_is_refused(self, diff: DiffMap) -> None:
        with pytest.raises(AnchorError, match="within one hunk"):
            diff.check("app.py", 4, 22)

    def test_a_backwards_range_is_refused(self, diff: DiffMap) -> None:
        with pytest.raises(AnchorError, match="ends before it starts"):
            diff.check("app.py", 4, 2)

    def test_a_file_the_pull_request_does_not_change_is_refused(self, diff: DiffMap) -> None:
        with pytest.raises(AnchorError, match=r"README.md is not changed by the pull request \(changed: app.py"):
            diff.check("README.md", 1, 1)

    def test_a_file_without_a_patch_has_no_commentable_lines(self, diff: DiffMap) -> None:
        with pytest.raises(AnchorError, match="no commentable lines"):
            diff.check("logo.png", 1, 1)

    def test_an_added_file_has_no_left_side(self, diff: DiffMap) -> None:
        with pytest.raises(AnchorError, match="LEFT side"):
            diff.check("new.py", 1, 1, Side.LEFT)


class TestLargeDiffs:
    def test_lookups_stay_correct_across_many_hunks(self) -> None:
        hunks = "\n".join(f"@@ -{n * 10},1 +{n * 10},2 @@\n x\n+y" for n in range(1, 200))
        file = FileDiff.parse("big.py", hunks)
        assert len(file.ranges(Side.RIGHT)) == 199
        file.check(Side.RIGHT, 1990, 1991)
        with pytest.raises(AnchorError, match="and 187 more hunks"):
            file.check(Side.RIGHT, 1992, 1992)
