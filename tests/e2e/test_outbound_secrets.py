"""Issue 24, items 1 and 5 end to end: a token planted in a command's output, which the scripted
model repeats in its pull request, its comment and its reply, is redacted everywhere it leaves
(the pull request's title and body, the comment, the run events the dashboard shows), as is the
sandbox's own grant that the same command prints; and each model call's tokens and cost reach
its run event and the run's roll-up."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drydock.bus import EventType
from drydock.credentials.sandbox_access import GRANT_PATH
from drydock.model_catalog import BUILTIN_PRICES
from drydock.threads import ids
from drydock.usage import Dimension, UsageLedger
from tests.e2e.pipeline import GITHUB_SECRET, MEMBER, MODEL, REPOSITORY, pipeline
from tests.e2e.test_github_issue import BRANCH, FIX, ISSUE, completed, mention
from tests.fakes.github.activity import activity_of
from tests.fakes.openai_server import Script
from tests.waiting import eventually

TOKEN = "ghp_" + "Pl4nt3dT0k3nAbCdEfGhIjKlMnOpQrStUv12"
PLANT = (
    f"echo 'remote: https://x-access-token:{TOKEN}@github.com/acme/widgets.git' "
    "&& cat ~/.config/drydock/grant.gitconfig"
)
NOTE = "[redacted: GitHub token]"


def leaky_script() -> Script:
    return (
        Script()
        .tool_call("execute", command=f"{PLANT} && {FIX}")
        .usage(prompt=2_000, completion=300, cached=1_200, reasoning=120)
        .tool_call(
            "open_pull_request", title=f"Fix add() {TOKEN}", body=f"Fixes #{ISSUE}. Remote token: {TOKEN}", head=BRANCH
        )
        .tool_call("github_comment", body=f"Done. The remote said {TOKEN}; the webhook secret is {GITHUB_SECRET}.")
        .reply(f"Fixed add(); the token was {TOKEN}.")
    )


class TestNoSecretLeaves:
    async def test_a_planted_token_is_redacted_in_the_pull_request_the_comment_and_the_events(
        self, tmp_path: Path
    ) -> None:
        async with pipeline(tmp_path, leaky_script()) as stage:
            thread_id = ids.github_issue("github.com", "acme", "widgets", ISSUE)
            await stage.deliver_github("issue_comment", mention(stage, "@drydock please fix add()"))
            await eventually(lambda: completed(stage, thread_id), within=90, what="the run to complete")

            # The model saw the token in the command's output: the sandbox is not censored.
            assert TOKEN in stage.model.requests[1].messages[-1]["content"]

            [pull] = stage.github.state.pulls_of(REPOSITORY)
            assert TOKEN not in pull.title
            assert TOKEN not in (pull.body or "")
            assert pull.title == f"Fix add() {NOTE}"
            assert pull.body == f"Fixes #{ISSUE}. Remote token: {NOTE}"

            comments = [
                c.rendered for c in activity_of(stage.github.state).comments_on(REPOSITORY, ISSUE) if c.login != MEMBER
            ]
            webhook_secret = "[redacted: Drydock's DRYDOCK_GITHUB_WEBHOOK_SECRET]"
            assert comments == [f"Done. The remote said {NOTE}; the webhook secret is {webhook_secret}."]

            events = await stage.events(thread_id)
            shown = "\n".join(event.model_dump_json() for event in events)
            assert TOKEN not in shown
            assert GITHUB_SECRET not in shown
            assert NOTE in shown
            tool_outputs = [
                e.data["output"] for e in events if e.type is EventType.TOOL_CALL and e.data["name"] == "execute"
            ]
            assert f"x-access-token:{NOTE}@github.com" in tool_outputs[0]
            # The sandbox's own grant, which git's configuration shows, is one of Drydock's secrets.
            await stage.released(thread_id)
            [grant_config] = list((tmp_path / "sandboxes").rglob("grant.gitconfig"))
            [grant] = set(re.findall(rf"/{GRANT_PATH}/([^/]+)/git/", grant_config.read_text()))
            assert grant not in shown
            assert "[redacted: Drydock's sandbox grant]" in tool_outputs[0]
            [done] = [e for e in events if e.type is EventType.COMPLETED]
            assert done.data["summary"] == f"Fixed add(); the token was {NOTE}."

            # Usage and cost: in the model-call event and in the run's roll-up.
            calls = [e for e in events if e.type is EventType.MODEL_CALL]
            first = calls[0].data
            price = BUILTIN_PRICES[MODEL]
            assert (first["input_tokens"], first["cached_input_tokens"], first["output_tokens"]) == (2_000, 1_200, 300)
            assert first["reasoning_tokens"] == 120
            assert first["cost_usd"] == pytest.approx(price.cost(2_000, 1_200, 300))
            ledger = UsageLedger(stage.runtime.redis, stage.runtime.keys)
            run = await ledger.run(calls[0].run_id)
            assert run.calls == len(stage.model.requests)
            assert run.cost_usd == pytest.approx(sum(e.data["cost_usd"] for e in calls))
            assert (await ledger.day(Dimension.REPOSITORY, REPOSITORY)).calls == run.calls
