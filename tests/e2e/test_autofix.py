"""Autofix end to end, on the real ingress, coder worker, credential proxy and autofix
controller, with the GitHub double and the scripted model. The test plays CI: after each push
it tells the GitHub double where the branch is and which checks passed, and delivers the
webhooks GitHub would send.

1. A failing check on the agent's pull request → a repair run → the fix is pushed (after a
   high confidence) → the checks pass → no further runs, although the monitor keeps scanning.
2. A repair run with low confidence → its push is refused by the proxy and it explains its
   diagnosis on the pull request instead.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from nats.js.errors import NotFoundError

from drydock.accounts import Provider, RepositorySettings, UserProfile
from drydock.autofix.repairs import Repairs
from drydock.bus import EventType, RunEvent, Trigger, subjects
from drydock.bus.streams import EVENTS_STREAM
from drydock.threads import Inbox, ids
from drydock.threads.pr_records import branch_name
from tests.e2e.pipeline import MEMBER, ORG, REPOSITORY, Stage, pipeline
from tests.fakes.git_server import git, isolated_git_env
from tests.fakes.github import webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.history import history_of
from tests.fakes.openai_server import Script
from tests.waiting import eventually

ISSUE = 7
PULL = 8
"""The pull request the first run opens: issues and pull requests share numbers, and #7 exists."""
BRANCH = branch_name(ids.github_issue("github.com", ORG, "widgets", ISSUE), "mul bug")
"""Named as the coder's prompt asks: the thread's short id after the prefix."""
MEMBER_ID = 583231
USER = "user-octocat"
BROKEN = (
    f"cd widgets && git checkout -q -b {BRANCH} && sed -i 's/a - b/a * b/' calc.py "
    f"&& git commit -qam 'Rework add()' && git push -q -u origin {BRANCH}"
)
FIX = (
    "cd widgets && sed -i 's/a \\* b/a + b/' calc.py && python3 -m unittest -q "
    f"&& git commit -qam 'Fix add(): add, not multiply' && git push -q origin {BRANCH}"
)
TRY_PUSH = (
    "cd widgets && echo '# maybe' >> calc.py && git commit -qam 'Guess' "
    f"&& git push -q origin {BRANCH} 2>&1; echo exit=$?"
)
EXPLANATION = "I could not find the cause with enough confidence: the failure does not reproduce in my sandbox."


def first_run() -> Script:
    return (
        Script()
        .tool_call("execute", command=BROKEN)
        .tool_call("open_pull_request", title="Rework add()", body=f"For #{ISSUE}.", head=BRANCH)
        .tool_call("github_comment", body="Opened a pull request.")
        .reply("Opened the pull request.")
    )


async def arrange(stage: Stage) -> str:
    """Autofix on for the member and the repository; the member mentions the agent on the issue."""
    await stage.accounts.link(Provider.GITHUB, str(MEMBER_ID), USER)
    await stage.accounts.save_profile(UserProfile(user_id=USER, autofix=True))
    await stage.accounts.save_repository(RepositorySettings(full_name=REPOSITORY, autofix=True))
    body = "@drydock please rework add()"
    comment = activity_of(stage.github.state).add_comment(REPOSITORY, ISSUE, body, login=MEMBER)
    payload = webhooks.issue_comment(
        ORG, "widgets", ISSUE, body, author=webhooks.user(MEMBER, MEMBER_ID), comment_id=comment.id,
        installation_id=stage.installation.id,
    )  # fmt: skip
    response = await stage.deliver_github("issue_comment", payload)
    assert response.status_code == 200, response.text
    thread_id = ids.github_issue("github.com", ORG, "widgets", ISSUE)
    await eventually(lambda: runs_completed(stage, thread_id, 1), within=60, what="the first run")
    assert [pull.number for pull in stage.github.state.pulls_of(REPOSITORY)] == [PULL]
    return thread_id


async def runs_completed(stage: Stage, thread_id: str, count: int) -> bool:
    return len(await thread_events(stage, thread_id, EventType.COMPLETED)) >= count


async def ci(stage: Stage, conclusion: str) -> str:
    """Play CI: GitHub learns the pushed branch, the check ``tests`` reports ``conclusion`` on its
    head, and GitHub's webhooks for it are delivered. Returns the head."""
    env = isolated_git_env(stage.root)
    branches = await history_of(stage.github.state).sync_from(REPOSITORY, stage.git.repository_path(REPOSITORY), env)
    head = branches[BRANCH]
    history_of(stage.github.state).add_check_run(REPOSITORY, "tests", head, conclusion)
    check_run = webhooks.check_run(
        ORG, "widgets", conclusion=conclusion, head_sha=head, pull_numbers=(PULL,), head_branch=BRANCH,
        installation_id=stage.installation.id,
    )  # fmt: skip
    suite = webhooks.check_suite(
        ORG, "widgets", conclusion=conclusion, head_sha=head, head_branch=BRANCH, pull_numbers=(PULL,),
        installation_id=stage.installation.id,
    )  # fmt: skip
    for event, payload in (("check_run", check_run), ("check_suite", suite)):
        response = await stage.deliver_github(event, payload)
        assert response.status_code == 200, response.text
    return head


