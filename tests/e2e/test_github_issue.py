"""Scenarios 1, 2 and 3: a GitHub mention becomes a pull request and a reply; a follow-up mid-run is
injected before the next model call; a review comment on the agent's PR reaches the same thread
and sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

from drydock.bus import EventType
from drydock.threads import ids
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import branch_name
from drydock.worker.roles.coder import TOOLS as CODER_TOOLS
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, Stage, pipeline, sandbox_processes
from tests.fakes.git_server import git, isolated_git_env
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import Script
from tests.waiting import eventually

ISSUE = 7
FRAMEWORK_TOOLS = [
    "ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", "execute", "task", "write_todos",
]  # fmt: skip
"""What ``deepagents`` gives the coder: file, shell, search, task and planning tools."""
CODER_TOOL_NAMES = [
    "http_request",
    "web_search",
    "fetch_url",
    "linear",
    "github_comment",
    "open_pull_request",
    "update_pull_request",
    "request_review",
    "schedule_wakeup",
    "slack_reply",
    "report_confidence",
    "submit_plan",
]
"""The coder's own tools, pinned: a tool added to or removed from the coder must change this list."""
BRANCH = branch_name(ids.github_issue("github.com", ORG, "widgets", ISSUE), "fix add")
"""Named as the coder's prompt asks: the thread's short id after the prefix."""
FIX = (
    f"cd widgets && git checkout -q -b {BRANCH} && sed -i 's/a - b/a + b/' calc.py && python3 -m unittest -q "
    f"&& git commit -qam 'Fix add()' && git push -q -u origin {BRANCH} && git log -1 --format=%an"
)


def mention(stage: Stage, body: str, *, number: int = ISSUE) -> dict[str, object]:
    """An issue comment by an organization member, as it exists on GitHub and as its webhook."""
    comment = activity_of(stage.github.state).add_comment(REPOSITORY, number, body, login=MEMBER)
    return webhooks.issue_comment(
        ORG,
        "widgets",
        number,
        body,
        author=webhooks.user(MEMBER),
        comment_id=comment.id,
        installation_id=stage.installation.id,
    )


def fix_script() -> Script:
    return (
        Script()
        .tool_call("execute", command=FIX)
        .tool_call("open_pull_request", title="Fix add()", body=f"Fixes #{ISSUE}.", head=BRANCH)
        .tool_call("github_comment", body="I fixed `add()` and opened a pull request.")
        .reply("Fixed add(), opened the pull request and replied on the issue.")
    )


async def completed(stage: Stage, thread_id: str, runs: int = 1) -> bool:
    events = await stage.events(thread_id)
    return sum(event.type is EventType.COMPLETED for event in events) >= runs


