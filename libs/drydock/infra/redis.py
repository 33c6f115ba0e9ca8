"""The Redis (or Valkey) connection and the one place where key names are spelled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import hiredis
from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import AuthenticationError, AuthorizationError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.maint_notifications import MaintNotificationsConfig

from drydock.config import RedisSettings
from drydock.errors import without_password

T = TypeVar("T")

RETRIES = 5
"""Times a command that met a lost connection or a timeout is sent again."""
RETRY_BACKOFF_BASE = 0.1
RETRY_BACKOFF_CAP = 1.0
"""Pauses before the retries: 0.2, 0.4, 0.8, 1 and 1 seconds."""
HEALTH_CHECK_INTERVAL = 10
"""Seconds a pooled connection may sit idle before it is pinged ahead of its next command."""
DRIVER = DriverInfo()
"""What each connection tells the store it is (``CLIENT SETINFO``), read from the installed
package once: redis-py reads it again for every connection it makes, a scan of the package
metadata of 1 to 6 ms that holds the event loop (tens of ms under load, in a burst that needs
new connections)."""


class StoreRetry(Retry):
    """redis-py's retry of lost connections and timeouts, except a refused login: redis-py's
    authentication errors are connection errors too, and retrying one only delays the answer."""

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[[Exception], Any] | Callable[[Exception, int], Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        def retryable(error: Exception) -> bool:
            if isinstance(error, AuthenticationError | AuthorizationError):
                return False
            return is_retryable is None or is_retryable(error)

        return await super().call_with_retry(do, fail, retryable, with_failure_count)


class StoreUnavailable(RuntimeError):
    """Redis cannot be reached."""


def redis_client(
    settings: RedisSettings,
    target: str,
    *,
    decode_responses: bool,
    socket_timeout: float | None = 5.0,
    max_connections: int | None = None,
) -> Redis:
    """A client on a pool of at most ``settings.max_connections``. The pool blocks: with the
    default pool, the call that finds every connection busy fails at once, which under a burst
    of concurrent runs fails runs that only needed to wait a millisecond.

    ``socket_timeout`` bounds each command's send and read (5 s, redis-py's default). ``None``
    leaves the bound to the caller: redis-py then skips a timeout per reply and a task per send,
    for a caller that bounds a whole sequence of commands itself (the ingress's deliveries).

    ``max_connections`` instead gives a pool that never waits, for a caller whose concurrent
    commands cannot outnumber it: taking a connection from it costs no timeout and no condition
    variable (about a twentieth of the ingress's CPU per delivery).

    A store restart leaves every pooled connection stale: a command (or a whole MULTI/EXEC
    pipeline) that meets a lost connection or a timeout reconnects and is sent again, up to
    :data:`RETRIES` times with exponential backoff (3.4 s of pauses), which also carries it over
    a store that is down for a few seconds; idle connections are pinged before reuse after
    :data:`HEALTH_CHECK_INTERVAL` seconds."""
    options: dict[str, Any] = {
        "decode_responses": decode_responses,
        "socket_connect_timeout": 2.0,
        "socket_timeout": socket_timeout,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_INTERVAL,
        "retry": StoreRetry(ExponentialBackoff(cap=RETRY_BACKOFF_CAP, base=RETRY_BACKOFF_BASE), RETRIES),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        # Valkey refuses redis-py's CLIENT MAINT_NOTIFICATIONS, which would otherwise cost each
        # new connection a round trip and a caught error.
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
        "driver_info": DRIVER,
    }
    if settings.username is not None:
        options["username"] = settings.username
    if settings.password is not None:
        options["password"] = settings.password.get_secret_value()
    if max_connections is not None:
        return Redis.from_pool(ConnectionPool.from_url(target, max_connections=max_connections, **options))
    pool = BlockingConnectionPool.from_url(
        target,
        max_connections=settings.max_connections,
        timeout=settings.pool_timeout.total_seconds(),
        **options,
    )
    return Redis.from_pool(pool)


async def connect_redis(settings: RedisSettings, *, url: str | None = None) -> Redis:
    """A client with string responses, checked with a PING so a bad URL fails at start-up."""
    target = url or settings.url
    if target is None:
        raise StoreUnavailable("DRYDOCK_REDIS_URL is not set")
    client = redis_client(settings, target, decode_responses=True)
    try:
        await client.ping()
    except (RedisError, OSError) as error:
        await client.aclose()
        raise StoreUnavailable(f"cannot reach Redis at {without_password(target)}: {error}") from None
    return client


class Queue(Protocol):
    """Where commands wait for one round trip: a redis-py pipeline, or a :class:`Batch`."""

    def get(self, name: str) -> object: ...

    def hget(self, name: str, key: str) -> object: ...

    def hmget(self, name: str, keys: list[str]) -> object: ...

    def set(self, name: str, value: str, *, px: int | None = None, nx: bool = False, get: bool = False) -> object: ...

    def eval(self, script: str, numkeys: int, *keys_and_args: str | int) -> object: ...


def pack_command(*command: str | int) -> bytes:
    """``command`` in the Redis protocol, as it goes on the wire."""
    # hiredis's stub types the argument as a tuple of one element; it takes any length.
    packed: bytes = hiredis.pack_command(command)  # type: ignore[arg-type]
    return packed


class BatchConnections:
    """Connections for :class:`Batch`es, made as ``redis``'s pool makes them but kept apart
    from it: a batch takes one and gives it back without the pool's lock, readiness probe,
    release event and connection metrics. The probe is not needed: a batch reads every reply before giving its
    connection back, and redis-py closes a connection that failed mid-command.

    There are as many connections as batches ever ran at once; the caller bounds that (the
    ingress's deliveries in flight)."""

    def __init__(self, redis: Redis) -> None:
        self._pool = redis.connection_pool
        self._idle: list[AbstractConnection] = []
        self._made: list[AbstractConnection] = []

    def take(self) -> AbstractConnection:
        if self._idle:
            return self._idle.pop()
        # Not connected yet: the first send connects it (and reconnects it after a failure).
        connection: AbstractConnection = self._pool.make_connection()
        self._made.append(connection)
        return connection

    def give_back(self, connection: AbstractConnection) -> None:
        self._idle.append(connection)

    async def aclose(self) -> None:
        made, self._made, self._idle = self._made, [], []
        await asyncio.gather(*(connection.disconnect() for connection in made), return_exceptions=True)


class Batch:
    """Commands written in one packet and answered in order, as a pipeline without a
    transaction, for the hottest lookups (the ingress's). For the ingress's six commands a
    redis-py pipeline costs 145 to 182 µs of CPU here and this 63 to 68 µs (``pdm run bench
    redis_batch``): its per-command argument wrappers, retry, reply callbacks, reset and pool
    bookkeeping are skipped, and hiredis packs.

    Replies are the server's, decoded as the client decodes (a ``set`` answers ``"OK"``, or
    with ``get`` the previous value)."""

    def __init__(self, connections: BatchConnections) -> None:
        self._connections = connections
        self._packed: list[bytes] = []

    def get(self, name: str) -> None:
        self._packed.append(pack_command("GET", name))

    def hget(self, name: str, key: str) -> None:
        self._packed.append(pack_command("HGET", name, key))

    def hmget(self, name: str, keys: list[str]) -> None:
        self._packed.append(pack_command("HMGET", name, *keys))

    def set(self, name: str, value: str, *, px: int | None = None, nx: bool = False, get: bool = False) -> None:
        command: list[str | int] = ["SET", name, value]
        if px is not None:
            command += ["PX", px]
        if nx:
            command.append("NX")
        if get:
            command.append("GET")
        self._packed.append(pack_command(*command))

    def eval(self, script: str, numkeys: int, *keys_and_args: str | int) -> None:
        """The script's source goes with every call: the server keeps it compiled by its
        digest, and a batch has no NOSCRIPT round trip to repeat."""
        self._packed.append(pack_command("EVAL", script, numkeys, *keys_and_args))

    async def execute(self) -> list[Any]:
        """Every reply, in order. An error reply is raised once all replies are read, so the
        connection stays in step; a connection that failed mid-way was closed by redis-py,
        and its next batch connects it again."""
        if not self._packed:
            return []
        connection = self._connections.take()
        replies: list[Any] = []
        refused: ResponseError | None = None
        try:
            await connection.send_packed_command(self._packed)
            for _ in self._packed:
                try:
                    replies.append(await connection.read_response())
                except ResponseError as error:
                    refused = refused or error
                    replies.append(error)
        finally:
            self._connections.give_back(connection)
        if refused is not None:
            raise refused
        return replies


@dataclass(frozen=True)
class Keys:
    """Redis key names. Per-thread keys share the hash tag ``{thread_id}`` so that scripts
    touching several of them stay on one Redis Cluster slot."""

    prefix: str = "drydock"

    def thread(self, thread_id: str) -> str:
        return f"{self.prefix}:thread:{{{thread_id}}}"

    def lease(self, thread_id: str) -> str:
        return f"{self.prefix}:lease:{{{thread_id}}}"

    def leases_held(self) -> str:
        """Threads whose lease is held, scored by when it expires (epoch ms) unless renewed: the
        lease sweeper's index."""
        return f"{self.prefix}:leases-held"

    def lease_fence(self, thread_id: str) -> str:
        return f"{self.prefix}:lease-fence:{{{thread_id}}}"

    def sandbox(self, sandbox_id: str) -> str:
        """A sandbox's record (its handle), so any worker can reconnect by id."""
        return f"{self.prefix}:sandbox:{sandbox_id}"

    def sandboxes(self) -> str:
        """Every sandbox id, scored by its last use (epoch seconds): the reaper's index."""
        return f"{self.prefix}:sandboxes"

    def warm_pool_entries(self, pool: str) -> str:
        """Warm-pool sandboxes being started or idle (id → state); the pool's size is its length.
        The three warm-pool keys share the hash tag ``{pool}`` so that one script can move an id."""
        return f"{self.prefix}:warm-pool:{{{pool}}}:entries"

    def warm_pool_idle(self, pool: str) -> str:
        """Ready warm-pool sandboxes in claim order (ids)."""
        return f"{self.prefix}:warm-pool:{{{pool}}}:idle"

    def warm_pool_claims(self, pool: str) -> str:
        """Warm-pool sandboxes claimed but not yet handed over (id → claim time)."""
        return f"{self.prefix}:warm-pool:{{{pool}}}:claims"

    def sandbox_creator(self, thread_id: str, owner: str) -> str:
        """Liveness of ``owner`` while it creates the thread's sandbox (a short TTL it renews)."""
        return f"{self.prefix}:sandbox-creator:{{{thread_id}}}:{owner}"

    def sandbox_failures(self, thread_id: str) -> str:
        """Consecutive failures to provide the thread a sandbox; reset on success."""
        return f"{self.prefix}:sandbox-failures:{{{thread_id}}}"

    def grant(self, digest: str) -> str:
        """A credential-proxy grant, by the SHA-256 of its token (the token itself is never stored)."""
        return f"{self.prefix}:grant:{{{digest}}}"

    def grant_token(self, digest: str) -> str:
        """The encrypted upstream token behind a grant; same hash tag as :meth:`grant`."""
        return f"{self.prefix}:grant-token:{{{digest}}}"

    def grant_tokens_pattern(self) -> str:
        """Matches every :meth:`grant_token` key, for re-encryption after a key rotation."""
        return f"{self.prefix}:grant-token:*"

    def sandbox_grants(self, thread_id: str, sandbox_id: str) -> str:
        """The digests of the grants issued to one sandbox, so a new grant supersedes the old."""
        return f"{self.prefix}:sandbox-grants:{{{thread_id}}}:{sandbox_id}"

    def dead_letters(self) -> str:
        """Wakes that used up their deliveries (id → JSON record), for the dashboard."""
        return f"{self.prefix}:dead-letters"

    def store_epoch(self) -> str:
        """The store's epoch marker, written when the store is provisioned (:mod:`drydock.infra.store_epoch`)."""
        return f"{self.prefix}:store-epoch"

    def effect(self, thread_id: str, effect_id: str) -> str:
        """An external write of the thread (claimed, then done with its result): the effects ledger."""
        return f"{self.prefix}:effect:{{{thread_id}}}:{effect_id}"

    def delivery(self, channel: str, delivery_id: str) -> str:
        """A webhook delivery seen by the ingress (claimed, then done), for de-duplication."""
        return f"{self.prefix}:delivery:{channel}:{delivery_id}"

    def delivered_object(self, channel: str, identity: str) -> str:
        """The delivery id that claimed the object a webhook delivered (``Delivery.identity``),
        for de-duplicating a signed body sent again under another delivery id."""
        return f"{self.prefix}:delivered-object:{channel}:{identity}"

    def redeliveries_swept(self) -> str:
        """Epoch seconds from which the next sweep of GitHub's failed deliveries reads
        (:mod:`drydock.channels.github.redelivery`)."""
        return f"{self.prefix}:redeliveries-swept"

    def redelivery(self, guid: str) -> str:
        """How many times GitHub was asked to deliver the webhook ``guid`` again and when last
        (:func:`drydock.channels.github.given_up.asks`)."""
        return f"{self.prefix}:redelivery:{guid}"

    def deliveries_given_up(self) -> str:
        """GitHub webhook deliveries still failing after every redelivery (guid → JSON record),
        for the dashboard (:mod:`drydock.channels.github.given_up`)."""
        return f"{self.prefix}:deliveries-given-up"

    def account_link(self, provider: str, external_id: str) -> str:
        """The Drydock user an external account (GitHub, Slack, Linear) is linked to."""
        return f"{self.prefix}:account:{provider}:{external_id}"

    def user_accounts(self, user_id: str) -> str:
        """The external accounts linked to a user (``provider:external_id``)."""
        return f"{self.prefix}:user-accounts:{user_id}"

    def link_code(self, provider: str, digest: str) -> str:
        """A one-time link code, by the SHA-256 of the code (the code itself is never stored):
        the Drydock user it links to, with a short TTL."""
        return f"{self.prefix}:link-code:{provider}:{digest}"

    def link_code_of(self, user_id: str, provider: str) -> str:
        """The digest of a user's outstanding link code for ``provider`` (a pending link)."""
        return f"{self.prefix}:link-code-of:{user_id}:{provider}"

    def link_attempts(self, provider: str, external_id: str) -> str:
        """How many link codes an external account sent in the current window."""
        return f"{self.prefix}:link-attempts:{provider}:{external_id}"

    def user(self, user_id: str) -> str:
        """A user's profile hash (default repository, …)."""
        return f"{self.prefix}:user:{user_id}"

    def usage(self, day: str, dimension: str, value: str) -> str:
        """One day's usage and cost (``YYYY-MM-DD``, UTC) of one thread, user, team, repository or
        model (counters in a hash; expires after the retention)."""
        return f"{self.prefix}:usage:{day}:{dimension}:{value}"

    def usage_ranking(self, day: str, dimension: str) -> str:
        """One day's threads, users, repositories or models ranked by cost in nanodollars (a sorted
        set; a member with no known price counts 0), for the usage page; expires after the retention."""
        return f"{self.prefix}:usage:{day}:ranking:{dimension}"

    def active_runs(self) -> str:
        """The team's runs going on, for its concurrency limit: a sorted set of thread ids scored
        by the time (ms) each claim lapses unless renewed."""
        return f"{self.prefix}:budgets:active_runs"

    def budget_pause(self, thread_id: str) -> str:
        """Why the thread is paused at a budget (JSON), until its owner or an administrator continues it."""
        return f"{self.prefix}:budgets:{{{thread_id}}}:pause"

    def budget_grant(self, thread_id: str) -> str:
        """A continuation granted to the thread's next run: one more allowance (JSON)."""
        return f"{self.prefix}:budgets:{{{thread_id}}}:grant"

    def run_usage(self, run_id: str) -> str:
        """One run's usage and cost (counters in a hash; expires after the retention)."""
        return f"{self.prefix}:usage:run:{run_id}"

    def team(self) -> str:
        """The team defaults (allowed organizations, mention handle, default repository), as JSON."""
        return f"{self.prefix}:team"

    def repository(self, host: str, full_name: str) -> str:
        """An enabled repository's settings (coder, reviewer, autofix toggles), as JSON."""
        return f"{self.prefix}:repository:{host.lower()}:{full_name.lower()}"

    def repositories(self) -> str:
        """The set of repositories that have settings (``host:owner/name``)."""
        return f"{self.prefix}:repositories"

    def org_member(self, host: str, org: str, login: str) -> str:
        """A cached answer to "is ``login`` a member of ``org``" (``1``/``0``), with a TTL."""
        return f"{self.prefix}:org-member:{host.lower()}:{org.lower()}:{login.lower()}"

    def pr_record(self, host: str, full_name: str, number: int) -> str:
        """The durable record of a pull request the agent created: which thread created it."""
        return f"{self.prefix}:pr:{host.lower()}:{full_name.lower()}:{number}"

    def pr_branch(self, host: str, full_name: str, branch: str) -> str:
        """The thread that owns an agent branch (branch names are case-sensitive)."""
        return f"{self.prefix}:pr-branch:{host.lower()}:{full_name.lower()}:{branch}"

    def open_prs(self) -> str:
        """The set of open agent pull requests (their :meth:`pr_record` keys)."""
        return f"{self.prefix}:prs:open"

    def thread_prs(self, thread_id: str) -> str:
        """The pull requests a thread created (their :meth:`pr_record` keys)."""
        return f"{self.prefix}:thread-prs:{{{thread_id}}}"

    def thread_changes(self, thread_id: str) -> str:
        """What the thread's checkout changed against its base, as of the end of its last run
        (:mod:`drydock.threads.changes`)."""
        return f"{self.prefix}:thread-changes:{{{thread_id}}}"

    def thread_short_id(self, short_id: str) -> str:
        """The full thread id behind the short id that branch names carry."""
        return f"{self.prefix}:thread-short:{short_id}"

    def user_token(self, provider: str, user_id: str) -> str:
        """A user's OAuth token for ``provider`` (e.g. ``github``), encrypted."""
        return f"{self.prefix}:user-token:{provider}:{user_id}"

    def user_tokens_pattern(self) -> str:
        """Matches every :meth:`user_token` key, for re-encryption after a key rotation."""
        return f"{self.prefix}:user-token:*"

    def wakeups_due(self) -> str:
        """Scheduled wake-up ids scored by when they are due (epoch seconds). The wake-up keys share
        the hash tag ``{wakeups}`` so that one script can claim across them."""
        return f"{self.prefix}:wakeups:{{wakeups}}:due"

    def wakeup_entries(self) -> str:
        """Scheduled wake-ups by id (JSON: thread, role, due time, note)."""
        return f"{self.prefix}:wakeups:{{wakeups}}:entries"

    def thread_wakeups(self, thread_id: str) -> str:
        """The ids of a thread's pending wake-ups (under ``{wakeups}``, not ``{thread_id}``: the
        scheduling script writes it together with the due index)."""
        return f"{self.prefix}:wakeups:{{wakeups}}:thread:{thread_id}"

    def guidelines(self, host: str, full_name: str) -> str:
        """A repository's review guideline versions (version → JSON of its rules and provenance).
        The guideline keys of a repository share the hash tag ``{host:owner/name}``."""
        return f"{self.prefix}:guidelines:{{{host.lower()}:{full_name.lower()}}}:versions"

    def guidelines_counter(self, host: str, full_name: str) -> str:
        """The newest guideline version number of a repository."""
        return f"{self.prefix}:guidelines:{{{host.lower()}:{full_name.lower()}}}:counter"

    def guidelines_approvals(self, host: str, full_name: str) -> str:
        """The approval state of each guideline version (version → JSON: state, by whom, when)."""
        return f"{self.prefix}:guidelines:{{{host.lower()}:{full_name.lower()}}}:approvals"

    def analysis(self, host: str, full_name: str) -> str:
        """The analyzer's progress on a repository (bootstrap state, continual cursor), a hash."""
        return f"{self.prefix}:analysis:{host.lower()}:{full_name.lower()}"

    def analysis_evidence(self, thread_id: str) -> str:
        """What the analyzer's current run learns from (JSON), so its tool can check provenance."""
        return f"{self.prefix}:analysis-evidence:{{{thread_id}}}"

    def findings(self, thread_id: str) -> str:
        """A reviewer thread's findings (``f:{id}`` → JSON) and fingerprint index (``fp:{fp}`` → id)."""
        return f"{self.prefix}:findings:{{{thread_id}}}"

    def review_target(self, thread_id: str) -> str:
        """The pull request a reviewer thread reviews at its current head, with its diff (JSON)."""
        return f"{self.prefix}:review-target:{{{thread_id}}}"

    def repository_reviews(self, host: str, full_name: str) -> str:
        """The reviewer threads of a repository, scored by their findings' last change (epoch seconds)."""
        return f"{self.prefix}:repository-reviews:{host.lower()}:{full_name.lower()}"

    def finding_comment(self, host: str, full_name: str, comment_id: int | str) -> str:
        """The reviewer thread whose finding a code-host review comment carries."""
        return f"{self.prefix}:finding-comment:{host.lower()}:{full_name.lower()}:{comment_id}"

    def schedules_due(self) -> str:
        """Recurring schedule ids scored by their next due time (epoch seconds). The schedule keys
        share the hash tag ``{schedules}`` so that one script can claim across them."""
        return f"{self.prefix}:schedules:{{schedules}}:due"

    def schedule_entries(self) -> str:
        """Recurring schedules by id (JSON: thread, role, interval, note)."""
        return f"{self.prefix}:schedules:{{schedules}}:entries"

    def autofix_leader(self) -> str:
        """The autofix controller's lease (``owner|fence``): one active controller at a time."""
        return f"{self.prefix}:autofix-leader"

    def autofix_leader_fence(self) -> str:
        """The controller lease's fencing counter; it only grows."""
        return f"{self.prefix}:autofix-leader-fence"

    def autofix_override(self, host: str, full_name: str, number: int) -> str:
        """A person's autofix on/off override for one pull request (a hash: state, by, source, at)."""
        return f"{self.prefix}:autofix-override:{host.lower()}:{full_name.lower()}:{number}"

    def autofix_repair(self, thread_id: str) -> str:
        """The thread's active repair (a hash, with a TTL): its pull request, head, trigger and
        the confidence reported for it. While it exists the credential proxy gates the thread's pushes."""
        return f"{self.prefix}:autofix-repair:{{{thread_id}}}"

    def autofix_pending(self, thread_id: str) -> str:
        """Repair requests coalesced while a repair was active (pull request → request JSON)."""
        return f"{self.prefix}:autofix-pending:{{{thread_id}}}"

    def autofix_pull(self, thread_id: str, host: str, full_name: str, number: int) -> str:
        """Autofix's record of one agent pull request: repairs dispatched, loop-limit notice sent."""
        return f"{self.prefix}:autofix-pr:{{{thread_id}}}:{host.lower()}:{full_name.lower()}:{number}"

    def autofix_processed(self, thread_id: str, host: str, full_name: str, number: int) -> str:
        """The ``head sha:trigger`` pairs of a pull request that already got a repair run."""
        return f"{self.prefix}:autofix-processed:{{{thread_id}}}:{host.lower()}:{full_name.lower()}:{number}"

    def autofix_confidence(self, thread_id: str, run_id: str) -> str:
        """The confidence a run of the thread reported (report_confidence), with its diagnosis."""
        return f"{self.prefix}:autofix-confidence:{{{thread_id}}}:{run_id}"

    def checkpoints(self) -> str:
        """The prefix under which the LangGraph checkpointer spells its own keys
        (``…:cp:{thread_id}:…``, ``…:blob:…``, ``…:threads``; see :mod:`drydock.checkpoints`)."""
        return f"{self.prefix}:checkpoint"

    def threads_index(self) -> str:
        """Every thread, scored by its creation time (epoch milliseconds): the dashboard's list.
        The thread index keys share the hash tag ``{threads}``."""
        return f"{self.prefix}:threads:{{threads}}:all"

    def threads_by(self, facet: str, value: str) -> str:
        """The threads whose ``facet`` (kind, channel, repository, owner, state) is ``value``,
        scored like :meth:`threads_index`."""
        return f"{self.prefix}:threads:{{threads}}:{facet}:{value.lower()}"

    def thread_facets(self) -> str:
        """What the list filters on, per thread (thread id → kind, channel, repository, owner,
        state, score), so one script can filter without touching each thread's own hash."""
        return f"{self.prefix}:threads:{{threads}}:facets"

    def thread_scratch(self) -> str:
        """Where one list query keeps an intermediate union; deleted before the query returns."""
        return f"{self.prefix}:threads:{{threads}}:scratch"

    def threads_indexed(self) -> str:
        """Set once every thread created before the index existed has been added to it."""
        return f"{self.prefix}:threads:{{threads}}:backfilled"

    def thread_stop(self, thread_id: str) -> str:
        """A request to stop the thread's run, checked by the worker between graph steps."""
        return f"{self.prefix}:stop:{{{thread_id}}}"

    def thread_plan(self, thread_id: str) -> str:
        """The thread's plan awaiting or holding its owner's approval (signed; the proxy's plan gate)."""
        return f"{self.prefix}:plan:{{{thread_id}}}"

    def push_hold(self, thread_id: str, change: str) -> str:
        """A push held for its protected paths, by the digest of its exact ref updates (signed)."""
        return f"{self.prefix}:push-hold:{{{thread_id}}}:{change}"

    def push_holds(self, thread_id: str) -> str:
        """The thread's held pushes (change digests), newest last, for the thread page."""
        return f"{self.prefix}:push-holds:{{{thread_id}}}"

    def session(self, digest: str) -> str:
        """A dashboard session, by the SHA-256 of its cookie value (the value itself is never stored)."""
        return f"{self.prefix}:session:{digest}"

    def dev_link(self, digest: str) -> str:
        """A one-time development sign-in link, by the SHA-256 of its token."""
        return f"{self.prefix}:dev-link:{digest}"

    def login_attempt(self, state: str) -> str:
        """A sign-in in progress (OAuth ``state`` → PKCE verifier, nonce, where to return), short-lived."""
        return f"{self.prefix}:login:{state}"

    def user_identity(self, user_id: str) -> str:
        """How a user signed in last: provider, login, name (a hash), for display."""
        return f"{self.prefix}:user-identity:{user_id}"

    def user_repositories(self, user_id: str) -> str:
        """The repositories a user may see (lower-cased ``owner/name``), cached for ``access_ttl``."""
        return f"{self.prefix}:user-repositories:{user_id}"

    def installation_repositories(self) -> str:
        """The repositories the GitHub App is installed on (JSON), cached briefly for the dashboard."""
        return f"{self.prefix}:installation-repositories"
