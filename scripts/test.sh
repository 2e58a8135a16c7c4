#!/usr/bin/env bash
# The test command: installs a real nats-server if needed, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
COTAL_NATS_SERVER=$(scripts/nats-server.sh)
export COTAL_NATS_SERVER
echo "nats-server: $("$COTAL_NATS_SERVER" --version)"
cargo test --all-targets --features fault-injection,real-broker "$@"
