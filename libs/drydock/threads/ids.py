"""Thread ids derived from the external conversation (DESIGN.md section 2).

Pure functions. Every later message of a conversation must return to the same thread, so a
canonical key is built per source and turned into a uuid5 in the project's namespace. The
namespace and the key formats are frozen: tests pin known input → id vectors.
Names the code host treats case-insensitively (host, owner, repository) are lower-cased;
identifiers that are case-sensitive (Slack, Linear) are kept as given.
"""

from __future__ import annotations

import functools
import uuid

NAMESPACE = uuid.UUID("5f0c6a52-2b1e-5d8a-9a57-64727964636b")


@functools.lru_cache(maxsize=16384)
def thread_id(key: str) -> str:
    """The thread id of a canonical key (cached: routing derives each delivery's id twice, a
    follow-up derives its thread's again, and a uuid5 costs a SHA-1 and two conversions)."""
    return str(uuid.uuid5(NAMESPACE, key))


def short_id(thread_id_: str) -> str:
    """The short form carried in branch names (``drydock/<short>-…``)."""
    return uuid.UUID(thread_id_).hex[:12]


def _repo(host: str, owner: str, repo: str) -> str:
    for name, value in (("host", host), ("owner", owner), ("repo", repo)):
        if not value or ":" in value or "/" in value or " " in value:
            raise ValueError(f"invalid {name}: {value!r}")
    return f"{host.lower()}:{owner.lower()}/{repo.lower()}"


def _number(number: int) -> int:
    if number < 1:
        raise ValueError(f"invalid issue or pull request number: {number}")
    return number


def github_issue_key(host: str, owner: str, repo: str, number: int) -> str:
    return f"github:{_repo(host, owner, repo)}:issue:{_number(number)}"


def github_pr_key(host: str, owner: str, repo: str, number: int) -> str:
    """A pull request not created by the agent (agent PRs route through their PR record)."""
    return f"github:{_repo(host, owner, repo)}:pr:{_number(number)}"


def linear_issue_key(organization: str, issue_id: str) -> str:
    if not organization or not issue_id:
        raise ValueError("Linear organization and issue id are required")
    return f"linear:{organization}:issue:{issue_id}"


def slack_thread_key(team: str, channel: str, thread_ts: str) -> str:
    """A Slack thread; a top-level message starts a thread at its own ``ts``."""
    if not team or not channel or not thread_ts:
        raise ValueError("Slack team, channel and thread ts are required")
    return f"slack:{team}:{channel}:{thread_ts}"


def reviewer_key(host: str, owner: str, repo: str, number: int) -> str:
    return "reviewer:" + github_pr_key(host, owner, repo, number)


def analyzer_key(host: str, owner: str, repo: str) -> str:
    return f"analyzer:github:{_repo(host, owner, repo)}"


def github_issue(host: str, owner: str, repo: str, number: int) -> str:
    return thread_id(github_issue_key(host, owner, repo, number))


def github_pr(host: str, owner: str, repo: str, number: int) -> str:
    return thread_id(github_pr_key(host, owner, repo, number))


def linear_issue(organization: str, issue_id: str) -> str:
    return thread_id(linear_issue_key(organization, issue_id))


def slack_thread(team: str, channel: str, thread_ts: str) -> str:
    return thread_id(slack_thread_key(team, channel, thread_ts))


def reviewer(host: str, owner: str, repo: str, number: int) -> str:
    return thread_id(reviewer_key(host, owner, repo, number))


def analyzer(host: str, owner: str, repo: str) -> str:
    return thread_id(analyzer_key(host, owner, repo))


def dashboard() -> str:
    """A thread started from the dashboard has no external conversation: a fresh uuid4."""
    return str(uuid.uuid4())
