#!/usr/bin/env bash
# The main job, end to end against a real broker in a temp root: init, plan and apply two
# spaces, start the broker, mint a member's creds and post/read a message, add a third space
# hot (no restart, no disconnect), remove one, stop.
set -euo pipefail
cd "$(dirname "$0")/.."
COTAL_NATS_SERVER=$(scripts/nats-server.sh)
export COTAL_NATS_SERVER
# The binaries `cargo install --locked --path .` built (nothing is compiled again after it).
cargo build --quiet --release --bins
cotal="$PWD/target/release/cotal"
pubsub="$PWD/target/release/cotal-pubsub"
root=$(mktemp -d)
export COTAL_ROOT="$root"
trap '"$cotal" down >/dev/null 2>&1 || true; rm -rf "$root"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$cotal" init
sed "s/^port = 4222/port = $port/" examples/two-spaces.toml > "$root/cotal.toml"
step "$cotal" plan
step "$cotal" apply --auto-approve
step "$cotal" up
step "$cotal" status
step "$cotal" creds design --member acme.alice --out "$root/alice.creds"
step "$pubsub" "nats://127.0.0.1:$port" "$root/alice.creds" design acme.alice general
pid=$(cat "$root/.cotal/nats.pid")
printf '\n[spaces.ops]\n' >> "$root/cotal.toml"
step "$cotal" plan --format markdown
step "$cotal" apply --auto-approve
[ "$pid" = "$(cat "$root/.cotal/nats.pid")" ] && echo "same broker pid $pid: no restart"
step "$cotal" status
sed -i 's/^protect = true/protect = false/' "$root/cotal.toml"
step "$cotal" apply --auto-approve
sed -i '/^\[spaces.release\]/d' "$root/cotal.toml"
step "$cotal" plan
step "$cotal" apply --auto-approve --allow-destroy
step "$cotal" plan --detailed-exitcode
step "$cotal" down
