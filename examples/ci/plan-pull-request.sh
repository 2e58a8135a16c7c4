#!/bin/sh
# Plan a pull request's cotal.toml against the state of the branch it targets, for a comment.
#
#   plan-pull-request.sh BASE HEAD [STATE]
#
# BASE is the git revision the pull request merges into (`origin/main`), HEAD the pull
# request's own (`pr-head`); STATE is the path of the committed state in the repository
# (default `state.json`). Run it from a checkout of BASE (the workflow's `pull_request_target`
# does that), so this script and the cotal that runs are the base branch's, never the pull
# request's. COTAL_STATE_KEY must hold the broker's public state key (`cotal state key` on the
# broker host), taken from the repository's settings.
#
# The pull request's files are extracted as data (`git archive`) and never run. Its cotal.toml
# is planned against the state as BASE holds it, never as the pull request changed it: a pull
# request that drops a space from both cotal.toml and the state still shows that space's
# removal. A pull request that changes the state gets a loud note at the top of the comment
# (the state is the broker host's to write, after an apply).
#
# Writes plan.md (the comment: the plan, or the refusal) and plan.json (the saved plan, for
# `cotal apply plan.json` after review) in the current folder; exits with cotal plan's code
# (0: no changes, 2: changes) or another code (3 when this script itself cannot plan), which
# plan.md then explains. Never 0 or 2 unless cotal planned.
set -u
rm -f plan.md plan.json
refuse() {
    { printf '%s\n' "${note:-}"; echo "### cotal plan refused"; echo; echo "$1"; } > plan.md
    echo "plan-pull-request.sh: $1" >&2
    exit 3
}
[ $# -ge 2 ] || refuse "usage: plan-pull-request.sh BASE HEAD [STATE]"
base="$1"
head="$2"
state="${3:-state.json}"
work="$(mktemp -d)" || refuse "cannot make a temporary folder"
trap 'rm -rf "$work"' EXIT

note=""
if ! git diff --quiet "$base...$head" -- "$state" 2>/dev/null; then
    note="> [!CAUTION]
> **This pull request changes \`$state\`.** The state is written by the broker host after an
> apply, never by hand: the plan below is made from the state on the base branch, and the
> change to \`$state\` is not part of what was reviewed.
"
fi

git show "$base:$state" > "$work/state.json" 2>/dev/null ||
    refuse "The base branch holds no \`$state\`: commit the state the broker host exports (\`cotal state export --out $state\`) to the base branch first."
mkdir "$work/tree" &&
    git archive -o "$work/pr.tar" "$head" &&
    tar -xf "$work/pr.tar" -C "$work/tree" ||
    refuse "The pull request's files could not be read (git archive $head)."
# Only cotal.toml and the files it names are the pull request's to bring; a root's state
# folder is never taken from it.
rm -rf "$work/tree/.cotal"

cotal --root "$work/tree" plan --state "$work/state.json" --format markdown \
    --detailed-exitcode --out "$PWD/plan.json" --force > "$work/plan.md" 2> "$work/plan.err"
code=$?
{
    [ -n "$note" ] && printf '%s\n' "$note"
    if [ "$code" = 0 ] || [ "$code" = 2 ]; then
        cat "$work/plan.md"
    else
        echo "### cotal plan refused (exit $code)"; echo; echo '```'; cat "$work/plan.err"; echo '```'
    fi
} > plan.md
exit "$code"
