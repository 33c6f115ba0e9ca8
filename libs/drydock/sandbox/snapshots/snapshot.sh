# Workspace snapshots, the part that runs inside the sandbox: capture a git worktree into one
# archive, or rebuild a worktree from one. Run by drydock.sandbox.snapshots as
#
#   sh -c "$SCRIPT" drydock-snapshot capture REPO SCRATCH MAX_BYTES PREVIOUS_FINGERPRINT
#   sh -c "$SCRIPT" drydock-snapshot rebuild REPO SCRATCH EXPECTED_STATE
#
# REPO and SCRATCH are absolute or relative to the working directory the sandbox starts in.
# The last line starting with "drydock-snapshot:" is the result; anything else is diagnostics.
# Needs POSIX sh, git >= 2.31, GNU tar >= 1.29, GNU grep and coreutils.
#
# An archive holds these parts (format 1):
#   format, object-format    archive format and the repository's hash algorithm
#   branch, head             the checked-out branch (empty: detached) and HEAD (empty: unborn)
#   branches                 every local branch: "refname sha"
#   config                   remotes and branch upstreams: "key value" lines of the local config
#   staged.diff              index against HEAD, binary patch
#   unstaged.diff            worktree against index, binary patch
#   intent-to-add            paths added with "git add -N", NUL-separated
#   untracked.tar            untracked files that .gitignore does not exclude
#   local.bundle             (optional) commits of local branches and HEAD no remote-tracking ref has
# The "state" is a hash over every part but the bundle. Rebuilding checks the archive against the
# state it was recorded with, and the rebuilt worktree against it again before it is moved into place.

set -eu

STATUS=drydock-snapshot:
PARTS="format object-format branch head branches config staged.diff unstaged.diff intent-to-add untracked.tar"
# User configuration must not change what a diff looks like (colour, external tools, prefixes).
DIFF="--binary --no-color --no-ext-diff --no-textconv --no-renames --no-relative --src-prefix=a/ --dst-prefix=b/"

fail() {
    echo "$STATUS error $*"
    exit 1
}

corrupt() {
    echo "$STATUS corrupt $*"
    exit 1
}

# Write the parts of the worktree in the current directory into directory $1.
describe() {
    out=$1
    echo 1 >"$out/format"
    git rev-parse --show-object-format >"$out/object-format"
    git symbolic-ref -q HEAD >"$out/branch" || :
    git rev-parse -q --verify HEAD >"$out/head" || :
    git for-each-ref --format='%(refname) %(objectname)' refs/heads >"$out/branches"
    git config --local --get-regexp '^(remote\..+\.(url|pushurl|fetch)|branch\..+\.(remote|merge|rebase))$' \
        >"$out/config" || :
    # shellcheck disable=SC2086
    git diff --cached $DIFF >"$out/staged.diff"
    # shellcheck disable=SC2086
    git diff $DIFF >"$out/unstaged.diff"
    git diff --name-only --diff-filter=A -z --no-color --no-renames --no-relative >"$out/intent-to-add"
    # Directories in the list are nested repositories; they are not part of this worktree.
    git ls-files -z --others --exclude-standard >"$out.untracked.all"
    grep -zv '/$' "$out.untracked.all" >"$out.untracked" || :
    tar --create --file="$out/untracked.tar" --format=gnu --mtime=@0 --owner=0 --group=0 --numeric-owner \
        --no-recursion --null --verbatim-files-from --files-from="$out.untracked"
}

