"""What the analyzer learns from, against the fake GitHub and real Valkey: people's review
comments on merged pull requests (bootstrap), the outcomes of findings since a cursor
(continual); asking for a run; finishing bootstrap registers one schedule."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.infra.redis import Keys
from drydock.review.analysis import (
    AnalysisProgress,
    BootstrapState,
    Evidence,
    analyzer_thread,
    continual_schedule_id,
    finish_bootstrap,
    gather_bootstrap,
    gather_continual,
    request_analysis,
)
from drydock.review.diff import Side
from drydock.review.findings import Draft, FindingStatus, FindingStore, Severity, close
from drydock.review.guidelines import Guideline, GuidelineSource, GuidelinesStore, GuidelinesVersion, Provenance
from drydock.review.target import ReviewTarget, ReviewTargets
from drydock.roles import Role
from drydock.scheduler import Schedules
from drydock.threads.inbox import Inbox
from drydock.threads.metadata import ThreadMetadataStore
from tests.fakes.github.reviews import bot_of, human_review_comment, merge, reviews_of
from tests.review.conftest import REPOSITORY, GithubWorld


class TestBootstrapEvidence:
    async def test_peoples_comments_on_merged_pull_requests_only(self, world: GithubWorld) -> None:
        github = world.fake.state
        for number in (1, 2, 3):
            world.pull(number)
        merge(github, REPOSITORY, 1)
        merge(github, REPOSITORY, 2)
        kept = human_review_comment(github, REPOSITORY, 1, "Use a with block.", login="carol", path="a.py", line=3)
        human_review_comment(github, REPOSITORY, 1, "   ", login="carol", path="a.py", line=4)
        human_review_comment(github, REPOSITORY, 3, "Open PR.", login="carol", path="a.py", line=4)
        reviews_of(github).add_comment(REPOSITORY, 2, "bot says", user=bot_of(github), path="a.py", line=1)

        evidence = await gather_bootstrap(world.client, world.authorization, REPOSITORY, pull_requests=10)
        assert evidence.mode == "bootstrap"
        assert evidence.pull_requests == 2
        assert [(item.id, item.pull_request, item.author, item.path, item.line) for item in evidence.items] == [
            (f"C{kept.id}", 1, "carol", "a.py", 3)
        ]

    async def test_only_the_most_recently_merged_pull_requests_are_read(self, world: GithubWorld) -> None:
        github = world.fake.state
        for number in (1, 2):
            world.pull(number)
            merge(github, REPOSITORY, number)
            human_review_comment(github, REPOSITORY, number, f"note {number}", login="carol", path="a.py", line=3)
        evidence = await gather_bootstrap(world.client, world.authorization, REPOSITORY, pull_requests=1)
        assert evidence.pull_requests == 1
        assert len(evidence.items) == 1


class TestContinualEvidence:
    async def test_outcomes_changed_since_the_cursor(self, world: GithubWorld, redis: Redis, keys: Keys) -> None:
        world.pull(7)
        thread = "reviewer-thread-7"
        await ReviewTargets(redis, keys).save(
            thread, ReviewTarget(repository=REPOSITORY, number=7, head_sha="a" * 40, head_ref="f", base_ref="main")
        )
        store = FindingStore(redis, keys, thread, host="github.com", repository=REPOSITORY)
        draft = Draft(Severity.LOW, 0.5, "style", "Nit", "calc.py", 6, 6, Side.RIGHT, "A nit.")
        await store.add(draft, head_sha="a" * 40)
        open_one = Draft(Severity.LOW, 0.5, "style", "Still open", "calc.py", 9, 9, Side.RIGHT, "Open.")
        await store.add(open_one, head_sha="a" * 40)
        await store.update("F1", lambda f: close(f, FindingStatus.DISMISSED, note="noise", by="carol", head_sha=None))

        evidence = await gather_continual(
            world.client, world.authorization, redis, keys, host="github.com", repository=REPOSITORY, since=0.0,
            current=None,
        )  # fmt: skip
        assert [(item.id, item.status, item.note, item.closed_by) for item in evidence.items] == [
            ("P7.F1", "dismissed", "noise", "carol")
        ]
        later = await gather_continual(
            world.client, world.authorization, redis, keys, host="github.com", repository=REPOSITORY,
            since=evidence.until, current=None,
        )  # fmt: skip
        assert later.items == []

    def test_a_rule_may_cite_the_sources_of_the_current_rules(self) -> None:
        source = GuidelineSource(kind="review_comment", pull_request=1, comment_id=5)
        current = GuidelinesVersion(
            repository=REPOSITORY, version=1, rules=(Guideline(text="x", sources=(source,)),),
            provenance=Provenance(mode="bootstrap"), created_at=datetime.now(UTC),
        )  # fmt: skip
        evidence = Evidence(repository=REPOSITORY, mode="continual", items=[], current=current, until=time.time())
        assert evidence.sources() == {"C5": source}


class TestRequests:
    async def test_asking_for_an_analysis_creates_the_analyzer_thread_and_wakes_it(
        self, bus: Bus, redis: Redis, keys: Keys
    ) -> None:
        repository = f"acme/r{time.time_ns()}"
        thread = await request_analysis(
            bus, redis, keys, host="github.com", repository=repository, mode="bootstrap", requested_by="ada"
        )
        assert thread == analyzer_thread("github.com", repository)
        created = await ThreadMetadataStore(redis, keys).get(thread)
        assert (created.kind, created.repository) == (Role.ANALYZER, repository)
        [stored] = await Inbox(bus).read_after(thread)
        assert stored.message.references["mode"] == "bootstrap"

    async def test_bootstrap_is_claimed_once(self, redis: Redis, keys: Keys) -> None:
        progress = AnalysisProgress(redis, keys, host="github.com")
        assert await progress.claim_bootstrap(REPOSITORY)
        assert not await progress.claim_bootstrap(REPOSITORY)
        assert await progress.bootstrap_state(REPOSITORY) is BootstrapState.REQUESTED

    async def test_finishing_bootstrap_registers_the_refinement_once(self, redis: Redis, keys: Keys) -> None:
        schedules = Schedules(redis, keys)
        assert await schedules.all() == []
        first = await finish_bootstrap(
            redis, keys, host="github.com", repository=REPOSITORY, thread_id="t", every=timedelta(days=1)
        )
        second = await finish_bootstrap(
            redis, keys, host="github.com", repository=REPOSITORY, thread_id="t", every=timedelta(days=1)
        )
        assert (first, second) == (True, False)
        assert [s.id for s in await schedules.all()] == [continual_schedule_id("github.com", REPOSITORY)]
        assert await AnalysisProgress(redis, keys, host="github.com").bootstrap_state(REPOSITORY) is BootstrapState.DONE
        assert await GuidelinesStore(redis, keys, host="github.com").history(REPOSITORY) == []
