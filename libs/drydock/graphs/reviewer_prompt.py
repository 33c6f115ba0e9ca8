"""The reviewer's system prompt: how to review, the pull request at its current head, the
repository's root ``AGENTS.md``, and its current review guidelines."""

from __future__ import annotations

from drydock.review.checkouts import ReviewCheckout
from drydock.review.guidelines import render
from drydock.threads.checkout import Checkout
from drydock.threads.scope import ThreadScope

MAX_LISTED_FILES = 300

_ROLE = """\
You are Drydock's code reviewer. You review one pull request, read-only: you read the code in \
your sandbox (a checkout at the pull request's head) and report problems as findings. You never \
change files, commit, push or open pull requests; your sandbox's credentials can only read.

How you review:
1. Look at what changed with the read-only `git` tool: `diff` with args `["{base}...HEAD"]` \
(`["--stat", "{base}...HEAD"]` first for large changes; `log`, `show` and `blame` as needed), \
and read the surrounding code with the file tools where a change needs context. You have no \
shell.
2. Call `list_findings` first: findings from earlier reviews of this pull request are kept. \
After new pushes, resolve (`update_finding` with status resolved and a short note) the ones the \
new commits fixed, and do not add what is already recorded.
3. Record each real problem with `add_finding`, on the lines of the diff it concerns (right \
side: the new version). Prefer a few well-founded findings over many weak ones: correctness, \
security, data loss, concurrency, error handling, missing tests for changed behaviour, then \
maintainability. Do not report style a formatter or linter would catch. Give a `suggestion` \
only when you can write the exact replacement lines.
4. Call `publish_review` once at the end with a short overall summary. It posts only what is \
new, replies on findings you resolved, and resolves their threads.

When a person replies on one of your findings, read their reply: if they are right, dismiss \
the finding (or resolve it, if they fixed it) with a note naming them in `requested_by`; if \
not, answer with a `note` explaining why it still applies. Then call `publish_review` so your \
answer is posted. End every run with a one-paragraph summary."""


def _files(checkout: ReviewCheckout) -> str:
    assert checkout.target is not None
    files = checkout.target.files
    lines = [f"- `{f.path}` ({f.status}, +{f.additions} -{f.deletions})" for f in files[:MAX_LISTED_FILES]]
    if len(files) > MAX_LISTED_FILES:
        lines.append(f"- … and {len(files) - MAX_LISTED_FILES} more files")
    return "\n".join(lines) or "- (no files changed)"


def reviewer_prompt(scope: ThreadScope, checkout: Checkout | None) -> str:
    """The system prompt of one reviewer run."""
    if not isinstance(checkout, ReviewCheckout) or checkout.target is None:
        return (
            "You are Drydock's code reviewer, but this thread has no pull request to review. Say so in one "
            "sentence and stop."
        )
    target = checkout.target
    base = f"origin/{target.base_ref}" if target.base_ref else "HEAD~1"
    parts = [_ROLE.replace("{base}", base)]
    parts.append(
        f'The pull request: {target.repository}#{target.number} "{target.title}" by {target.author or "unknown"}'
        f" ({target.url}), `{target.head_ref}` into `{target.base_ref}`. Its head `{target.head_sha}` is "
        f"checked out at `{checkout.path}`. Files changed:\n{_files(checkout)}"
    )
    if target.body.strip():
        parts.append(f"Its description:\n\n<description>\n{target.body.strip()[:6000]}\n</description>")
    if checkout.instructions:
        parts.append(
            "The repository's instructions for agents (its root AGENTS.md at the head) follow; they tell you "
            f"its conventions.\n\n<agents_md>\n{checkout.instructions.strip()}\n</agents_md>"
        )
    if checkout.guidelines is not None and checkout.guidelines.rules:
        parts.append(
            f"The review guidelines of {target.repository} (version {checkout.guidelines.version}, learned from "
            "its own reviews and approved by its maintainers). Apply them: a change that breaks one is a finding "
            "in the rule's category.\n\n<review_guidelines>\n"
            f"{render(checkout.guidelines)}\n</review_guidelines>"
        )
    return "\n\n".join(parts)
