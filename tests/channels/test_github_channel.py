"""The channel contract for GitHub, against the fake GitHub with the Drydock App installed on ``acme``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from drydock.bus.envelopes import InboxMessage, ReplyAddress
from drydock.channels.github.adapter import ADAPTER
from tests.channels.channel_contract import ChannelContract, Mention
from tests.fakes import signing
from tests.fakes.github import App, FakeGithub, Installation
from tests.fakes.github import webhooks as payloads
from tests.fakes.github.activity import activity_of
from tests.ingress.conftest import GITHUB_SECRET, HOST, ORG, RunningIngress, trust


@dataclass
class GithubDouble:
    fake: FakeGithub
    app: App
    installation: Installation


class TestGithubChannel(ChannelContract):
    adapter = ADAPTER
    signature_header = "X-Hub-Signature-256"

    @pytest.fixture
    async def double(self) -> AsyncIterator[GithubDouble]:
        async with FakeGithub() as fake:
            app = fake.create_app("drydock")
            yield GithubDouble(fake, app, fake.install(app, ORG))

    def sections(self, double: GithubDouble) -> dict[str, dict[str, Any]]:
        return {
            "github": {
                "webhook_secret": GITHUB_SECRET,
                "app_slug": "drydock",
                "api_url": double.fake.base_url,
                "app_id": double.app.id,
                "private_key": double.app.private_key_pem,
            }
        }

    def secret(self, double: GithubDouble) -> str:
        return GITHUB_SECRET

    async def arrange(self, running: RunningIngress, repo: str) -> None:
        await trust(running, repo)

    def mention(self, double: GithubDouble, secret: str, repo: str) -> Mention:
        activity = activity_of(double.fake.state)
        number = activity.next_id()
        words = "please fix the flaky test"
        body = f"@drydock {words}"
        comment = activity.add_comment(f"{ORG}/{repo}", number, body, login="octocat")
        payload = payloads.issue_comment(
            ORG, repo, number, body, comment_id=comment.id, installation_id=double.installation.id
        )
        key = f"github:{HOST}:{ORG}/{repo}:issue:{number}".lower()
        return Mention(signing.github(secret, "issue_comment", payload), key, words)

    def replies(self, double: GithubDouble, address: ReplyAddress) -> list[str]:
        comments = activity_of(double.fake.state).comments_on(
            address.address["repository"], int(address.address["number"])
        )
        return [comment.rendered for comment in comments if comment.login.endswith("[bot]")]

    def acknowledged(self, double: GithubDouble, message: InboxMessage) -> bool:
        target = f"issue_comment:{message.references['comment_id']}"
        return any(reaction.content == "eyes" for reaction in activity_of(double.fake.state).reactions_to(target))
