"""The reviewer end to end: a pull request opened on a repository with review enabled becomes one
GitHub review with inline comments; a later push gets only the new findings, and a finding the
push fixed gets a reply and its thread resolved; a person's reply on a finding reaches the
reviewer, which dismisses it; the reviewer has no shell to push with and reads history with its
read-only git tool; its prompt
carries the repository's approved guidelines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from drydock.accounts import RepositorySettings
from drydock.bus import EventType
from drydock.review.analysis import analyzer_thread
from drydock.review.findings import FindingStatus, FindingStore
from drydock.review.guidelines import Guideline, GuidelineSource, GuidelinesStore, Provenance
from drydock.roles import Role
from drydock.threads import ids
from drydock.worker.roles.reviewer import TOOLS as REVIEWER_TOOLS
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, Stage, pipeline
from tests.fakes.git_server import git, isolated_git_env
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import files_from_diff, reviews_of, set_files
from tests.fakes.github.state import PullRequest
from tests.fakes.openai_server import Script
from tests.waiting import eventually

NUMBER = 5
BRANCH = "feature/division"
THREAD = ids.reviewer("github.com", ORG, "widgets", NUMBER)
READ_TOOLS = ["ls", "read_file", "glob", "grep"]
"""The framework's tools the reviewer keeps: reading files only (no shell, no task)."""

FIRST = """def add(a, b):
    return a - b


def div(a, b):
    return a / b


def mean(values):
    return sum(values) / len(values)
"""
SECOND = FIRST.replace("    return a / b\n", "    return a / b if b else 0.0\n") + (
    "\n\ndef square(a):\n    return a * a + 1\n"
)


@dataclass
class Author:
    """A person's clone of the upstream repository, pushing to the pull request's branch."""

    stage: Stage
    root: Path

    @property
    def work(self) -> Path:
        return self.root / "author"

    async def push(self, calc: str, message: str) -> str:
        env = isolated_git_env(self.root)
        upstream = self.stage.git.repository_path(REPOSITORY)
        if not self.work.exists():
            await git("clone", "-q", str(upstream), str(self.work), env=env)
            await git("checkout", "-q", "-b", BRANCH, cwd=self.work, env=env)
        (self.work / "calc.py").write_text(calc)
        await git("commit", "-qam", message, cwd=self.work, env=env)
        await git("push", "-q", "origin", BRANCH, cwd=self.work, env=env)
        sha = (await git("rev-parse", "HEAD", cwd=self.work, env=env)).strip()
        # GitHub keeps every pull request's head under refs/pull/N/head.
        await git("--git-dir", str(upstream), "update-ref", f"refs/pull/{NUMBER}/head", sha, env=env)
        diff = await git("diff", "main...HEAD", cwd=self.work, env=env)
        github = self.stage.github.state
        set_files(github, REPOSITORY, NUMBER, files_from_diff(diff))
        pull = github.pulls.get((REPOSITORY, NUMBER))
        if pull is None:
            github.pulls[(REPOSITORY, NUMBER)] = PullRequest(
                id=github.next_id(), repository=REPOSITORY, number=NUMBER, title="Division helpers", body="",
                head_ref=BRANCH, head_sha=sha, base_ref="main", draft=False, user=webhooks.user(MEMBER),
            )  # fmt: skip
            activity_of(github).open_issue(REPOSITORY, NUMBER, pull_request=True)
        else:
            pull.head_sha = sha
        return sha

    async def deliver(self, action: str, sha: str) -> None:
        payload = webhooks.pull_request(
            ORG, "widgets", NUMBER, action, author=webhooks.user(MEMBER), head_ref=BRANCH, head_sha=sha,
            title="Division helpers", installation_id=self.stage.installation.id,
        )  # fmt: skip
        response = await self.stage.deliver_github("pull_request", payload)
        assert response.status_code == 200, response.text


async def enable_review(stage: Stage) -> None:
    await stage.accounts.save_repository(RepositorySettings(full_name=REPOSITORY, reviewer=True))


async def completed(stage: Stage, runs: int = 1) -> bool:
    events = await stage.events(THREAD)
    return sum(event.type is EventType.COMPLETED and not event.data.get("skipped") for event in events) >= runs


def findings(stage: Stage) -> FindingStore:
    return FindingStore(stage.runtime.redis, stage.runtime.keys, THREAD, host="github.com", repository=REPOSITORY)


FIRST_REVIEW_STEPS = 7
"""Model calls of :func:`first_review`."""


