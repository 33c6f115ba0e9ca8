"""The thread owner's approvals: of the coder's plan (plan approval) and of a push that changes
protected paths (protected paths).

**Plan approval** is opt-in per repository (``RepositorySettings.plan_approval``) or per user
(``UserProfile.plan_approval``, for threads the user owns). Such a thread's coder first writes a
plan (``submit_plan``: its todo list and a short description), which is posted in the source
channel and on the dashboard and *held*. Until the owner approves the newest plan the credential
proxy refuses the thread's pushes (and its API writes but those that change no code), and the coder's writing
tools refuse too. A newer plan (the owner replied with changes) is held again.

**Protected paths**: a push whose ref updates change a path matching the repository's
``protected_paths`` is *held* by the credential proxy, keyed by the digest of its exact ref
updates (old and new object ids of every ref). The owner's approval applies to that one
change: the agent's retry of the same push goes through, any other push is inspected anew.

An approval comes from the thread's owner only: a reply ``@drydock approve`` in the source
channel (:func:`drydock.channels.commands.is_approve_command`), or the dashboard's approve
action. Plans and holds are signed (:class:`~drydock.infra.server_keys.ServerKeys`, purpose
``approval``), so whoever can write Redis cannot forge an approval; a change is re-signed in
Python and written with a compare-and-set on the old MAC. What the MAC cannot stop is deleting
a plan record: the gate is then "no plan submitted", which still refuses pushes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import cast

import structlog
from redis.asyncio import Redis

from drydock.accounts.records import RepositorySettings, UserProfile
from drydock.accounts.store import AccountsStore
from drydock.bus import Bus, BusUnavailable, EventType, RunEvent
from drydock.config import Settings
from drydock.errors import describe
from drydock.infra.redis import Keys
from drydock.infra.server_keys import Purpose, ServerKeys, ServerKeysError
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore

log = structlog.get_logger(__name__)

PLAN_TTL = timedelta(days=30)
HOLD_TTL = timedelta(days=7)
MAX_HOLDS_LISTED = 20
ZERO_ID = "0" * 40


# KEYS: record. ARGV: the MAC it must still have ('' : it must not exist), ttl ms, field/value pairs.
_SWAP = """
local current = redis.call('HGET', KEYS[1], 'mac') or ''
if current ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
_SWAP_ATTEMPTS = 5


def plan_required(repository: RepositorySettings | None, owner: UserProfile | None) -> bool:
    """Whether a thread's changes wait for its owner's approval of a plan."""
    return bool((repository is not None and repository.plan_approval) or (owner is not None and owner.plan_approval))


class State(StrEnum):
    HELD = "held"
    APPROVED = "approved"


@dataclass(frozen=True)
class Plan:
    """A plan the coder submitted; ``revision`` counts the thread's plans from 1."""

    thread_id: str
    revision: int
    description: str
    todos: tuple[dict[str, str], ...]
    state: State
    submitted_at: datetime
    approved_by: str = ""
    approved_at: datetime | None = None

    @property
    def approved(self) -> bool:
        return self.state is State.APPROVED

    def text(self) -> str:
        """The plan as posted to the source channel (markdown)."""
        lines = [f"**Plan (revision {self.revision})**", "", self.description.strip(), ""]
        lines += [f"{i}. {todo.get('content', '')}" for i, todo in enumerate(self.todos, 1)]
        return "\n".join(lines).strip()

    def to_hash(self) -> dict[str, str]:
        return {
            "thread_id": self.thread_id,
            "revision": str(self.revision),
            "description": self.description,
            "todos": json.dumps(list(self.todos)),
            "state": self.state.value,
            "submitted_at": self.submitted_at.isoformat(),
            "approved_by": self.approved_by,
            "approved_at": self.approved_at.isoformat() if self.approved_at else "",
        }

    @classmethod
    def from_hash(cls, raw: Mapping[str, str]) -> Plan:
        return cls(
            thread_id=raw["thread_id"],
            revision=int(raw["revision"]),
            description=raw["description"],
            todos=tuple(json.loads(raw["todos"])),
            state=State(raw["state"]),
            submitted_at=datetime.fromisoformat(raw["submitted_at"]),
            approved_by=raw.get("approved_by", ""),
            approved_at=datetime.fromisoformat(raw["approved_at"]) if raw.get("approved_at") else None,
        )


@dataclass(frozen=True)
class RefUpdate:
    """One ref update of a push: ``old`` and ``new`` object ids (all zeros: created or deleted)."""

    old: str
    new: str
    ref: str

    def line(self) -> str:
        return f"{self.old} {self.new} {self.ref}"