class TestMentionToPullRequest:
    async def test_an_issue_mention_ends_in_a_pushed_branch_a_pull_request_and_a_reply(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, fix_script()) as stage:
            thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
            response = await stage.deliver_github("issue_comment", mention(stage, "@drydock please fix add()"))
            assert response.status_code == 200, response.text

            await eventually(lambda: completed(stage, thread_id), within=60, what="the run to complete")

            pulls = stage.github.state.pulls_of(REPOSITORY)
            assert [(pull.head_ref, pull.base_ref, pull.title) for pull in pulls] == [(BRANCH, "main", "Fix add()")]
            record = await stage.records.find("github.com", REPOSITORY, pulls[0].number)
            assert record is not None
            assert record.thread_id == thread_id

            upstream = stage.git.repository_path(REPOSITORY)
            env = isolated_git_env(tmp_path)
            log = await git("--git-dir", str(upstream), "log", "-1", "--format=%an <%ae>|%s", BRANCH, env=env)
            assert log.strip() == "Drydock <drydock@users.noreply.github.com>|Fix add()"
            fixed = await git("--git-dir", str(upstream), "show", f"{BRANCH}:calc.py", env=env)
            assert "return a + b" in fixed

            comments = activity_of(stage.github.state).comments_on(REPOSITORY, ISSUE)
            assert [c.rendered for c in comments if c.login != MEMBER] == ["I fixed `add()` and opened a pull request."]
            assert activity_of(stage.github.state).reactions_to(f"issue_comment:{comments[0].id}")

            # The tests ran in the sandbox and passed; the model saw their output.
            execute_result = stage.model.requests[1].messages[-1]
            assert execute_result["role"] == "tool"
            assert "OK" in execute_result["content"]
            # The coder's exact tools: the framework's own, then the coder list of the registry.
            assert stage.model.requests[0].tool_names == [*FRAMEWORK_TOOLS, *CODER_TOOL_NAMES]
            assert list(CODER_TOOLS) == CODER_TOOL_NAMES
            # The repository's AGENTS.md was in the system prompt.
            assert "python3 -m unittest -q" in stage.model.requests[0].texts("system")[0]

            # Clone and push went through the proxy with installation tokens; none reached the sandbox.
            tokens = list(stage.github.state.tokens)
            assert tokens
            await stage.released(thread_id)
            for path in (tmp_path / "sandboxes").rglob("*"):
                if path.is_file() and not path.is_symlink():
                    content = path.read_bytes()
                    assert not any(token.encode() in content for token in tokens), path
        assert sandbox_processes(tmp_path / "sandboxes") == [], "the stage stopped its sandboxes"

    async def test_a_mention_with_a_model_runs_on_that_model_and_keeps_it_for_the_thread(self, tmp_path: Path) -> None:
        script = Script().tool_call("github_comment", body="Looking with o3.").reply("Done.")
        async with pipeline(tmp_path, script) as stage:
            thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock model=o3 effort=high look at add()"))
            await eventually(lambda: completed(stage, thread_id), within=60, what="the run to complete")

            assert [request.model for request in stage.model.requests] == ["o3", "o3"]
            assert {request.body.get("reasoning_effort") for request in stage.model.requests} == {"high"}
            thread = await ThreadMetadataStore(stage.runtime.redis, stage.runtime.keys).get(thread_id)
            assert (thread.model, thread.effort) == ("o3", "high")

    async def test_a_follow_up_mid_run_is_injected_before_the_next_model_call(self, tmp_path: Path) -> None:
        script = (
            Script()
            .tool_call("execute", command="sleep 2 && echo looked", latency=0)
            .tool_call("github_comment", body="Also renamed it, as asked.")
            .reply("Done.")
        )
        async with pipeline(tmp_path, script) as stage:
            thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock please look at add()"))
            await asyncio.wait_for(stage.model.wait_for_requests(1), 30)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock and rename it to plus()"))

            await eventually(lambda: completed(stage, thread_id), within=60, what="the run to complete")

            second = stage.model.requests[1]
            assert "rename it to plus()" in second.texts("user")[-1]
            assert second.messages[-1]["role"] == "user"
            assert len(stage.model.requests) == 3
            started = [event for event in await stage.events(thread_id) if event.type is EventType.STARTED]
            assert len(started) == 1

    async def test_a_review_comment_on_the_agents_pull_request_reaches_the_same_thread_and_sandbox(
        self, tmp_path: Path
    ) -> None:
        script = (
            fix_script()
            .tool_call("execute", command="cd widgets && git rev-parse --abbrev-ref HEAD")
            .reply("Still on the branch.")
        )
        async with pipeline(tmp_path, script) as stage:
            thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock please fix add()"))
            await eventually(lambda: completed(stage, thread_id), within=60, what="the first run")
            metadata = ThreadMetadataStore(stage.runtime.redis, stage.runtime.keys)
            sandbox = (await metadata.get(thread_id)).sandbox_id
            pull = stage.github.state.pulls_of(REPOSITORY)[0]

            question = "@drydock which branch is this on?"
            comment = activity_of(stage.github.state).add_comment(
                REPOSITORY, pull.number, question, login=MEMBER, kind="review_comment"
            )
            review_comment = webhooks.review_comment(
                ORG,
                "widgets",
                pull.number,
                question,
                author=webhooks.user(MEMBER),
                head_ref=BRANCH,
                comment_id=comment.id,
                installation_id=stage.installation.id,
            )
            response = await stage.deliver_github("pull_request_review_comment", review_comment)
            assert response.status_code == 200, response.text
            await eventually(lambda: completed(stage, thread_id, runs=2), within=60, what="the second run")

            assert (await metadata.get(thread_id)).sandbox_id == sandbox
            branch_answer = stage.model.requests[-1].messages[-1]
            assert BRANCH in branch_answer["content"]
            assert "which branch is this on?" in stage.model.requests[-2].texts("user")[-1]
            # A fresh installation token for the sandbox at its creation; the second run, within
            # DRYDOCK_PROXY_GRANT_REFRESH_INTERVAL of the first, only checks its grant (a refresh after
            # the interval mints one: tests/credentials); the channel clients' installation-wide
            # tokens stay cached.
            minted = list(stage.github.state.tokens.values())
            assert len([token for token in minted if token.repositories is not None]) == 1
            assert len([token for token in minted if token.repositories is None]) <= 2
