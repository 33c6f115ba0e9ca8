"""The coder's system prompt: the delivery duties, the reply tool of the thread's channel, and
the repository's root AGENTS.md."""

from __future__ import annotations

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.graphs.coder_prompt import coder_prompt
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.checkout import Checkout
from drydock.threads.pr_records import branch_short_id
from drydock.threads.scope import ThreadScope

THREAD = ids.github_issue("github.com", "acme", "widgets", 7)


def scope(channel: Channel, repository: str | None = "acme/widgets") -> ThreadScope:
    return ThreadScope(THREAD, "run-1", Role.CODER, repository, ReplyAddress(channel=channel))


class TestCoderPrompt:
    def test_the_agent_delivers_itself_and_replies_with_its_channels_tool(self) -> None:
        prompt = coder_prompt(scope(Channel.SLACK), Checkout("acme/widgets", "/workspace/widgets", "main"))
        assert "nothing publishes for you after you stop" in prompt
        assert "`open_pull_request`" in prompt
        assert "(`slack_reply`)" in prompt
        assert "`acme/widgets` is checked out at `/workspace/widgets`" in prompt
        assert "default branch is `main`" in prompt
        assert "Keep acting with your tools until the work is done" in prompt

    def test_the_root_agents_md_is_injected(self) -> None:
        checkout = Checkout("acme/widgets", "/w/widgets", instructions="Always run `make check`.\n")
        prompt = coder_prompt(scope(Channel.GITHUB), checkout, branch_prefix="ada/")
        assert "<agents_md>\nAlways run `make check`.\n</agents_md>" in prompt
        assert f"`ada/{ids.short_id(THREAD)}-<short-description>`" in prompt
        assert "(`github_comment`)" in prompt

    def test_a_user_who_opens_pull_requests_themselves_gets_a_pushed_branch(self) -> None:
        checkout = Checkout("acme/widgets", "/w/widgets")
        assert "stop after pushing the branch" in coder_prompt(scope(Channel.GITHUB), checkout, auto_open_pr=False)
        assert "stop after pushing the branch" not in coder_prompt(scope(Channel.GITHUB), checkout)

    def test_without_a_repository_the_agent_asks_for_one(self) -> None:
        prompt = coder_prompt(scope(Channel.LINEAR, repository=None), None)
        assert "repo:owner/name" in prompt
        assert "<agents_md>" not in prompt

    def test_the_branch_the_prompt_names_carries_the_threads_short_id(self) -> None:
        for prefix in ("drydock/", "ada/", "team-"):
            prompt = coder_prompt(scope(Channel.GITHUB), Checkout("acme/widgets", "/w/widgets"), branch_prefix=prefix)
            named = prompt.split("Name your branch `", 1)[1].split("`", 1)[0]
            branch = named.replace("<short-description>", "speed-up-parsing")
            assert branch.startswith(prefix)
            assert branch_short_id(branch) == ids.short_id(THREAD)