def first_review(script: Script | None = None) -> Script:
    """The first review's model calls, appended to ``script``."""
    return (
        (script or Script())
        .tool_call("list_findings")
        .tool_call(
            "add_finding", severity="high", confidence=0.9, category="correctness", title="Division by zero",
            path="calc.py", start_line=6, description="`div(a, 0)` raises ZeroDivisionError.",
            suggestion="    return a / b if b else 0.0",
        )
        .tool_call(
            "add_finding", severity="medium", confidence=0.7, category="correctness", title="Mean of an empty list",
            path="calc.py", start_line=9, end_line=10, description="`mean([])` divides by zero.",
        )
        .tool_call(
            "add_finding", severity="info", confidence=0.5, category="naming", title="Name the helper divide",
            path="calc.py", start_line=5, description="`divide` reads better than `div`.",
        )
        .tool_call(
            "add_finding", severity="low", confidence=0.5, category="style", title="Out of the diff",
            path="calc.py", start_line=40, description="Not a line of the diff.",
        )
        .tool_call("publish_review", summary="Two division problems.")
        .reply("Reviewed: two findings posted.")
    )  # fmt: skip


class TestReview:
    async def test_an_opened_pull_request_gets_one_review_with_inline_comments(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, first_review(), roles=(Role.REVIEWER,)) as stage:
            await enable_review(stage)
            guidelines = GuidelinesStore(stage.runtime.redis, stage.runtime.keys, host="github.com")
            source = GuidelineSource(kind="review_comment", pull_request=1, comment_id=7)
            await guidelines.save(
                REPOSITORY, [Guideline(text="Guard every division.", sources=(source,))], Provenance(mode="bootstrap")
            )
            await guidelines.save(
                REPOSITORY, [Guideline(text="Unapproved rule.", sources=(source,))], Provenance(mode="continual")
            )
            await guidelines.approve(REPOSITORY, 1, by="ada")
            author = Author(stage, tmp_path)
            sha = await author.push(FIRST, "Add div and mean")
            await author.deliver("opened", sha)

            await eventually(lambda: completed(stage), within=60, what="the review to complete")

            github = stage.github.state
            reviews = list(reviews_of(github).reviews.values())
            assert len(reviews) == 1
            review = reviews[0]
            assert (review.state, review.commit_id) == ("COMMENTED", sha)
            assert "Two division problems." in review.body
            assert "F3 (info)" in review.body  # below the threshold: named in the summary only
            placed = {
                comment_id: placement
                for comment_id, placement in reviews_of(github).placements.items()
                if placement.review_id == review.id
            }
            assert sorted((p.path, p.start_line or 0, p.line, p.side) for p in placed.values()) == [
                ("calc.py", 0, 6, "RIGHT"),
                ("calc.py", 9, 10, "RIGHT"),
            ]
            bodies = [activity_of(github).comments[comment_id].body for comment_id in placed]
            assert any("```suggestion\n    return a / b if b else 0.0\n```" in body for body in bodies)
            assert all("<!-- drydock:finding:F" in body for body in bodies)

            recorded = await findings(stage).all()
            assert [(f.id, f.published) for f in recorded] == [("F1", True), ("F2", True), ("F3", False)]
            out_of_diff = stage.model.requests[5].messages[-1]
            assert "not in the pull request's diff" in out_of_diff["content"]

            first = stage.model.requests[0]
            assert first.tool_names == [*READ_TOOLS, *REVIEWER_TOOLS, "git"]
            system = first.texts("system")[0]
            assert "Guard every division." in system
            assert "Unapproved rule." not in system
            assert f"#{NUMBER}" in system
            # The first review on the repository asked the analyzer to learn its guidelines.
            assert await stage.inbox_size(analyzer_thread("github.com", REPOSITORY)) == 1
            # The run's status is a check run on the head.
            assert any(run.head_sha == sha for run in activity_of(github).check_runs.values())

    async def test_a_push_gets_only_the_new_findings_and_fixed_ones_are_resolved(self, tmp_path: Path) -> None:
        script = (
            first_review()
            .tool_call("list_findings", status="open")
            .tool_call("update_finding", id="F1", status="resolved", note="Fixed: div() now guards b == 0.")
            .tool_call(
                "add_finding", severity="medium", confidence=0.7, category="correctness",
                title="Mean of an empty list", path="calc.py", start_line=9, end_line=10,
                description="`mean([])` still divides by zero.",
            )
            .tool_call(
                "add_finding", severity="high", confidence=0.8, category="correctness", title="square adds one",
                path="calc.py", start_line=14, description="`square(a)` returns a*a + 1.",
            )
            .tool_call("publish_review", summary="One new problem.")
            .reply("Re-reviewed.")
        )  # fmt: skip
        async with pipeline(tmp_path, script, roles=(Role.REVIEWER,), review={"auto_bootstrap": False}) as stage:
            await enable_review(stage)
            author = Author(stage, tmp_path)
            await author.deliver("opened", await author.push(FIRST, "Add div and mean"))
            await eventually(lambda: completed(stage), within=60, what="the first review")
            before = {f.id: f for f in await findings(stage).all()}

            sha = await author.push(SECOND, "Guard div, add square")
            await author.deliver("synchronize", sha)
            await eventually(lambda: completed(stage, runs=2), within=60, what="the second review")

            github = stage.github.state
            state = reviews_of(github)
            reviews = sorted(state.reviews.values(), key=lambda r: r.id)
            assert len(reviews) == 2
            second = reviews[1]
            assert second.commit_id == sha
            new_comments = [p for p in state.placements.values() if p.review_id == second.id]
            assert [(p.path, p.line) for p in new_comments] == [("calc.py", 14)]

            after = {f.id: f for f in await findings(stage).all()}
            assert after["F2"].comment_id == before["F2"].comment_id  # confirmed, not posted again
            assert after["F2"].last_confirmed_sha == sha
            assert after["F1"].status is FindingStatus.RESOLVED
            assert after["F1"].thread_resolved
            replies = [c for c in activity_of(github).comments.values() if c.in_reply_to == before["F1"].comment_id]
            assert len(replies) == 1
            assert replies[0].body.startswith("Fixed: div() now guards b == 0.")
            thread = state.thread_of(before["F1"].comment_id or 0)
            assert thread is not None
            assert thread.resolved
            assert "1 new finding" in second.body
            # The second run reviewed the new head, checked out in the sandbox.
            assert sha[:12] in stage.model.requests[FIRST_REVIEW_STEPS].texts("system")[0]

    async def test_a_reply_on_a_finding_reaches_the_reviewer_which_dismisses_it(self, tmp_path: Path) -> None:
        script = (
            first_review()
            .tool_call(
                "update_finding", id="F2", status="dismissed", note="Agreed: callers never pass an empty list.",
                requested_by=MEMBER,
            )
            .tool_call("publish_review")
            .reply("Dismissed F2.")
        )  # fmt: skip
        async with pipeline(tmp_path, script, roles=(Role.REVIEWER,), review={"auto_bootstrap": False}) as stage:
            await enable_review(stage)
            author = Author(stage, tmp_path)
            await author.deliver("opened", await author.push(FIRST, "Add div and mean"))
            await eventually(lambda: completed(stage), within=60, what="the review")
            f2 = await findings(stage).get("F2")
            assert f2.comment_id is not None

            text = "mean() is only called with the non-empty batches of the importer."
            reply = activity_of(stage.github.state).add_comment(
                REPOSITORY, NUMBER, text, login=MEMBER, kind="review_comment", in_reply_to=f2.comment_id
            )
            payload = webhooks.review_comment(
                ORG, "widgets", NUMBER, text, author=webhooks.user(MEMBER), head_ref=BRANCH, comment_id=reply.id,
                in_reply_to=f2.comment_id, installation_id=stage.installation.id,
            )  # fmt: skip
            response = await stage.deliver_github("pull_request_review_comment", payload)
            assert response.status_code == 200, response.text
            await eventually(lambda: completed(stage, runs=2), within=60, what="the reviewer's answer")

            assert text in stage.model.requests[FIRST_REVIEW_STEPS].texts("user")[-1]
            dismissed = await findings(stage).get("F2")
            assert (dismissed.status, dismissed.closed_by) == (FindingStatus.DISMISSED, MEMBER)
            answers = [
                c for c in activity_of(stage.github.state).comments.values()
                if c.in_reply_to == f2.comment_id and c.login != MEMBER
            ]  # fmt: skip
            assert [a.body.split("\n")[0] for a in answers] == ["Agreed: callers never pass an empty list."]
            thread = reviews_of(stage.github.state).thread_of(f2.comment_id)
            assert thread is not None
            assert thread.resolved
            assert len(reviews_of(stage.github.state).reviews) == 1


