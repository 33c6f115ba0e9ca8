"""The dispatcher's writes for new threads: each thread's metadata and short-id index entry in
one batch, and a thread another delivery created since the lookup keeps its metadata and takes
this message's settings."""

from __future__ import annotations

import uuid

from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress, Trigger
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.fields import CREATED_BY, MODEL, new_thread_fields
from services.ingress.routing import Route
from tests.ingress.conftest import StartIngress


def _message(thread_id: str, repository: str) -> InboxMessage:
    return InboxMessage(
        delivery_id=uuid.uuid4().hex,
        thread_id=thread_id,
        channel=Channel.GITHUB,
        author=Author(channel=Channel.GITHUB, external_id="42", name="octocat"),
        text="@drydock please fix it",
        repository=repository,
        reply_to=ReplyAddress(channel=Channel.GITHUB, address={"issue": "1"}),
        trigger=Trigger.MENTION,
    )


def _new_thread(repository: str, *, settings: dict[str, str | None] | None = None) -> Route:
    message = _message(ids.github_issue("github.com", "acme", repository, 1), f"acme/{repository}")
    return Route(
        Role.CODER,
        message,
        create=new_thread_fields(message, created_by="ingress"),
        settings=settings,
        wake=False,
    )


async def test_new_threads_get_their_metadata_and_short_id(start_ingress: StartIngress, repo: str) -> None:
    async with start_ingress() as running:
        first, second = _new_thread(repo), _new_thread(f"{repo}-2")

        await running.ingress.dispatcher.dispatch([first, second], [])

        for route in (first, second):
            thread = await running.metadata.get(route.thread_id)
            assert thread.kind is Role.CODER
            assert thread.repository == route.message.repository
            assert await running.records.thread_for_short_id(ids.short_id(route.thread_id)) == route.thread_id
            assert [m.delivery_id for m in await running.inbox(route.thread_id)] == [route.message.delivery_id]


async def test_a_thread_created_since_the_lookup_keeps_its_metadata_and_takes_the_settings(
    start_ingress: StartIngress, repo: str
) -> None:
    async with start_ingress() as running:
        route = _new_thread(repo, settings={MODEL: "gpt-5.1"})
        await running.metadata.create(route.thread_id, kind=Role.CODER, fields={CREATED_BY: "dashboard"})

        await running.ingress.dispatcher.dispatch([route], [])

        thread = await running.metadata.get(route.thread_id)
        assert thread.created_by == "dashboard"
        assert thread.repository is None
        assert thread.model == "gpt-5.1"
        assert await running.records.thread_for_short_id(ids.short_id(route.thread_id)) == route.thread_id
