#!/usr/bin/env bash
# The main job, end to end in a temp root: init, plan and apply two spaces, re-plan (no changes),
# then remove one. Uses a real nats-server to check the rendered config.
set -euo pipefail
cd "$(dirname "$0")/.."
COTAL_NATS_SERVER=$(scripts/nats-server.sh)
export COTAL_NATS_SERVER
cargo build --quiet --release
cotal="$PWD/target/release/cotal"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
export COTAL_ROOT="$root"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$cotal" init
cp examples/two-spaces.toml "$root/cotal.toml"
step "$cotal" plan
step "$cotal" apply --auto-approve
step "$cotal" plan --detailed-exitcode
step "$COTAL_NATS_SERVER" -t -c "$root/.cotal/auth/server.conf"
sed -i 's/^protect = true/protect = false/' "$root/cotal.toml"
step "$cotal" apply --auto-approve
printf 'version = 1\n\n[spaces.design]\n' > "$root/cotal.toml"
step "$cotal" plan --format markdown
step "$cotal" apply --auto-approve --allow-destroy
step "$cotal" plan
