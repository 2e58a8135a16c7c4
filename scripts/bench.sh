#!/usr/bin/env bash
# Benchmark: one apply that adds a space to a running broker already holding N spaces (default
# 100), next to the broker's own reload time for the same change (from its log), and the time of
# `cotal plan` on that root. Figures are ratios measured in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
COTAL_NATS_SERVER=$(scripts/nats-server.sh)
export COTAL_NATS_SERVER
cargo build --quiet --release
cotal="$PWD/target/release/cotal"
root=$(mktemp -d)
export COTAL_ROOT="$root"
trap '"$cotal" down >/dev/null 2>&1 || true; rm -rf "$root"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

"$cotal" init >/dev/null
{ printf 'version = 1\n[broker]\nport = %s\n' "$port"; for i in $(seq 1 "$n"); do printf '[spaces.s%04d]\n' "$i"; done; } > "$root/cotal.toml"
"$cotal" apply --auto-approve >/dev/null
"$cotal" up >/dev/null

now() { date +%s.%N; }
t0=$(now); "$cotal" plan >/dev/null; t1=$(now)
printf '[spaces.added]\n' >> "$root/cotal.toml"
t2=$(now); "$cotal" apply --auto-approve >/dev/null; t3=$(now)

reload=$(python3 - "$root/.cotal/nats.log" <<'PY'
import re, sys, datetime
trap = done = None
for line in open(sys.argv[1]):
    m = re.match(r'\[\d+\] (\S+ \S+) ', line)
    if not m: continue
    t = datetime.datetime.strptime(m.group(1), '%Y/%m/%d %H:%M:%S.%f')
    if 'Trapped "hangup" signal' in line: trap = t
    if 'Reloaded server configuration' in line and trap: done = t
print((done - trap).total_seconds())
PY
)
python3 - "$n" "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)" "$reload" <<'PY'
import sys
n, plan, apply, reload = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"spaces on the broker:            {n}")
print(f"cotal plan (no changes):         {plan*1000:8.1f} ms")
print(f"cotal apply adding one space:    {apply*1000:8.1f} ms  (observe, plan, mint, render, promote, reload, verify, provision 12 streams)")
print(f"nats-server reload (its log):    {reload*1000:8.1f} ms")
print(f"apply / reload:                  {apply/reload:8.1f} x")
PY
