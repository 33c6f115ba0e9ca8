"""Shell scripts that configure git inside a sandbox: the automation's identity, and the
credential grant's rules.

The grant's rules live in an include file of their own, written to a temporary file and renamed
into place, so the ``insteadOf`` rules of a superseded grant never linger and a reader never sees
half of them. ``git config --global`` takes a lock file; two workers configuring one sandbox at
the same moment would collide on it, so each such command is retried briefly.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

GRANT_CONFIG = "~/.config/drydock/grant.gitconfig"

_RETRY = 'retry() { n=0; until "$@"; do n=$((n+1)); [ "$n" -ge 20 ] && return 1; sleep 0.05; done; }'


def identity_script(name: str, email: str, *, unchanged_since: str | None = None) -> str:
    """Set ``user.name`` and ``user.email`` globally and print ~/.gitconfig afterwards.

    With ``unchanged_since`` (what an earlier run printed), nothing is run and nothing printed
    when the file still has exactly that content: the check uses bash builtins only. Under a
    shell without ``read -d`` the check fails and the identity is simply set again.
    """
    lines = [_RETRY, 'f="$HOME/.gitconfig"']
    if unchanged_since is not None:
        lines.append(
            f'if [ -f "$f" ] && {{ IFS= read -r -d \'\' have < "$f"; [ "$have" = {shlex.quote(unchanged_since)} ]; }}; '
            "then exit 0; fi"
        )
    lines.append(
        f"retry git config --global user.name {shlex.quote(name)} && "
        f'retry git config --global user.email {shlex.quote(email)} && cat "$f"'
    )
    return "\n".join(lines)


def grant_script(git_config: Sequence[tuple[str, str]]) -> str:
    lines = [
        "set -e",
        _RETRY,
        'dir="$HOME/.config/drydock"',
        'mkdir -p "$dir"',
        'next=$(mktemp "$dir/grant.XXXXXX")',
    ]
    lines += [f'git config --file "$next" --add {shlex.quote(key)} {shlex.quote(value)}' for key, value in git_config]
    lines.append('mv -f "$next" "$dir/grant.gitconfig"')
    # git expands the leading ~ of an include path itself.
    lines.append(
        f"git config --global --get-all include.path | grep -qxF {shlex.quote(GRANT_CONFIG)} "
        f"|| retry git config --global --add include.path {shlex.quote(GRANT_CONFIG)}"
    )
    return "\n".join(lines)
