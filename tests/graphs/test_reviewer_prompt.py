"""The reviewer's system prompt: the pull request at its head, its files, the repository's
AGENTS.md and its approved review guidelines."""

from __future__ import annotations

from datetime import UTC, datetime

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.graphs.reviewer_prompt import MAX_LISTED_FILES, reviewer_prompt
from drydock.review.checkouts import ReviewCheckout
from drydock.review.guidelines import Guideline, GuidelinesVersion, Provenance
from drydock.review.target import ChangedFile, ReviewTarget
from drydock.roles import Role
from drydock.threads.checkout import Checkout
from drydock.threads.scope import ThreadScope

SCOPE = ThreadScope("t-1", "run-1", Role.REVIEWER, "acme/widgets", ReplyAddress(channel=Channel.GITHUB))
TARGET = ReviewTarget(
    repository="acme/widgets", number=5, head_sha="c0ffee" * 6 + "abcd", head_ref="feature", base_ref="main",
    title="Division helpers", body="Adds div().", author="octocat", url="https://github.com/acme/widgets/pull/5",
    files=(ChangedFile(path="calc.py", additions=8, deletions=1),),
)  # fmt: skip
GUIDELINES = GuidelinesVersion(
    repository="acme/widgets", version=3, rules=(Guideline(text="Guard every division.", category="correctness"),),
    provenance=Provenance(mode="continual"), created_at=datetime.now(UTC),
)  # fmt: skip


def checkout(**extra: object) -> ReviewCheckout:
    fields: dict[str, object] = {"repository": "acme/widgets", "path": "/w/widgets", "target": TARGET} | extra
    return ReviewCheckout(**fields)  # type: ignore[arg-type]


class TestReviewerPrompt:
    def test_the_pull_request_at_its_head_and_its_files(self) -> None:
        prompt = reviewer_prompt(SCOPE, checkout(instructions="Run `make check`."))
        assert 'acme/widgets#5 "Division helpers" by octocat' in prompt
        assert f"Its head `{TARGET.head_sha}` is checked out at `/w/widgets`" in prompt
        assert "- `calc.py` (modified, +8 -1)" in prompt
        assert '`diff` with args `["origin/main...HEAD"]`' in prompt
        assert "<description>\nAdds div().\n</description>" in prompt
        assert "<agents_md>\nRun `make check`.\n</agents_md>" in prompt
        assert "read-only" in prompt
        assert "<review_guidelines>" not in prompt

    def test_the_approved_guidelines_are_appended(self) -> None:
        prompt = reviewer_prompt(SCOPE, checkout(guidelines=GUIDELINES))
        assert "(version 3," in prompt
        assert "<review_guidelines>\n1. [correctness] Guard every division.\n</review_guidelines>" in prompt

    def test_a_long_file_list_is_cut(self) -> None:
        files = tuple(ChangedFile(path=f"f{n}.py") for n in range(MAX_LISTED_FILES + 5))
        prompt = reviewer_prompt(SCOPE, checkout(target=TARGET.model_copy(update={"files": files})))
        assert "… and 5 more files" in prompt

    def test_without_a_pull_request_it_says_so(self) -> None:
        assert "no pull request to review" in reviewer_prompt(SCOPE, Checkout("acme/widgets", "/w/widgets"))