def change_id(repository: str, updates: Sequence[RefUpdate]) -> str:
    """The digest that names one exact push: its repository and every ref update, in order of ref."""
    lines = [repository.lower(), *sorted(update.line() for update in updates)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@dataclass(frozen=True)
class PushHold:
    """A push held because it changes protected ``paths``."""

    thread_id: str
    change: str
    repository: str
    updates: tuple[RefUpdate, ...]
    paths: tuple[str, ...]
    state: State
    held_at: datetime
    approved_by: str = ""
    approved_at: datetime | None = None

    @property
    def approved(self) -> bool:
        return self.state is State.APPROVED

    def describe(self) -> str:
        refs = ", ".join(f"{u.ref} → {u.new[:12]}" for u in self.updates)
        shown = ", ".join(f"`{p}`" for p in self.paths[:10]) + (" …" if len(self.paths) > 10 else "")
        return f"a push to {self.repository} ({refs}) changes protected paths: {shown}"

    def to_hash(self) -> dict[str, str]:
        return {
            "thread_id": self.thread_id,
            "change": self.change,
            "repository": self.repository,
            "updates": json.dumps([u.line() for u in self.updates]),
            "paths": json.dumps(list(self.paths)),
            "state": self.state.value,
            "held_at": self.held_at.isoformat(),
            "approved_by": self.approved_by,
            "approved_at": self.approved_at.isoformat() if self.approved_at else "",
        }

    @classmethod
    def from_hash(cls, raw: Mapping[str, str]) -> PushHold:
        updates = tuple(RefUpdate(*line.split(" ", 2)) for line in json.loads(raw["updates"]))
        return cls(
            thread_id=raw["thread_id"],
            change=raw["change"],
            repository=raw["repository"],
            updates=updates,
            paths=tuple(json.loads(raw["paths"])),
            state=State(raw["state"]),
            held_at=datetime.fromisoformat(raw["held_at"]),
            approved_by=raw.get("approved_by", ""),
            approved_at=datetime.fromisoformat(raw["approved_at"]) if raw.get("approved_at") else None,
        )


@dataclass(frozen=True)
class Approved:
    """What one approval approved: the plan (if one was held) and the held pushes."""

    plan: Plan | None
    pushes: tuple[PushHold, ...]

    @property
    def anything(self) -> bool:
        return self.plan is not None or bool(self.pushes)


WRITTEN_AT_SLACK = timedelta(seconds=2)
"""Sources give a message's time in whole seconds (GitHub), from a clock that is not ours."""


def held_by(held_at: datetime, written_at: datetime | None) -> bool:
    """Whether something held at ``held_at`` was there before a message written at
    ``written_at`` approved it (no time: a message whose source rules out replays)."""
    return written_at is None or held_at < written_at + WRITTEN_AT_SLACK


def is_owner(thread: ThreadMetadata | None, *, user_id: str | None, author: str | None = None) -> bool:
    """Whether a Drydock user (``user_id``) or a source account (``author``, ``channel:id``) owns
    the thread (no one owns a thread that does not exist)."""
    return thread is not None and thread.is_owned_by(user_id=user_id, author=author)


class Approvals:
    """Plans and held pushes per thread, signed with ``server_keys``."""

    def __init__(self, redis: Redis, keys: Keys, server_keys: ServerKeys) -> None:
        self._redis = redis
        self._keys = keys
        self._server_keys = server_keys
        self._swap = redis.register_script(_SWAP)

    def _sign(self, key: str, record: Mapping[str, str]) -> str:
        return self._server_keys.sign(Purpose.APPROVAL, key, *(f"{k}={record[k]}" for k in sorted(record)))

    async def _read(self, key: str) -> dict[str, str] | None:
        raw = cast(dict[str, str], await self._redis.hgetall(key))
        mac = raw.pop("mac", None)
        if mac is None or not self._server_keys.verify(
            Purpose.APPROVAL, mac, key, *(f"{k}={raw[k]}" for k in sorted(raw))
        ):
            return None
        raw["mac"] = mac
        return raw

    async def _write(self, key: str, expected_mac: str, record: Mapping[str, str], ttl: timedelta) -> bool:
        pairs: list[str] = []
        for name, value in {**record, "mac": self._sign(key, record)}.items():
            pairs += [name, value]
        return bool(await self._swap(keys=[key], args=[expected_mac, int(ttl.total_seconds() * 1000), *pairs]))

    async def plan(self, thread_id: str) -> Plan | None:
        """The thread's newest plan, if one was submitted and its record verifies."""
        raw = await self._read(self._keys.thread_plan(thread_id))
        if raw is None or raw.get("thread_id") != thread_id:
            return None
        raw.pop("mac")
        return Plan.from_hash(raw)

    async def submit_plan(self, thread_id: str, description: str, todos: Sequence[Mapping[str, str]]) -> Plan:
        """Record a new plan revision, held until the owner approves it."""
        key = self._keys.thread_plan(thread_id)
        for _ in range(_SWAP_ATTEMPTS):
            raw = cast(dict[str, str], await self._redis.hgetall(key))
            previous = await self.plan(thread_id)
            plan = Plan(
                thread_id=thread_id,
                revision=(previous.revision if previous else 0) + 1,
                description=description,
                todos=tuple({"content": str(t.get("content", "")), "status": str(t.get("status", ""))} for t in todos),
                state=State.HELD,
                submitted_at=datetime.now(UTC),
            )
            if await self._write(key, raw.get("mac", ""), plan.to_hash(), PLAN_TTL):
                return plan
        raise RuntimeError("the plan changed concurrently; try again")

    async def approve_plan(self, thread_id: str, *, by: str, written_at: datetime | None = None) -> Plan | None:
        """Approve the thread's held plan; the plan as approved, or ``None`` if none was held (or
        none submitted by ``written_at``, the time of the approving message)."""
        key = self._keys.thread_plan(thread_id)
        for _ in range(_SWAP_ATTEMPTS):
            raw = await self._read(key)
            if raw is None or raw.get("thread_id") != thread_id:
                return None
            mac = raw.pop("mac")
            plan = Plan.from_hash(raw)
            if plan.approved or not held_by(plan.submitted_at, written_at):
                return None
            approved = Plan(
                **{**plan.__dict__, "state": State.APPROVED, "approved_by": by, "approved_at": datetime.now(UTC)}
            )
            if await self._write(key, mac, approved.to_hash(), PLAN_TTL):
                return approved
        raise RuntimeError("the plan changed concurrently; try again")

    async def hold(self, hold: PushHold) -> tuple[PushHold, bool]:
        """Record a held push unless that exact change is recorded already: the stored one, and
        whether this call recorded it (whoever did announces it)."""
        existing = await self.push(hold.thread_id, hold.change)
        if existing is not None:
            return existing, False
        if await self._write(self._keys.push_hold(hold.thread_id, hold.change), "", hold.to_hash(), HOLD_TTL):
            index = self._keys.push_holds(hold.thread_id)
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.rpush(index, hold.change)
                pipe.ltrim(index, -MAX_HOLDS_LISTED, -1)
                pipe.pexpire(index, int(HOLD_TTL.total_seconds() * 1000))
                await pipe.execute()
            return hold, True
        stored = await self.push(hold.thread_id, hold.change)
        return (stored if stored is not None else hold), False

    async def push(self, thread_id: str, change: str) -> PushHold | None:
        """The held (or approved) push ``change`` of the thread, if its record verifies."""
        raw = await self._read(self._keys.push_hold(thread_id, change))
        if raw is None or raw.get("thread_id") != thread_id or raw.get("change") != change:
            return None
        raw.pop("mac")
        return PushHold.from_hash(raw)

    async def pushes(self, thread_id: str) -> list[PushHold]:
        """The thread's recent held pushes, oldest first."""
        changes = cast(list[str], await self._redis.lrange(self._keys.push_holds(thread_id), 0, -1))
        found = [await self.push(thread_id, change) for change in dict.fromkeys(changes)]
        return [hold for hold in found if hold is not None]

    async def approve_push(
        self, thread_id: str, change: str, *, by: str, written_at: datetime | None = None
    ) -> PushHold | None:
        """Approve one held push; ``None`` if it is unknown, approved already, or held after
        ``written_at`` (the time of the approving message)."""
        key = self._keys.push_hold(thread_id, change)
        for _ in range(_SWAP_ATTEMPTS):
            raw = await self._read(key)
            if raw is None or raw.get("thread_id") != thread_id or raw.get("change") != change:
                return None
            mac = raw.pop("mac")
            hold = PushHold.from_hash(raw)
            if hold.approved or not held_by(hold.held_at, written_at):
                return None
            approved = PushHold(
                **{**hold.__dict__, "state": State.APPROVED, "approved_by": by, "approved_at": datetime.now(UTC)}
            )
            if await self._write(key, mac, approved.to_hash(), HOLD_TTL):
                return approved
        raise RuntimeError("the held push changed concurrently; try again")

    async def approve(
        self, thread_id: str, *, by: str, change: str | None = None, written_at: datetime | None = None
    ) -> Approved:
        """The owner's approval: the held plan and every held push (or only push ``change``);
        given the time an approving message was written, only what was held by then."""
        if change is not None:
            one = await self.approve_push(thread_id, change, by=by, written_at=written_at)
            return Approved(None, (one,) if one else ())
        plan = await self.approve_plan(thread_id, by=by, written_at=written_at)
        pushes = []
        for hold in await self.pushes(thread_id):
            if not hold.approved:
                approved = await self.approve_push(thread_id, hold.change, by=by, written_at=written_at)
                if approved is not None:
                    pushes.append(approved)
        return Approved(plan, tuple(pushes))

    async def pending(self, thread_id: str) -> tuple[Plan | None, list[PushHold]]:
        """What waits for the owner: the held plan (if the newest is held) and the held pushes."""
        plan = await self.plan(thread_id)
        holds = [hold for hold in await self.pushes(thread_id) if not hold.approved]
        return (plan if plan is not None and not plan.approved else None), holds


def approval_text(approved: Approved) -> str:
    """What the agent answers an approval with."""
    parts = []
    if approved.plan is not None:
        parts.append(f"plan revision {approved.plan.revision}")
    parts += [f"the held push to {', '.join(u.ref for u in hold.updates)}" for hold in approved.pushes]
    if not parts:
        return "Nothing is waiting for your approval on this thread."
    return "Approved: " + "; ".join(parts) + ". I'll continue."


NOT_OWNER_TEXT = "Only this thread's owner can approve its plan or held pushes."
WRITTEN_BEFORE_TEXT = (
    "That approval was written before the plan or push now waiting, so it does not approve them: "
    "reply approve again to approve what is waiting now."
)


def held_push_notice(hold: PushHold, handle: str) -> str:
    """The source channel's notice of a held push."""
    return (
        f"⏸️ Held: {hold.describe()}. It goes through once this thread's owner approves this exact change: "
        f"reply `{handle} approve`, or approve it on the thread's dashboard page (change `{hold.change[:12]}`)."
    )


def plan_notice(plan: Plan, handle: str) -> str:
    """The source channel's post of a submitted plan."""
    return (
        f"{plan.text()}\n\nI will not change the repository until this thread's owner approves: reply "
        f"`{handle} approve`, or reply with changes and I'll revise the plan."
    )


async def announce(bus: Bus, thread_id: str, approved: Approved, *, by: str, via: str) -> None:
    """The ``approved`` event on the thread (the dashboard shows it); a bus outage is logged."""
    data = {
        "by": by,
        "via": via,
        "plan": approved.plan.revision if approved.plan else None,
        "pushes": [hold.change for hold in approved.pushes],
    }
    try:
        await bus.emit(RunEvent(thread_id=thread_id, run_id="", type=EventType.APPROVED, data=data))
    except BusUnavailable as error:
        log.error("approved event not published", thread_id=thread_id, error=describe(error))


PLAN_REQUIRED_TEXT = (
    "Plan approval is on for this thread: change nothing in the repository yet. Investigate read-only, write your "
    "todo list with write_todos, call submit_plan with a short description and the same steps, then end your turn "
    "and wait for the owner's approval."
)


class PlanGate:
    """Plan approval as the coder's tools see it: whether the thread's changes wait for its
    owner's approval, and the refusal a writing tool answers with while they do. The credential
    proxy enforces the same rule on pushes (``services/credential_proxy/approval_gates.py``)."""

    def __init__(self, approvals: Approvals, accounts: AccountsStore, metadata: ThreadMetadataStore) -> None:
        self.approvals = approvals
        self.accounts = accounts
        self._metadata = metadata

    @classmethod
    def create(cls, redis: Redis, keys: Keys, settings: Settings) -> PlanGate | None:
        """The gate on ``settings``' stores; ``None`` without ``DRYDOCK_CRYPTO_KEYS`` (no approval
        can be signed, and the proxy, which needs them, refuses nothing of this kind either)."""
        try:
            server_keys = ServerKeys.from_settings(settings.crypto)
        except ServerKeysError:
            return None
        accounts = AccountsStore(redis, keys, host=settings.github.host)
        return cls(Approvals(redis, keys, server_keys), accounts, ThreadMetadataStore(redis, keys))

    async def required(self, thread_id: str, repository: str | None) -> bool:
        if repository is None:
            return False
        thread = await self._metadata.find(thread_id)
        owner = thread.owner if thread is not None else None
        profile = await self.accounts.profile(owner) if owner else None
        return plan_required(await self.accounts.repository(repository), profile)

    async def refusal(self, thread_id: str, repository: str | None) -> str | None:
        """Why the thread may not change the repository yet; ``None`` when it may."""
        if not await self.required(thread_id, repository):
            return None
        plan = await self.approvals.plan(thread_id)
        if plan is None:
            return PLAN_REQUIRED_TEXT
        if not plan.approved:
            return (
                f"Refused: plan revision {plan.revision} is waiting for this thread owner's approval. End your turn "
                "and wait; if they reply with changes, revise the plan and call submit_plan again."
            )
        return None
