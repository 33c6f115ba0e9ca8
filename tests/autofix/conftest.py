"""Shared parts of the autofix tests: the fake GitHub with the Drydock App on ``acme/widgets``,
and a :class:`World` that arranges agent pull requests the way the coder leaves them (thread
metadata, the durable PR record, the pull request and its agent-made head commit on GitHub,
autofix on for the owner and the repository) and observes what the controller did (repair
requests in the inbox, wakes, ``autofix`` events)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from nats.js.errors import NotFoundError
from pydantic import SecretStr
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, RepositorySettings, UserProfile
from drydock.autofix.controller import AutofixController
from drydock.autofix.github import AutofixGithub
from drydock.bus import Bus, EventType, GithubEvent, InboxMessage, ReplyAddress, RunEvent, subjects
from drydock.bus.envelopes import Channel
from drydock.bus.streams import EVENTS_STREAM, RUNS_STREAM
from drydock.config import Settings
from drydock.github import GithubClient
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads import Inbox
from drydock.threads.fields import OWNER, REPLY_TO, REPOSITORY
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import PullRequestRecord, PullRequestStore, branch_name
from tests.fakes.github import App, FakeGithub, Installation
from tests.fakes.github import webhooks as hooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.history import Commit, history_of
from tests.fakes.github.state import PullRequest

ORG, NAME = "acme", "widgets"
REPO = f"{ORG}/{NAME}"
HOST = "github.com"
OWNER_ID = "user-ada"
AGENT_EMAIL = "drydock@users.noreply.github.com"
WRITER, READER = "maintainer", "visitor"


@pytest.fixture(scope="session")
async def github() -> AsyncIterator[FakeGithub]:
    async with FakeGithub() as fake:
        yield fake


@pytest.fixture(scope="session")
def github_app(github: FakeGithub) -> App:
    return github.create_app("drydock")


@pytest.fixture(scope="session")
def installation(github: FakeGithub, github_app: App) -> Installation:
    found = github.install(github_app, ORG, [NAME])
    history_of(github.state).set_permission(REPO, WRITER, "write")
    history_of(github.state).set_permission(REPO, READER, "read")
    return found


@pytest.fixture
def autofix_settings(settings: Settings, github: FakeGithub, github_app: App, installation: Installation) -> Settings:
    section = settings.github.model_copy(
        update={
            "api_url": github.base_url,
            "app_id": github_app.id,
            "app_slug": github_app.slug,
            "private_key": SecretStr(github_app.private_key_pem),
        }
    )
    return settings.model_copy(update={"github": section})


@pytest.fixture
async def autofix_github(autofix_settings: Settings) -> AsyncIterator[AutofixGithub]:
    client = GithubClient(autofix_settings.github)
    yield AutofixGithub(client)
    await client.aclose()


def sha(seed: str) -> str:
    return uuid.uuid5(uuid.NAMESPACE_OID, seed).hex + "0" * 8


@dataclass
class AgentPull:
    thread_id: str
    number: int
    branch: str
    head_sha: str
    record: PullRequestRecord
    base: str
    """The base branch: one per pull request, since the fake GitHub outlives a test."""


@dataclass
class World:
    settings: Settings
    bus: Bus
    redis: Redis
    keys: Keys
    github: FakeGithub
    controller: AutofixController

    @property
    def accounts(self) -> AccountsStore:
        return AccountsStore(self.redis, self.keys, host=HOST)

    @property
    def history(self) -> Any:
        return history_of(self.github.state)

    def next_number(self) -> int:
        numbers = [number for (repo, number) in self.github.state.pulls if repo == REPO]
        numbers += [number for (repo, number) in activity_of(self.github.state).issues if repo == REPO]
        return max(numbers, default=100) + 1

    async def agent_pull(
        self, *, owner_flag: bool = True, repository_flag: bool = True, owner: str | None = OWNER_ID
    ) -> AgentPull:
        """An open pull request the agent created, at a head commit the agent pushed."""
        thread_id = str(uuid.uuid4())
        number = self.next_number()
        branch = branch_name(thread_id, f"change {number}")
        head = sha(f"{thread_id}:1")
        reply_to = ReplyAddress(channel=Channel.GITHUB, address={"host": HOST, "repository": REPO, "number": "7"})
        await ThreadMetadataStore(self.redis, self.keys).create(
            thread_id,
            kind=Role.CODER,
            fields={OWNER: owner or "", REPLY_TO: reply_to.model_dump_json(), REPOSITORY: REPO},
        )
        record = PullRequestRecord(HOST, REPO, number, thread_id, branch, created_at=datetime.now(UTC))
        await PullRequestStore(self.redis, self.keys).record(record)
        if owner is not None:
            await self.accounts.save_profile(UserProfile(user_id=owner, autofix=owner_flag))
        await self.accounts.save_repository(RepositorySettings(full_name=REPO, autofix=repository_flag))
        state = self.github.state
        state.pulls[(REPO, number)] = PullRequest(
            id=state.next_id(), repository=REPO, number=number, title=f"Change {number}", body="",
            head_ref=branch, head_sha=head, base_ref=f"main-{number}", draft=False,
            user={"login": "drydock[bot]", "id": 1, "type": "Bot"},
        )  # fmt: skip
        activity_of(state).open_issue(REPO, number, pull_request=True)
        self.push(REPO, branch, head, by_agent=True)
        return AgentPull(thread_id, number, branch, head, record, f"main-{number}")

    def push(self, repository: str, branch: str, head: str, *, by_agent: bool) -> None:
        """Move ``branch`` to a new commit ``head``, made by the agent or by a person."""
        email, name = (AGENT_EMAIL, "Drydock") if by_agent else ("ada@example.com", "Ada")
        self.history.add_commit(repository, Commit(head, "a change", name, email, name, email))
        self.history.set_branch(repository, branch, head)

    def fail(self, head: str, *names: str) -> None:
        for name in names:
            self.history.add_check_run(REPO, name, head, "failure")

    def check_run_event(self, pull: AgentPull, name: str = "tests", *, head: str | None = None) -> GithubEvent:
        payload = hooks.check_run(
            ORG, NAME, head_sha=head or pull.head_sha, pull_numbers=(pull.number,), check_name=name,
            head_branch=pull.branch,
        )  # fmt: skip
        return event("check_run", payload)

    async def inbox(self, thread_id: str) -> list[InboxMessage]:
        return [stored.message for stored in await Inbox(self.bus).read_after(thread_id)]

    async def wakes(self, thread_id: str) -> int:
        subject = subjects.run(Role.CODER, thread_id)
        info = await self.bus.js.stream_info(RUNS_STREAM, subjects_filter=subject)
        return (info.state.subjects or {}).get(subject, 0)

    async def decisions(self, thread_id: str) -> list[dict[str, Any]]:
        """The data of the thread's ``autofix`` events, oldest first."""
        found: list[dict[str, Any]] = []
        subject = subjects.event(thread_id, EventType.AUTOFIX.value)
        seq = 0
        while True:
            try:
                raw = await self.bus.js.get_msg(EVENTS_STREAM, seq=seq + 1, subject=subject, next=True, direct=True)
            except NotFoundError:
                return found
            assert raw.seq is not None
            assert raw.data is not None
            found.append(RunEvent.model_validate_json(raw.data).data)
            seq = raw.seq


def event(name: str, payload: dict[str, Any]) -> GithubEvent:
    return GithubEvent(
        delivery_id=str(uuid.uuid4()),
        event=name,
        action=payload.get("action"),
        repository=REPO,
        payload=payload,
    )


@pytest.fixture
def world(autofix_settings: Settings, bus: Bus, redis: Redis, keys: Keys, github: FakeGithub,
          autofix_github: AutofixGithub) -> World:  # fmt: skip
    controller = AutofixController(autofix_settings, bus, redis, keys, autofix_github)
    return World(autofix_settings, bus, redis, keys, github, controller)
