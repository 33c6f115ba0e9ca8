"""What to do with each intent of a delivery, decided from what the lookup read.

- A message continues the thread the agent already works in (a follow-up), or starts one when
  it addresses the agent (a mention of the handle, a Slack mention or direct message, a Linear
  agent session) and its author is trusted and its repository is enabled for the coder.
- A reply in the review thread of one of the reviewer's findings goes to that reviewer thread,
  and a mention asking for a review on a pull request (``@drydock review``, ``@drydock please
  review this``) wakes the reviewer, on repositories with review enabled.
- A pull request opened, ready for review or pushed to, on a repository with review enabled,
  wakes the reviewer in the reviewer namespace.
- On a GitHub issue with a thread, a comment that does not mention the agent is appended to the
  thread's inbox as context without waking it; the next mention's run sees both. On the agent's
  own pull request every comment (review comments included) wakes it.
- A push by someone else to an agent branch is noted in the creating thread's inbox.
- CI and pull-request events are forwarded to the autofix controller; so is a pull request
  comment ``@handle autofix on|off``, which starts no work.
- ``@handle approve`` in a thread's conversation approves its held plan and held pushes when its
  author owns the thread (:mod:`.owner_commands`), then wakes the coder as a follow-up; anyone
  else is answered and nothing changes.
- A Slack or Linear message ``link CODE`` addressed to the agent redeems a link code from the
  dashboard for its sender (:mod:`drydock.accounts.link_codes`) and is answered; it starts no work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from drydock.accounts import AccountsStore, LinkCodes, Outcome, Provider
from drydock.autofix.commands import parse_command
from drydock.bus.envelopes import Author, Channel, GithubEvent, InboxMessage, ReplyAddress, Trigger
from drydock.channels.commands import is_approve_command
from drydock.channels.github.conversation import GithubConversation
from drydock.channels.intents import (
    BranchPush,
    Forward,
    Intent,
    Message,
    ReviewRequest,
    Sender,
)
from drydock.channels.text import link_command, mentions, model_request_in, repository_in
from drydock.model_catalog import ModelCatalog, ModelChoice, ModelError
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.fields import EFFORT, MODEL, new_thread_fields
from drydock.threads.metadata import Changes, ThreadMetadataStore
from drydock.threads.pr_records import branch_short_id
from services.ingress import resolve_thread
from services.ingress.authorize import Authorizer
from services.ingress.lookup import Lookup, LookupBatch
from services.ingress.owner_commands import OwnerCommands

ASK_FOR_REPOSITORY = (
    "Which repository should I work in? Mention me again with `repo:owner/name`, "
    "or set a default repository in your Drydock profile."
)


def not_enabled(repository: str) -> str:
    return f"Drydock's coder is not enabled on `{repository}`; an admin can enable it in the dashboard."


def bad_model_choice(error: ModelError) -> str:
    return f"I did not start: {error}. Mention me again with a model and effort from that list."


def thread_model_fields(choice: ModelChoice) -> dict[str, str | None]:
    """The thread fields a message's model choice sets: a new model drops an effort chosen for
    the old one (``None`` deletes), an effort alone keeps the model."""
    effort = choice.effort.value if choice.effort is not None else None
    if choice.model is None:
        return {EFFORT: effort}
    return {MODEL: choice.model, EFFORT: effort}


@dataclass(frozen=True)
class Route:
    """Durable work: create the thread's metadata if new, append to its inbox, wake its role."""

    role: Role
    message: InboxMessage
    create: Mapping[str, str] | None = None
    settings: Changes | None = None
    """Thread fields the message sets (its model choice), on a new thread or an existing one."""
    wake: bool = True
    acknowledge: bool = False

    @property
    def thread_id(self) -> str:
        return self.message.thread_id


@dataclass(frozen=True)
class Publish:
    """Forward an event to ``drydock.github.{event}``."""

    event: GithubEvent


@dataclass(frozen=True)
class Reply:
    """Answer the author without starting work (sent after the webhook is answered)."""

    address: ReplyAddress
    text: str


@dataclass(frozen=True)
class Skip:
    reason: str


Decision = Route | Publish | Reply | Skip


def choose_repository(text: str, user_default: str | None, team_default: str | None) -> str | None:
    """``repo:owner/name`` in the text, then the user's default, then the team's."""
    return repository_in(text) or user_default or team_default


