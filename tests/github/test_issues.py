"""Issues and comments: comments read across pages up to a limit, oldest first."""

from __future__ import annotations

from drydock.github import GithubClient
from tests.fakes.github import FakeGithub
from tests.fakes.github.activity import activity_of
from tests.fakes.github.state import Installation
from tests.github.conftest import REPO


class TestComments:
    async def test_comments_are_read_across_pages_oldest_first_up_to_the_limit(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity = activity_of(github.state)
        activity.open_issue(REPO, 7)
        for index in range(210):
            activity.add_comment(REPO, 7, f"comment {index}", login="ada")
        everything = await client.list_comments(installation.id, REPO, 7)
        assert [comment["body"] for comment in everything] == [f"comment {index}" for index in range(210)]
        first = await client.list_comments(installation.id, REPO, 7, limit=120)
        assert [comment["body"] for comment in first] == [f"comment {index}" for index in range(120)]

    async def test_a_comment_and_its_reaction(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity_of(github.state).open_issue(REPO, 8)
        comment = await client.post_comment(None, REPO, 8, "hello")
        await client.react(None, REPO, "issue_comment", int(comment["id"]), "rocket")
        reactions = activity_of(github.state).reactions_to(f"issue_comment:{comment['id']}")
        assert [reaction.content for reaction in reactions] == ["rocket"]