absolute() {
    case $1 in
    /*) echo "$1" ;;
    *) echo "$PWD/$1" ;;
    esac
}

state_of() {
    (cd "$1" && sha256sum $PARTS) | sha256sum | cut -d' ' -f1
}

bytes_of() {
    du -sb "$1" | cut -f1
}

capture() {
    repo=$(absolute "$1") scratch=$(absolute "$2") max_bytes=$3 previous=$4
    [ -d "$repo" ] || fail "there is no directory $repo"
    cd "$repo"
    [ "$(git rev-parse --is-inside-work-tree 2>/dev/null || :)" = true ] || fail "$repo is not a git worktree"
    [ -z "$(git rev-parse --show-cdup)" ] || fail "$repo is not the top level of its git repository"
    [ -z "$(git ls-files --unmerged)" ] || fail "$repo has unmerged paths (a merge or rebase is in progress)"
    mkdir "$scratch"
    out=$scratch/snapshot
    mkdir "$out"
    describe "$out"
    state=$(state_of "$out")
    git for-each-ref --format='%(refname) %(objectname)' refs/remotes >"$scratch/remote-refs"
    # Remote-tracking refs decide what the bundle holds, so a push alone makes a new snapshot.
    fingerprint=$({ echo "$state"; cat "$scratch/remote-refs"; } | sha256sum | cut -d' ' -f1)
    if [ "$fingerprint" = "$previous" ]; then
        echo "$STATUS unchanged $fingerprint"
        return
    fi
    size=$(bytes_of "$out")
    if [ "$size" -gt "$max_bytes" ]; then
        echo "$STATUS too-large $size"
        return
    fi
    tips=--branches
    if [ -s "$out/head" ]; then
        tips="--branches HEAD"
    fi
    # shellcheck disable=SC2086
    if [ -n "$(git rev-list -n 1 $tips --not --remotes)" ]; then
        git bundle create --quiet "$out/local.bundle" $tips --not --remotes
    fi
    tar --create --file="$scratch/snapshot.tar" --directory="$out" .
    size=$(bytes_of "$scratch/snapshot.tar")
    if [ "$size" -gt "$max_bytes" ]; then
        echo "$STATUS too-large $size"
        return
    fi
    sha=$(sha256sum "$scratch/snapshot.tar" | cut -d' ' -f1)
    head=$(cat "$out/head")
    branch=$(cat "$out/branch")
    echo "$STATUS ready $fingerprint $state $size $sha ${head:--} ${branch:--}"
}

rebuild() {
    repo=$(absolute "$1") scratch=$(absolute "$2") expected=$3
    in=$scratch/snapshot
    mkdir "$in"
    tar --extract --file="$scratch/snapshot.tar" --directory="$in" 2>"$scratch/log" ||
        corrupt "the archive cannot be read: $(head -c 300 "$scratch/log")"
    for part in $PARTS; do
        [ -f "$in/$part" ] || corrupt "the archive is incomplete: $part is missing"
    done
    [ "$(cat "$in/format")" = 1 ] || corrupt "unknown archive format $(head -c 20 "$in/format")"
    [ "$(state_of "$in")" = "$expected" ] || corrupt "the archive does not match its record"

    existing=
    if [ -d "$repo/.git" ]; then
        [ -z "$(git -C "$repo" status --porcelain --untracked-files=all)" ] ||
            fail "$repo has changes of its own; it is left as it is"
        existing=$repo
    elif [ -e "$repo" ] || [ -L "$repo" ]; then
        [ -d "$repo" ] && [ -z "$(ls -A "$repo")" ] || fail "$repo exists and is not a git repository"
    fi

    new=$scratch/repo
    git init --quiet --object-format="$(cat "$in/object-format")" "$new"
    cd "$new"
    while read -r key value; do
        git config --local --add "$key" "$value"
    done <"$in/config"
    if [ -n "$(git remote)" ]; then
        git fetch --quiet --all 2>"$scratch/log" ||
            fail "cannot fetch from the recorded remotes: $(head -c 300 "$scratch/log")"
    fi
    if [ -f "$in/local.bundle" ]; then
        git bundle verify --quiet "$in/local.bundle" >/dev/null 2>"$scratch/log" ||
            fail "the snapshot's commits build on history the remote does not have: $(head -c 300 "$scratch/log")"
        git bundle unbundle "$in/local.bundle" >/dev/null 2>"$scratch/log" ||
            corrupt "the commit bundle cannot be read: $(head -c 300 "$scratch/log")"
    fi
    while read -r ref sha; do
        git update-ref "$ref" "$sha" 2>/dev/null || fail "commit $sha of $ref is neither in the snapshot nor on the remote"
    done <"$in/branches"
    head=$(cat "$in/head")
    branch=$(cat "$in/branch")
    if [ -n "$branch" ]; then
        git symbolic-ref HEAD "$branch"
    else
        git update-ref --no-deref HEAD "$head" 2>/dev/null || fail "commit $head of the detached HEAD is missing"
    fi
    if [ -n "$head" ]; then
        git reset --quiet --hard
    fi
    if [ -s "$in/staged.diff" ]; then
        git apply --index --whitespace=nowarn "$in/staged.diff" 2>"$scratch/log" ||
            fail "the staged changes do not apply: $(head -c 300 "$scratch/log")"
    fi
    if [ -s "$in/unstaged.diff" ]; then
        git apply --whitespace=nowarn "$in/unstaged.diff" 2>"$scratch/log" ||
            fail "the unstaged changes do not apply: $(head -c 300 "$scratch/log")"
    fi
    # Not "git apply --intent-to-add": in git 2.39 it drops the rest of the index.
    if [ -s "$in/intent-to-add" ]; then
        git --literal-pathspecs add --intent-to-add --pathspec-from-file="$in/intent-to-add" --pathspec-file-nul
    fi
    tar --extract --file="$in/untracked.tar" --preserve-permissions --touch 2>"$scratch/log" ||
        corrupt "the untracked files cannot be extracted: $(head -c 300 "$scratch/log")"

    check=$scratch/check
    mkdir "$check"
    describe "$check"
    [ "$(state_of "$check")" = "$expected" ] || fail "the rebuilt worktree does not match the snapshot"

    cd "$scratch"
    if [ -n "$existing" ]; then
        mv "$existing" "$scratch/previous"
    elif [ -d "$repo" ]; then
        rmdir "$repo"
    fi
    mkdir -p "$(dirname "$repo")"
    if ! mv "$new" "$repo"; then
        [ -z "$existing" ] || mv "$scratch/previous" "$existing"
        fail "cannot move the rebuilt repository to $repo"
    fi
    echo "$STATUS restored ${head:--}"
}

command=$1
shift
case $command in
capture) capture "$@" ;;
rebuild) rebuild "$@" ;;
*) fail "unknown command $command" ;;
esac