def _on_pull_request(intent: Message) -> bool:
    return isinstance(intent.conversation, GithubConversation) and intent.conversation.pull_request


def _on_issue(intent: Message) -> bool:
    return isinstance(intent.conversation, GithubConversation) and not intent.conversation.pull_request


_PROVIDERS = {Channel(provider.value): provider for provider in Provider}


def _provider(channel: Channel) -> Provider:
    """The account provider of a channel whose senders have accounts (a lookup: an enum's
    call by value costs a microsecond, twice per message)."""
    return _PROVIDERS[channel]


def _author(sender: Sender, user_id: str | None) -> Author:
    return Author(channel=sender.channel, external_id=sender.external_id, name=sender.name, user_id=user_id)


def _inbox_message(
    intent: Message, thread_id: str, user_id: str | None, repository: str | None, trigger: Trigger
) -> InboxMessage:
    """What ``thread_id``'s inbox receives of ``intent``, written by ``user_id``."""
    sender = intent.sender
    return InboxMessage(
        delivery_id=intent.delivery_id,
        thread_id=thread_id,
        channel=sender.channel,
        author=_author(sender, user_id),
        text=intent.text,
        repository=repository,
        references={**intent.references, "event": intent.event},
        reply_to=intent.reply_to,
        trigger=trigger,
    )


def asks_for_review(text: str, handle: str) -> bool:
    """Whether ``text`` addresses ``handle`` asking for a review: ``@drydock review``, ``@drydock
    please review this``, ``@drydock can you review?`` (not ``@drydock fix the review comments``)."""
    pattern = rf"(?<![\w@]){re.escape(handle)}\b[\s,:]+(?:(?:please|can you|could you)\s+)?(?:re-?)?review\b"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _review_thread_root(intent: Message) -> str | None:
    """The first comment of the review thread a review comment replies in, if it is a reply."""
    if intent.references.get("comment_kind") != "review_comment":
        return None
    root = intent.reply_to.address.get("review_comment_id")
    return root if root and root != intent.references.get("comment_id") else None


def queue_reads(batch: LookupBatch, intent: Intent) -> None:
    """Ask the batch for everything :meth:`Routing.decide` reads for ``intent``."""
    match intent:
        case Message():
            batch.user(_provider(intent.sender.channel), intent.sender.external_id)
            if intent.repository is not None:
                batch.repository(intent.repository)
                root = _review_thread_root(intent)
                if root is not None:
                    batch.finding_comment(intent.repository, root)
            resolve_thread.queue_reads(batch, intent.conversation)
        case ReviewRequest():
            batch.repository(intent.conversation.full_name)
            batch.user(Provider.GITHUB, intent.sender.external_id)
        case BranchPush():
            batch.branch(intent.full_name, intent.branch, branch_short_id(intent.branch))
        case Forward():
            pass


def link_answer(provider: Provider, outcome: Outcome, login: str | None) -> str:
    """What the agent answers a ``link CODE`` message."""
    account = f"This {provider.value.capitalize()} account"
    match outcome:
        case Outcome.LINKED:
            who = f" ({login})" if login else ""
            return f"{account} is now linked to your Drydock user{who}: mentions from it start work as you."
        case Outcome.ALREADY_USED:
            return f"{account} already sent this code, and it is linked to a Drydock user."
        case Outcome.TAKEN:
            return f"{account} is linked to another Drydock user; unlink it there first, then make a new code."
        case Outcome.LIMITED:
            return "Too many link codes from this account; try again in an hour."
    return (
        "That link code is not valid: it was mistyped, expired, replaced or already used. "
        "Make a new one on your Drydock profile page."
    )


