#!/usr/bin/env bash
# Benchmark: one apply that adds a space to a running broker already holding N spaces (default
# 100), next to the broker's own reload time for the same change (its reply to the reload request), and the time of
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
croot=$(mktemp -d)
trap '"$cotal" down >/dev/null 2>&1 || true; "$cotal" --root "$croot" down >/dev/null 2>&1 || true; rm -rf "$root" "$croot"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

"$cotal" init >/dev/null
{ printf 'version = 1\n[broker]\nport = %s\n' "$port"; for i in $(seq 1 "$n"); do printf '[spaces.s%04d]\n' "$i"; done; } > "$root/cotal.toml"
"$cotal" apply --auto-approve >/dev/null
"$cotal" up >/dev/null

now() { date +%s.%N; }
t0=$(now); "$cotal" plan >/dev/null; t1=$(now)
printf '[spaces.added]\n' >> "$root/cotal.toml"
t2=$(now); out=$("$cotal" apply --auto-approve); t3=$(now)
t4=$(now); "$cotal" state export >/dev/null; t5=$(now)

# The broker's own reload: the time between cotal's reload request and the server's reply,
# which it sends once the reload is done (cotal prints it).
reload=$(printf '%s\n' "$out" | sed -n 's/.*Reload confirmed by nats-server in \([0-9.]*\) ms.*/\1/p' | head -1)
reload=$(echo "$reload / 1000" | bc -l)

# The same apply on a 3-node loopback cluster (replicas 3) holding the same N spaces: every
# node reloaded at once and confirmed; cotal prints the slowest node's reload.
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
"$cotal" --root "$croot" init >/dev/null
{ printf 'version = 1\n[cluster]\nreplicas = 3\n'
  for i in 1 2 3; do printf '[[cluster.nodes]]\nname = "n%s"\nport = %s\ncluster_port = %s\n' "$i" "$(free)" "$(free)"; done
  for i in $(seq 1 "$n"); do printf '[spaces.s%04d]\n' "$i"; done; } > "$croot/cotal.toml"
"$cotal" --root "$croot" apply --auto-approve >/dev/null
"$cotal" --root "$croot" up >/dev/null
printf '[spaces.added]\n' >> "$croot/cotal.toml"
t6=$(now); cout=$("$cotal" --root "$croot" apply --auto-approve); t7=$(now)
creload=$(printf '%s\n' "$cout" | sed -n 's/.*Reload confirmed by all [0-9]* running nodes in \([0-9.]*\) ms.*/\1/p' | head -1)
creload=$(echo "$creload / 1000" | bc -l)

python3 - "$n" "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)" "$reload" "$(echo "$t5 - $t4" | bc)" "$(echo "$t7 - $t6" | bc)" "$creload" <<'PY'
import sys
n, plan, apply, reload, state = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
capply, creload = float(sys.argv[6]), float(sys.argv[7])
print(f"spaces on the broker:            {n}")
print(f"cotal plan (no changes):         {plan*1000:8.1f} ms")
print(f"cotal apply adding one space:    {apply*1000:8.1f} ms  (observe, plan, mint, render, promote, reload, verify, provision 12 streams)")
print(f"nats-server reload (its reply):  {reload*1000:8.1f} ms")
print(f"apply / reload:                  {apply/reload:8.1f} x")
print(f"cotal state export:              {state*1000:8.1f} ms  (an apply writes it too)")
print(f"the same apply, 3-node cluster:  {capply*1000:8.1f} ms  (replicas 3: 12 replicated streams and buckets)")
print(f"slowest node's reload:           {creload*1000:8.1f} ms")
print(f"cluster apply / single apply:    {capply/apply:8.1f} x  (goal: at most 1.5x)")
PY