class TestReadOnly:
    async def test_the_reviewer_has_no_shell_and_reads_history_with_git(self, tmp_path: Path) -> None:
        push = "cd widgets && git push origin HEAD:refs/heads/reviewer-was-here 2>&1; echo exit=$?"
        script = (
            Script()
            .tool_call("execute", command=push)
            .tool_call("write_file", file_path="/tmp/x", content="x")
            .tool_call("git", command="show", args=["--stat", "HEAD"])
            .reply("Could not push.")
        )
        async with pipeline(tmp_path, script, roles=(Role.REVIEWER,), review={"auto_bootstrap": False}) as stage:
            await enable_review(stage)
            author = Author(stage, tmp_path)
            sha = await author.push(FIRST, "Add div and mean")
            await author.deliver("opened", sha)
            await eventually(lambda: completed(stage), within=60, what="the run")

            for step, tool in ((1, "execute"), (2, "write_file")):
                answer = stage.model.requests[step].messages[-1]["content"]
                assert f"{tool} is not a valid tool" in answer
            shown = stage.model.requests[3].messages[-1]["content"]
            assert "Add div and mean" in shown
            assert "calc.py" in shown
            upstream = stage.git.repository_path(REPOSITORY)
            refs = await git("--git-dir", str(upstream), "for-each-ref", env=isolated_git_env(tmp_path))
            assert "reviewer-was-here" not in refs
