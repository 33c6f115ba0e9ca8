"""The analyzer end to end: bootstrap learns guidelines v1 (with provenance) from people's review
comments on merged pull requests, which registers the continual refinement once; the scheduled
continual run learns v2 from the outcomes of the reviewer's findings. The skills it follows are
virtual files: its sandbox never receives them. Too little history writes nothing and schedules
nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from drydock.bus import EventType
from drydock.review.analysis import (
    AnalysisProgress,
    BootstrapState,
    analyzer_thread,
    continual_schedule_id,
    request_analysis,
)
from drydock.review.diff import Side
from drydock.review.findings import Draft, FindingStatus, FindingStore, Severity, close
from drydock.review.guidelines import GuidelinesStore
from drydock.review.target import ReviewTarget, ReviewTargets
from drydock.roles import Role
from drydock.scheduler import Schedules
from drydock.threads import ids
from drydock.worker.roles.analyzer import TOOLS as ANALYZER_TOOLS
from tests.e2e.pipeline import ORG, REPOSITORY, Stage, pipeline
from tests.fakes.github import webhooks
from tests.fakes.github.activity import Reaction, activity_of
from tests.fakes.github.reviews import bot_of, human_review_comment, merge, reviews_of
from tests.fakes.github.state import PullRequest
from tests.fakes.openai_server import Script
from tests.waiting import eventually

THREAD = analyzer_thread("github.com", REPOSITORY)
SCHEDULE = continual_schedule_id("github.com", REPOSITORY)
ANALYZER_READ_TOOLS = ["ls", "read_file", "glob", "grep"]
HISTORY = [
    (11, "calc.py", "Please close the file with a `with` block."),
    (11, "io.py", "nit: this reads better as a list comprehension"),
    (12, "store.py", "Use a context manager here so the handle is closed on errors."),
    (13, "net.py", "Open sockets in a with statement; we leak them otherwise."),
]


def pull(stage: Stage, number: int, *, merged: bool) -> None:
    github = stage.github.state
    github.pulls[(REPOSITORY, number)] = PullRequest(
        id=github.next_id(), repository=REPOSITORY, number=number, title=f"Change {number}", body="",
        head_ref=f"change-{number}", head_sha=f"{number:040x}", base_ref="main", draft=False,
        user=webhooks.user("carol"),
    )  # fmt: skip
    activity_of(github).open_issue(REPOSITORY, number, pull_request=True)
    if merged:
        merge(github, REPOSITORY, number)


def history(stage: Stage) -> dict[str, int]:
    """Merged pull requests with people's review comments (and one open pull request whose
    comments do not count); the comments' evidence ids by their text's first word."""
    for number in (11, 12, 13):
        pull(stage, number, merged=True)
    pull(stage, 14, merged=False)
    found = {}
    for number, path, body in HISTORY:
        comment = human_review_comment(stage.github.state, REPOSITORY, number, body, login="carol", path=path, line=3)
        found[body.split()[0]] = comment.id
    human_review_comment(stage.github.state, REPOSITORY, 14, "Open PR remark.", login="carol", path="x.py", line=1)
    return found


async def completed(stage: Stage, runs: int = 1) -> bool:
    events = await stage.events(THREAD)
    return sum(event.type is EventType.COMPLETED and not event.data.get("skipped") for event in events) >= runs


async def skipped(stage: Stage) -> bool:
    return any(event.type is EventType.COMPLETED and event.data.get("skipped") for event in await stage.events(THREAD))


async def outcomes(stage: Stage) -> tuple[str, str]:
    """A pull request the reviewer reviewed: one finding posted and dismissed by a person after a
    reply and a thumbs-down, one resolved. Returns their evidence ids."""
    redis, keys = stage.runtime.redis, stage.runtime.keys
    pull(stage, 20, merged=False)
    thread = ids.reviewer("github.com", ORG, "widgets", 20)
    await ReviewTargets(redis, keys).save(
        thread,
        ReviewTarget(repository=REPOSITORY, number=20, head_sha="e" * 40, head_ref="change-20", base_ref="main"),
    )
    store = FindingStore(redis, keys, thread, host="github.com", repository=REPOSITORY)

    def draft(title: str, line: int) -> Draft:
        return Draft(Severity.MEDIUM, 0.6, "resources", title, "calc.py", line, line, Side.RIGHT, "Use `with`.")

    posted = (await store.add(draft("File not closed", 4), head_sha="e" * 40)).finding
    fixed = (await store.add(draft("Socket not closed", 8), head_sha="e" * 40)).finding
    github = stage.github.state
    comment = reviews_of(github).add_comment(
        REPOSITORY, 20, "**Medium** · resources · File not closed", user=bot_of(github), path="calc.py", line=4
    )
    activity = activity_of(github)
    activity.add_comment(
        REPOSITORY, 20, "This is a generator, it closes itself.", login="carol", kind="review_comment",
        in_reply_to=comment.id,
    )  # fmt: skip
    activity.reactions.append(Reaction(github.next_id(), f"review_comment:{comment.id}", "-1", "carol"))
    await store.update(posted.id, lambda f: f.model_copy(update={"comment_id": comment.id}))
    await store.update(
        posted.id, lambda f: close(f, FindingStatus.DISMISSED, note="generators close themselves", by="carol",
                                   head_sha="e" * 40)
    )  # fmt: skip
    await store.update(
        fixed.id, lambda f: close(f, FindingStatus.RESOLVED, note=None, by="reviewer", head_sha="f" * 40)
    )
    return f"P20.{posted.id}", f"P20.{fixed.id}"


class TestBootstrapThenContinual:
    async def test_bootstrap_writes_v1_schedules_refinement_once_and_the_continual_run_writes_v2(
        self, tmp_path: Path
    ) -> None:
        script = Script()
        async with pipeline(tmp_path, script, roles=(Role.ANALYZER,), review={"bootstrap_min_comments": 3}) as stage:
            redis, keys = stage.runtime.redis, stage.runtime.keys
            comments = history(stage)
            (
                script.tool_call("read_file", file_path="/skills/analyzer-bootstrap/SKILL.md")
                .tool_call("read_file", file_path="/analysis/evidence.json", limit=1000)
                .tool_call(
                    "save_guidelines",
                    rules=[
                        {
                            "text": "Close files and sockets with a context manager.",
                            "category": "Resources",
                            "sources": [f"C{comments['Please']}", f"C{comments['Use']}", f"C{comments['Open']}"],
                        }
                    ],
                    summary="Three comments on three pull requests ask for context managers; one nit left out.",
                )
                .reply("Bootstrapped the guidelines.")
            )
            schedules = Schedules(redis, keys)
            assert await schedules.get(SCHEDULE) is None

            await request_analysis(
                stage.runtime.bus, redis, keys, host="github.com", repository=REPOSITORY, mode="bootstrap",
                requested_by="test",
            )  # fmt: skip
            await eventually(lambda: completed(stage), within=60, what="the bootstrap run")

            store = GuidelinesStore(redis, keys, host="github.com")
            v1 = await store.latest(REPOSITORY)
            assert v1 is not None
            assert v1.version == 1
            assert [rule.text for rule in v1.rules] == ["Close files and sockets with a context manager."]
            assert v1.rules[0].category == "resources"
            assert sorted((s.pull_request, s.comment_id) for s in v1.rules[0].sources) == sorted(
                [(11, comments["Please"]), (12, comments["Use"]), (13, comments["Open"])]
            )
            assert v1.provenance.mode == "bootstrap"
            assert v1.provenance.thread_id == THREAD
            assert v1.provenance.evidence == {"pull_requests": 3, "review_comments": 4, "findings": 0}
            assert not v1.approved
            assert await AnalysisProgress(redis, keys, host="github.com").bootstrap_state(REPOSITORY) is (
                BootstrapState.DONE
            )
            assert [s.id for s in await schedules.all()] == [SCHEDULE]

            first = stage.model.requests[0]
            assert first.tool_names == [*ANALYZER_READ_TOOLS, *ANALYZER_TOOLS]
            assert "/skills/analyzer-bootstrap/SKILL.md" in first.texts("system")[0]
            skill = stage.model.requests[1].messages[-1]["content"]
            assert "Bootstrap a repository's review guidelines" in skill
            evidence = stage.model.requests[2].messages[-1]["content"]
            assert "Open PR remark." not in evidence
            assert "list comprehension" in evidence

            # The continual refinement, fired by the scheduler's next occurrence.
            dismissed, resolved = await outcomes(stage)
            (
                script.tool_call("read_file", file_path="/analysis/evidence.json", limit=1000)
                .tool_call(
                    "save_guidelines",
                    rules=[
                        {
                            "text": "Close files and sockets with a context manager (generators close themselves).",
                            "category": "resources",
                            "sources": [f"C{comments['Please']}", f"C{comments['Use']}", dismissed, resolved],
                        }
                    ],
                    summary="A dismissed finding showed the exception for generators.",
                )
                .reply("Refined.")
            )
            due = await schedules.next_due(SCHEDULE)
            assert due is not None
            assert await schedules.fire_due(stage.runtime.bus, now=due + timedelta(seconds=1)) == 1
            await eventually(lambda: completed(stage, runs=2), within=60, what="the continual run")

            v2 = await store.latest(REPOSITORY)
            assert v2 is not None
            assert (v2.version, v2.provenance.mode, v2.provenance.based_on) == (2, "continual", 1)
            finding_sources = [s for s in v2.rules[0].sources if s.kind == "finding"]
            assert sorted((s.pull_request, s.finding_id) for s in finding_sources) == [(20, "F1"), (20, "F2")]
            continual = stage.model.requests[4]
            assert "/skills/analyzer-continual/SKILL.md" in continual.texts("system")[0]
            outcome = stage.model.requests[5].messages[-1]["content"]
            assert "generators close themselves" in outcome
            assert "This is a generator, it closes itself." in outcome
            assert '"-1": 1' in outcome
            assert [s.id for s in await schedules.all()] == [SCHEDULE]
            later = await schedules.next_due(SCHEDULE)
            assert later is not None
            assert later > datetime.now(UTC)

            # The skills were served, never copied into the sandbox.
            for path in (tmp_path / "sandboxes").rglob("*"):
                if path.is_file() and not path.is_symlink():
                    assert b"Bootstrap a repository's review guidelines" not in path.read_bytes(), path


class TestTooLittleHistory:
    async def test_bootstrap_without_enough_comments_writes_and_schedules_nothing(self, tmp_path: Path) -> None:
        async with pipeline(tmp_path, Script(), roles=(Role.ANALYZER,)) as stage:
            history(stage)
            redis, keys = stage.runtime.redis, stage.runtime.keys
            await request_analysis(
                stage.runtime.bus, redis, keys, host="github.com", repository=REPOSITORY, mode="bootstrap",
                requested_by="test",
            )  # fmt: skip
            await eventually(lambda: skipped(stage), within=60, what="the skipped bootstrap")

            assert stage.model.requests == []
            assert await GuidelinesStore(redis, keys, host="github.com").history(REPOSITORY) == []
            assert await Schedules(redis, keys).all() == []
            progress = await AnalysisProgress(redis, keys, host="github.com").get(REPOSITORY)
            assert progress["bootstrap"] == BootstrapState.INSUFFICIENT.value
            assert progress["bootstrap_comments"] == "4"
