#!/bin/sh
# Plan a pull request's cotal.toml against the state of the branch it targets, for a comment.
#
#   plan-pull-request.sh BASE [STATE]
#
# BASE is the git revision the pull request merges into (`origin/main`); STATE is the path of
# the committed state in the repository (default `state.json`). Run from the repository's top.
# COTAL_STATE_KEY must hold the broker's public state key (`cotal state key` on the broker
# host), taken from the repository's settings, never from the pull request.
#
# The state is read as BASE holds it, never as the pull request changed it: a pull request that
# drops a space from both cotal.toml and state.json still shows that space's removal. A pull
# request that changes the state gets a loud note at the top of the comment (the state is the
# broker host's to write, after an apply).
#
# Writes plan.md (the comment: the plan, or the refusal cotal printed) and plan.json (the saved
# plan, for `cotal apply plan.json` after review); exits with cotal plan's code (0: no changes,
# 2: changes, anything else: refused or failed, which plan.md then says).
set -u
base="$1"
state="${2:-state.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

note=""
if ! git diff --quiet "$base...HEAD" -- "$state"; then
    note="> [!CAUTION]
> **This pull request changes \`$state\`.** The state is written by the broker host after an
> apply, never by hand: the plan below is made from the state on the base branch, and the
> change to \`$state\` is not part of what was reviewed.
"
fi

if ! git show "$base:$state" > "$work/state.json" 2>"$work/git.err"; then
    { printf '%s\n' "$note"; echo "### cotal plan refused"; echo
      echo "The base branch holds no \`$state\`: commit the state the broker host exports"
      echo "(\`cotal state export --out $state\`) to the base branch first."; } > plan.md
    exit 3
fi

cotal plan --state "$work/state.json" --format markdown --detailed-exitcode --out plan.json --force \
    > "$work/plan.md" 2> "$work/plan.err"
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