async def thread_events(stage: Stage, thread_id: str, kind: EventType) -> list[RunEvent]:
    """The thread's events of one type, read by subject from the stream, oldest first."""
    found: list[RunEvent] = []
    seq = 0
    subject = subjects.event(thread_id, kind.value)
    while True:
        try:
            raw = await stage.runtime.bus.js.get_msg(EVENTS_STREAM, seq=seq + 1, subject=subject, next=True)
        except NotFoundError:
            return found
        assert raw.seq is not None
        assert raw.data is not None
        found.append(RunEvent.model_validate_json(raw.data))
        seq = raw.seq


async def autofix_decisions(stage: Stage, thread_id: str) -> list[tuple[str, str]]:
    events = await thread_events(stage, thread_id, EventType.AUTOFIX)
    return [(str(event.data["outcome"]), str(event.data.get("rule", ""))) for event in events]


def settled(decisions: list[tuple[str, str]]) -> None:
    """One repair dispatched and ended; every other decision a skip of what was already repaired
    (the second webhook of the same failure, decided in whatever order)."""
    assert decisions.count(("dispatch", "repair")) == 1
    assert decisions.count(("repair_ended", "")) == 1
    assert set(decisions) <= {("dispatch", "repair"), ("skip", "already_processed"), ("repair_ended", "")}


async def repair_ended(stage: Stage, thread_id: str) -> bool:
    return await Repairs(stage.runtime.redis, stage.runtime.keys).active(thread_id) is None


async def upstream(stage: Stage, *args: str) -> str:
    bare = stage.git.repository_path(REPOSITORY)
    return (await git("--git-dir", str(bare), *args, env=isolated_git_env(stage.root))).strip()


class TestAutofix:
    async def test_a_failing_check_is_repaired_once_and_nothing_more_happens_when_checks_pass(
        self, tmp_path: Path
    ) -> None:
        script = (
            first_run()
            .tool_call("report_confidence", confidence=0.9, diagnosis="add() multiplies instead of adding.")
            .tool_call("execute", command=FIX)
            .reply("Fixed add() on the branch; the tests pass.")
        )
        async with pipeline(tmp_path, script, autofix_controller=True, autofix={"monitor_interval": 1}) as stage:
            thread_id = await arrange(stage)
            broken = await ci(stage, "failure")

            await eventually(lambda: runs_completed(stage, thread_id, 2), within=60, what="the repair run")

            repair_request = stage.model.requests[4].texts("user")[-1]
            assert "`tests` failed on your pull request acme/widgets#8" in repair_request
            assert "report_confidence" in repair_request
            assert len(await thread_events(stage, thread_id, EventType.STARTED)) == 2
            fixed = await upstream(stage, "rev-parse", BRANCH)
            assert fixed != broken
            assert "return a + b" in await upstream(stage, "show", f"{BRANCH}:calc.py")
            assert await upstream(stage, "log", "-1", "--format=%s", BRANCH) == "Fix add(): add, not multiply"
            assert await thread_events(stage, thread_id, EventType.PROXY_DENIED) == []
            await eventually(lambda: repair_ended(stage, thread_id), what="the repair to end with its run")

            assert await ci(stage, "success") == fixed
            await asyncio.sleep(3)  # three monitor scans, and time for any stray decision

            settled(await autofix_decisions(stage, thread_id))
            assert not await runs_completed(stage, thread_id, 3)
            assert len(stage.model.requests) == 7
            assert stage.model.unscripted == []
            messages = await Inbox(stage.runtime.bus).read_after(thread_id)
            assert [stored.message.trigger for stored in messages] == [Trigger.MENTION, Trigger.REPAIR]

    async def test_a_low_confidence_repair_explains_on_the_pull_request_and_its_push_is_refused(
        self, tmp_path: Path
    ) -> None:
        script = (
            first_run()
            .tool_call("report_confidence", confidence=0.3, diagnosis="Cannot reproduce the failure.")
            .tool_call("execute", command=TRY_PUSH)
            .tool_call("github_comment", body=EXPLANATION, number=PULL)
            .reply("Explained on the pull request instead of pushing.")
        )
        async with pipeline(tmp_path, script, autofix_controller=True, autofix={"monitor_interval": 3600}) as stage:
            thread_id = await arrange(stage)
            broken = await ci(stage, "failure")

            await eventually(lambda: runs_completed(stage, thread_id, 2), within=60, what="the repair run")

            push_output = stage.model.requests[6].messages[-1]["content"]
            assert "push refused: this thread is in an autofix repair of acme/widgets#8" in push_output
            assert "(0.3 is recorded)" in push_output
            assert await upstream(stage, "rev-parse", BRANCH) == broken
            comments = activity_of(stage.github.state).comments_on(REPOSITORY, PULL)
            assert [comment.rendered for comment in comments] == [EXPLANATION]
            denials = await thread_events(stage, thread_id, EventType.PROXY_DENIED)
            assert {event.data["reason"] for event in denials} == {"confidence"}
            await eventually(lambda: repair_ended(stage, thread_id), what="the repair to end with its run")
            settled(await autofix_decisions(stage, thread_id))
