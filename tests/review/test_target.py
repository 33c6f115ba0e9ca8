"""The review target: the pull request and its diff as GitHub reports them, kept per thread."""

from __future__ import annotations

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.review.diff import Side
from drydock.review.target import ReviewTargets, fetch_target
from tests.fakes.github.reviews import PullFile, set_files
from tests.review.conftest import HEAD, NUMBER, REPOSITORY, GithubWorld


class TestTarget:
    async def test_the_pull_request_and_its_files_are_read_and_kept(
        self, world: GithubWorld, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        world.pull()
        target = await fetch_target(world.client, world.authorization, REPOSITORY, NUMBER)
        assert (target.number, target.head_sha, target.head_ref, target.base_ref) == (NUMBER, HEAD, "feature", "main")
        assert (target.title, target.author, target.state) == ("Division helpers", "octocat", "open")
        assert [(f.path, f.additions) for f in target.files] == [("calc.py", 8)]
        assert target.diff().file("calc.py").ranges(Side.RIGHT) == [(1, 10)]

        targets = ReviewTargets(redis, keys)
        assert await targets.get(thread_id) is None
        await targets.save(thread_id, target)
        kept = await targets.get(thread_id)
        assert kept == target
        assert kept is not None
        assert kept.diff() is target.diff()

    async def test_many_files_are_read_page_by_page(self, world: GithubWorld) -> None:
        world.pull()
        files = [PullFile(f"f{n}.py", additions=1, patch="@@ -0,0 +1 @@\n+x") for n in range(250)]
        set_files(world.fake.state, REPOSITORY, NUMBER, files)
        target = await fetch_target(world.client, world.authorization, REPOSITORY, NUMBER)
        assert len(target.files) == 250
        assert target.diff().check("f249.py", 1, 1).path == "f249.py"