class Routing:
    def __init__(
        self,
        accounts: AccountsStore,
        metadata: ThreadMetadataStore,
        link_codes: LinkCodes,
        authorizer: Authorizer,
        models: ModelCatalog,
        *,
        default_handle: str,
        owner_commands: OwnerCommands | None = None,
    ) -> None:
        self._owner_commands = owner_commands
        self._accounts = accounts
        self._metadata = metadata
        self._link_codes = link_codes
        self._authorizer = authorizer
        self._models = models
        self._default_handle = default_handle

    async def decide(self, intent: Intent, lookup: Lookup) -> Decision:
        match intent:
            case Message():
                return await self._message(intent, lookup)
            case ReviewRequest():
                return await self._review(intent, lookup)
            case BranchPush():
                return await self._push(intent, lookup)
            case Forward():
                return Publish(intent.event)
        raise TypeError(f"unknown intent {intent!r}")

    async def _message(self, intent: Message, lookup: Lookup) -> Decision:
        sender = intent.sender
        if sender.bot:
            return Skip("the author is a bot or the agent itself")
        handle = lookup.team.mention_handle or self._default_handle
        if sender.channel is not Channel.GITHUB and (intent.addressed or mentions(intent.text, handle)):
            code = link_command(intent.text if intent.own_words is None else intent.own_words, handle)
            if code is not None:
                return await self._link(intent, code)
        root = _review_thread_root(intent)
        if intent.repository is not None and root is not None:
            reviewer_thread = lookup.finding_threads.get((intent.repository.lower(), root))
            if reviewer_thread is not None:
                return await self._finding_reply(intent, lookup, reviewer_thread)
        if _on_pull_request(intent) and parse_command(intent.text, handle) is not None:
            return Skip("an autofix command: the autofix controller applies it")
        if _on_pull_request(intent) and asks_for_review(intent.text, handle):
            settings = lookup.repository(intent.repository) if intent.repository else None
            if settings is not None and settings.reviewer:
                return await self._review_mention(intent, lookup)
        thread_id, agent_pull_request = await resolve_thread.resolve(intent.conversation, lookup, self._metadata)
        state = lookup.threads.get(thread_id)
        existing = agent_pull_request or state is not None
        mentioned = intent.addressed or mentions(intent.text, handle)
        if not existing and (intent.follow_up_only or not mentioned):
            return Skip("not addressed to the agent, and not in a thread it works in")
        user_id = lookup.users.get((_provider(sender.channel), sender.external_id))
        refusal = await self._authorizer.refusal(sender, user_id, lookup.team, intent.repository)
        if refusal is not None:
            return Skip(f"author not authorized: {refusal}")
        if (
            existing
            and self._owner_commands is not None
            and is_approve_command(
                intent.text if intent.own_words is None else intent.own_words, handle, addressed=intent.addressed
            )
        ):
            author = f"{sender.channel.value}:{sender.external_id}"
            outcome = await self._owner_commands.approve(
                thread_id, user_id=user_id, author=author, written_at=intent.written_at
            )
            if outcome.answer is not None:
                return Reply(intent.reply_to, outcome.answer)
        if intent.addressed and intent.sender.channel is not Channel.GITHUB:
            trigger = Trigger.DIRECT
        else:
            trigger = Trigger.MENTION if mentioned else Trigger.CONTEXT if _on_issue(intent) else Trigger.FOLLOW_UP

        thread_settings: Changes | None = None
        request = model_request_in(intent.text) if mentioned else None
        if request is not None:
            try:
                thread_settings = thread_model_fields(self._models.choice(request.model, request.effort))
            except ModelError as error:
                return Reply(intent.reply_to, bad_model_choice(error))
        if existing:
            repository = intent.repository or (state.repository if state is not None else None)
            # On an issue, people talk among themselves: the comment waits in the inbox as context
            # and only a mention wakes the agent. On its own pull request, comments are addressed to it.
            wake = trigger is not Trigger.CONTEXT
            message = _inbox_message(intent, thread_id, user_id, repository, trigger)
            return Route(Role.CODER, message, settings=thread_settings, wake=wake, acknowledge=wake)
        repository = intent.repository
        if repository is None:
            profile_default = (await self._accounts.profile(user_id)).default_repository if user_id else None
            repository = choose_repository(intent.text, profile_default, lookup.team.default_repository)
            if repository is None:
                return Reply(intent.reply_to, ASK_FOR_REPOSITORY)
            repository_settings = await self._accounts.repository(repository)
        else:
            repository_settings = lookup.repository(repository)
        if repository_settings is None or not repository_settings.coder:
            if isinstance(intent.conversation, GithubConversation):
                return Skip(f"the coder is not enabled on {repository}")
            return Reply(intent.reply_to, not_enabled(repository))
        new = _inbox_message(intent, thread_id, user_id, repository_settings.full_name, trigger)
        create = new_thread_fields(new, created_by="ingress")
        create.update({name: value for name, value in (thread_settings or {}).items() if value is not None})
        return Route(Role.CODER, new, create=create, acknowledge=True)

    async def _link(self, intent: Message, code: str) -> Decision:
        provider = _provider(intent.sender.channel)
        redemption = await self._link_codes.redeem(provider, intent.sender.external_id, code)
        outcome = redemption.outcome
        if (
            outcome is Outcome.ALREADY_USED
            and await self._accounts.user_for(provider, intent.sender.external_id) is None
        ):
            outcome = Outcome.INVALID
        identity = await self._accounts.identity(redemption.user_id) if redemption.user_id else None
        return Reply(intent.reply_to, link_answer(provider, outcome, identity.login if identity else None))

    async def _finding_reply(self, intent: Message, lookup: Lookup, thread_id: str) -> Decision:
        sender = intent.sender
        user_id = lookup.users.get((_provider(sender.channel), sender.external_id))
        refusal = await self._authorizer.refusal(sender, user_id, lookup.team, intent.repository)
        if refusal is not None:
            return Skip(f"author not authorized: {refusal}")
        message = _inbox_message(intent, thread_id, user_id, intent.repository, Trigger.FOLLOW_UP)
        return Route(Role.REVIEWER, message, acknowledge=True)

    async def _review_mention(self, intent: Message, lookup: Lookup) -> Decision:
        sender = intent.sender
        conversation = intent.conversation
        assert isinstance(conversation, GithubConversation)
        user_id = lookup.users.get((_provider(sender.channel), sender.external_id))
        refusal = await self._authorizer.refusal(sender, user_id, lookup.team, intent.repository)
        if refusal is not None:
            return Skip(f"author not authorized: {refusal}")
        thread_id = ids.reviewer(conversation.host, conversation.owner, conversation.repo, conversation.number)
        message = _inbox_message(intent, thread_id, user_id, intent.repository, Trigger.REVIEW_REQUEST)
        return Route(Role.REVIEWER, message, create=new_thread_fields(message, created_by="ingress"), acknowledge=True)

    async def _review(self, intent: ReviewRequest, lookup: Lookup) -> Decision:
        conversation = intent.conversation
        settings = lookup.repository(conversation.full_name)
        if settings is None or not settings.reviewer:
            return Skip(f"review is not enabled on {conversation.full_name}")
        if intent.draft:
            return Skip("draft pull requests are reviewed once they are ready")
        user_id = lookup.users.get((Provider.GITHUB, intent.sender.external_id))
        if not intent.sender.agent:
            refusal = await self._authorizer.refusal(intent.sender, user_id, lookup.team, conversation.full_name)
            if refusal is not None:
                return Skip(f"pull request author not authorized: {refusal}")
        thread_id = ids.reviewer(conversation.host, conversation.owner, conversation.repo, conversation.number)
        message = InboxMessage(
            delivery_id=intent.delivery_id,
            thread_id=thread_id,
            channel=Channel.GITHUB,
            author=_author(intent.sender, user_id),
            text=f"Pull request #{conversation.number} {intent.action.replace('_', ' ')}: {intent.title}",
            repository=settings.full_name,
            references={**intent.references, "event": intent.event},
            reply_to=intent.reply_to,
            trigger=Trigger.REVIEW_REQUEST,
        )
        return Route(Role.REVIEWER, message, create=new_thread_fields(message, created_by="ingress"))

    async def _push(self, intent: BranchPush, lookup: Lookup) -> Decision:
        if intent.sender.bot:
            return Skip("a push by a bot or the agent itself")
        thread_id = await resolve_thread.agent_branch_thread(lookup, self._metadata, intent.full_name, intent.branch)
        if thread_id is None:
            return Skip(f"branch {intent.branch} belongs to no thread")
        message = InboxMessage(
            delivery_id=intent.delivery_id,
            thread_id=thread_id,
            channel=Channel.GITHUB,
            author=_author(intent.sender, None),
            text=intent.text,
            repository=intent.full_name,
            references={"event": intent.event, "branch": intent.branch, "head_sha": intent.head_sha},
            reply_to=intent.reply_to,
            trigger=Trigger.PUSH,
        )
        return Route(Role.CODER, message, wake=False)
