#!/usr/bin/env bash
# The performance benchmark (issue 15). Every row is measured in this one run, next to its floor
# or peer measured the same way on the same machine, and printed as a ratio:
#
#   apply adding one space to a running broker of N spaces   vs the broker's own reload of it
#     (the first apply after `up`, whose registries `up` cached; then the median of the next
#     three against the median of their reloads; and against that reload plus the broker's
#     answers to the two JSZ requests such an add makes: `examples/jsz_floor`)
#   apply removing one space from it (the fence's reload, the deletion, the final reload)
#                                                              vs the broker's own two reloads
#   plan, broker stopped, N spaces, the sweep's largest broker and BIG spaces (BIG past the
#     host's capacity: built with the open-file limit reported wider, scripts/nofile_hard.c,
#     and never started)                                       vs reading and parsing the records
#   no-op apply, broker stopped, N spaces                      (and how many paths it wrote: 0)
#   first apply of N spaces (broker stopped)                   (the bulk add)
#   up provisioning N new spaces                               vs a tight concurrent client
#   the same add on a 3-node cluster of CLUSTER spaces         vs the single server's
#   a sibling space's JetStream publish during the add         vs the same publisher just before
#     (at N spaces and at the sweep's largest: `examples/sibling_publish`)
#
# and sweeps apply time against the number of spaces (SWEEP, up to the largest broker this host
# allows), next to the broker's reload, a restart (down + up) and the sibling's publish latency
# during the apply, drawing docs/bench/apply-vs-spaces.png from its own figures (data beside it
# in docs/bench/sweep.tsv; the table in docs/bench/results.md).
#
# Environment: BENCH_SPACES (N, default 1000), BENCH_BIG (default 10000), BENCH_SWEEP (default
# "10 30 100 300 1000 3000"), BENCH_CLUSTER (default 100; 0 skips the cluster row), BENCH_DIR
# (where the roots live; default the system's temp folder: the disk operators would use).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_SPACES:-1000}
BIG=${BENCH_BIG:-10000}
SWEEP=${BENCH_SWEEP:-"10 30 100 300 1000 3000"}
CLUSTER=${BENCH_CLUSTER:-100}
COTAL_NATS_SERVER=$(scripts/nats-server.sh)
export COTAL_NATS_SERVER
# The most spaces this host lets a broker hold (`cotal up` gives nats-server the hard open-file
# limit; one file per stream and bucket of a space, 15, and 64 of its own: `plan/capacity.rs`),
# less room for the spaces the runs add on top: a count past it is refused before any change, so
# the runs are capped at it (and say so).
capacity=$(( ($(ulimit -Hn) - 64) / 15 - 20 ))
# The BIG root is applied with the broker stopped and never started: past the capacity, its
# first apply runs with the hard open-file limit reported to cotal as wide enough
# (scripts/nofile_hard.c, preloaded; the limit itself is not raised), so the plan of BIG spaces
# is measured on a host that could not run them. Where the shim cannot be built (no C
# compiler), BIG is capped at the capacity, and its rows say so.
nofile_shim=
big_note=
# A sweep point past the capacity is replaced by the capacity itself: the picture ends at the
# largest broker this host allows.
SWEEP=$(for n in $SWEEP; do if [ "$n" -le "$capacity" ]; then echo "$n"; else echo "$capacity"; fi; done | sort -nu | tr '\n' ' ')
# The sweep's largest broker, whose stopped root has a plan row of its own.
largest=$(echo "$SWEEP" | awk '{print $NF}')
cargo build --quiet --release --bin cotal --example read_records --example provision_floor \
  --example sibling_publish --example jsz_floor
repo=$PWD
cotal="$repo/target/release/cotal"
read_records="$repo/target/release/examples/read_records"
provision_floor="$repo/target/release/examples/provision_floor"
sibling_publish="$repo/target/release/examples/sibling_publish"
jsz_floor="$repo/target/release/examples/jsz_floor"
out="$repo/docs/bench"
mkdir -p "$out"
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/cotal-bench.XXXXXX")
cleanup() {
  for r in "$work"/*/; do "$cotal" --root "$r" down >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
if [ "$BIG" -gt "$capacity" ]; then
  if cc -shared -fPIC -O2 -o "$work/nofile_hard.so" scripts/nofile_hard.c -ldl 2>/dev/null; then
    nofile_shim="$work/nofile_hard.so"
    big_note="past this host's capacity of $capacity: built with the open-file limit reported wider, never started"
  else
    echo "BENCH_BIG $BIG is past this host's capacity ($capacity spaces, hard open-file limit $(ulimit -Hn)) and scripts/nofile_hard.c could not be built (no C compiler?): BIG capped at $capacity" >&2
    big_note="capped at this host's capacity: BENCH_BIG $BIG is past it, and scripts/nofile_hard.c could not be built"
    BIG=$capacity
  fi
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
# Seconds `"$@"` takes (its output discarded).
took() { local t0; t0=$(now); "$@" >/dev/null; echo "$(now) - $t0" | bc; }
# The median of K runs of `"$@"`, in seconds.
median() {
  local k=$1; shift
  for _ in $(seq "$k"); do took "$@"; done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
# Every benchmark root caps a space at 32 MiB of storage: without a cap a space reserves the
# original's 4 GiB artifact store, and the storage guard (rightly) refuses a thousand of them.
limits='[defaults.limits]\nmax_storage = "32MiB"\n'
# A root at $1 declaring spaces 1..$2, on a free port (each space's storage capped at $3, by
# default the runs' $limits).
new_root() {
  mkdir -p "$1"
  "$cotal" --root "$1" init >/dev/null
  { printf "version = 1\n${3:-$limits}[broker]\nport = %s\n" "$(free_port)"
    spaces 1 "$2"; } >"$1/cotal.toml"
}
# Build the root $1 of $2 spaces with the broker stopped and time its plan: "first_apply_s
# plan_s floor_s peak_kb". Past the host's capacity, its first apply runs with the open-file
# limit reported wider ($nofile_shim); the plan and the floor run as they are. Fails (and so
# ends the run) when the root was not applied, rather than timing the plan of an empty one.
stopped_root() {
  # 2 MiB a space (the least cotal allows: its buckets reserve 1 MiB): ten thousand of the runs'
  # 32 MiB would be more than the file store a disk of this size gives, and cotal refuses that.
  new_root "$1" "$2" '[defaults.limits]\nmax_storage = "2MiB"\n'
  local bulk plan floor mem
  if [ "$2" -gt "$capacity" ]; then
    bulk=$(took env LD_PRELOAD="$nofile_shim" NOFILE_HARD=$(( 64 + 15 * $2 )) \
      "$cotal" --root "$1" apply --auto-approve)
  else
    bulk=$(took "$cotal" --root "$1" apply --auto-approve)
  fi
  local planned
  planned=$("$cotal" --root "$1" plan)
  if ! grep -q '^No changes' <<<"$planned"; then
    echo "the root of $2 spaces at $1 was not applied: its plan is not empty" >&2
    return 1
  fi
  plan=$(median 3 "$cotal" --root "$1" plan)
  floor=$(median 3 "$read_records" "$1")
  mem=$( { /usr/bin/time -f '%M' "$cotal" --root "$1" plan >/dev/null; } 2>&1 | tail -1)
  echo "$bulk $plan $floor $mem"
}
spaces() { for i in $(seq "$1" "$2"); do printf '[spaces.s%05d]\n' "$i"; done; }
# Every path under $1 with its modification and status-change times.
stamps() { find "$1" -printf '%p %T@ %C@\n' | sort; }
# The broker's own reload time (ms) from an apply's output: the time between cotal's reload
# request and the server's reply, which it sends once the reload is done.
reload_ms() { sed -n 's/.*Reload confirmed by.* in \([0-9.]*\) ms.*/\1/p' | head -1; }
# Time an apply adding one space named $2 to the running root $1: "apply_s reload_s".
add_one() {
  printf '[spaces.%s]\n' "$2" >>"$1/cotal.toml"
  local t0 text
  t0=$(now)
  text=$("$cotal" --root "$1" apply --auto-approve)
  echo "$(echo "$(now) - $t0" | bc) $(echo "$(printf '%s\n' "$text" | reload_ms) / 1000" | bc -l)"
}
# Run "$@" while a tenant of the space $2 of the running root $1 publishes to its chat stream
# (`examples/sibling_publish`): print "$@"'s output, then the publisher's baseline just before
# and its figures during, each "count max_ms p99_ms failed".
with_sibling() {
  local root=$1 space=$2 port result base during pid rfd wfd
  shift 2
  port=$(sed -n 's/^port = //p' "$root/cotal.toml")
  coproc SIBLING { "$sibling_publish" "$root" "nats://127.0.0.1:$port" "$space"; }
  pid=$SIBLING_PID
  # Its output is read through a copy: bash closes a coproc's descriptors once it has exited,
  # which it may do before its last line is read.
  exec {rfd}<&"${SIBLING[0]}"
  read -r _ base <&"$rfd"
  result=$("$@")
  # Its standard input closed ends the phase measured during "$@".
  wfd=${SIBLING[1]}
  exec {wfd}>&-
  read -r _ during <&"$rfd"
  exec {rfd}<&-
  wait "$pid"
  echo "$result $base $during"
}
# Time an apply removing space $2 from the running root $1 (its table deleted): "apply_s
# fence_reload_s final_reload_s".
rm_one() {
  sed -i "/^\[spaces\.$2\]\$/d" "$1/cotal.toml"
  local t0 text
  t0=$(now)
  text=$("$cotal" --root "$1" apply --auto-approve --allow-destroy)
  echo "$(echo "$(now) - $t0" | bc) $(printf '%s\n' "$text" | sed -n 's/.*Reload confirmed by.* in \([0-9.]*\) ms.*/\1/p' | awk '{printf "%s ", $1 / 1000}')"
}
# Start the root's nats-server directly (no provisioning), wait for its port, print its pid.
bare_server() {
  local port
  port=$(sed -n 's/^port = //p' "$1/cotal.toml")
  "$COTAL_NATS_SERVER" -c "$1/.cotal/auth/server.conf" >"$work/bare.log" 2>&1 &
  local pid=$!
  until (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
  echo "$pid"
}

echo "nats-server $("$COTAL_NATS_SERVER" --version | sed 's/.*v//'), $(nproc) cores, roots in $(dirname "$work")" >&2

# --- N spaces: bulk add, no-op apply, plan, boot, hot add ------------------------------------
a="$work/a"
new_root "$a" "$N"
bulk=$(took "$cotal" --root "$a" apply --auto-approve)
before=$(stamps "$a")
noop=$(median 5 "$cotal" --root "$a" apply --auto-approve)
written=$(diff <(echo "$before") <(stamps "$a") | grep -c '^>' || true)
plan_n=$(median 5 "$cotal" --root "$a" plan)
floor_n=$(median 5 "$read_records" "$a")
# Boot: the tight client on a bare server, then `cotal up` on the same empty store.
port=$(sed -n 's/^port = //p' "$a/cotal.toml")
# The peer of `up` as a whole: the bare server's start (until its port answers), the wait for
# every account's JetStream, and the tight client's provisioning.
t0=$(now)
pid=$(bare_server "$a")
server_start=$(echo "$(now) - $t0" | bc)
read -r client readiness < <("$provision_floor" "$a" "nats://127.0.0.1:$port")
kill "$pid"
# Not this shell's child (it was started in a command substitution): wait until it is gone.
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
# Moved aside, not deleted (the work folder goes at the end): ext4 makes every file created
# within minutes of a mass deletion scan for the recently deleted inodes (`recently_deleted`),
# which doubled `up`'s time in this row when the floor's 15,000 streams were deleted just before.
mv "$a/.cotal/nats" "$work/floor-store"
up=$(took "$cotal" --root "$a" up)
# The first apply after `up`: `up` read every registry and cached them (its state refresh).
read -r hot_first reload_first < <(add_one "$a" added)
plan_running=$(median 3 "$cotal" --root "$a" plan)
# The steady state: three adds, each next to its own reload, the medians compared (one add
# varies by a third between runs on a 2-core VM). A sibling publishes during the first.
read -r hot1 reload1 _ sib_base_max _ _ _ sib_max sib_p99 sib_failed \
  < <(with_sibling "$a" s00001 add_one "$a" added2)
read -r hot2 reload2 < <(add_one "$a" added3)
read -r hot3 reload3 < <(add_one "$a" added4)
median_of() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
hot=$(median_of "$hot1" "$hot2" "$hot3")
reload=$(median_of "$reload1" "$reload2" "$reload3")
# The broker's own answers to the two JSZ requests such an add makes (every account's streams
# without configs, for the plan; one account's with them, for the state after the apply),
# asked of the same broker right after the adds.
read -r jsz_every jsz_one < <("$jsz_floor" "$a" "nats://127.0.0.1:$port" s00001)
read -r rm_apply rm_fence rm_final < <(rm_one "$a" added2)
"$cotal" --root "$a" down >/dev/null

# --- the largest broker this host allows, and BIG spaces: bulk add and plan, with peak memory --
# (Each assigned first: a root that was not applied fails the assignment, which ends the run.)
figures=$(stopped_root "$work/cap" "$largest")
read -r bulk_cap plan_cap floor_cap mem_cap <<<"$figures"
mv "$work/cap" "$work/cap-done"
if [ "$BIG" -eq "$largest" ]; then
  read -r bulk_big plan_big floor_big mem_big <<<"$figures"
else
  figures=$(stopped_root "$work/b" "$BIG")
  read -r bulk_big plan_big floor_big mem_big <<<"$figures"
  # Moved aside too (the sweep's restarts are timed): the work folder goes at the end.
  mv "$work/b" "$work/b-done"
fi

# --- the same add on a 3-node cluster ---------------------------------------------------------
capply=0; creload=0; sapply=0
if [ "$CLUSTER" -gt 0 ]; then
  c="$work/c"; mkdir -p "$c"
  "$cotal" --root "$c" init >/dev/null
  { printf "version = 1\n$limits[cluster]\nreplicas = 3\n"
    for i in 1 2 3; do printf '[[cluster.nodes]]\nname = "n%s"\nport = %s\ncluster_port = %s\n' "$i" "$(free_port)" "$(free_port)"; done
    spaces 1 "$CLUSTER"; } >"$c/cotal.toml"
  "$cotal" --root "$c" apply --auto-approve >/dev/null
  "$cotal" --root "$c" up >/dev/null
  read -r capply creload < <(add_one "$c" added)
  "$cotal" --root "$c" down >/dev/null
  s="$work/s"; new_root "$s" "$CLUSTER"
  "$cotal" --root "$s" apply --auto-approve >/dev/null
  "$cotal" --root "$s" up >/dev/null
  read -r sapply _ < <(add_one "$s" added)
  "$cotal" --root "$s" down >/dev/null
  rm -rf "$c" "$s"
fi

# --- the sweep: apply, reload and restart against the number of spaces -------------------------
w="$work/w"
first=${SWEEP%% *}
new_root "$w" "$first"
"$cotal" --root "$w" apply --auto-approve >/dev/null
"$cotal" --root "$w" up >/dev/null
have=$first
printf 'spaces\tapply_s\treload_s\trestart_s\tsibling_before_max_ms\tsibling_max_ms\tsibling_p99_ms\tsibling_failed\n' \
  >"$out/sweep.tsv"
for n in $SWEEP; do
  if [ "$n" -gt "$have" ]; then
    spaces $((have + 1)) "$n" >>"$w/cotal.toml"
    "$cotal" --root "$w" apply --auto-approve >/dev/null
    have=$n
  fi
  # The apply after a growth (or a restart) reads the registries it has not read; the next one
  # is the steady state measured.
  add_one "$w" "warm$n" >/dev/null
  read -r sw_apply sw_reload _ sw_base_max _ _ _ sw_max sw_p99 sw_failed \
    < <(with_sibling "$w" s00001 add_one "$w" "extra$n")
  t0=$(now); "$cotal" --root "$w" down >/dev/null; "$cotal" --root "$w" up >/dev/null; t1=$(now)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$sw_apply" "$sw_reload" "$(echo "$t1 - $t0" | bc)" \
    "$sw_base_max" "$sw_max" "$sw_p99" "$sw_failed" >>"$out/sweep.tsv"
done
"$cotal" --root "$w" down >/dev/null

version=$("$COTAL_NATS_SERVER" --version | sed 's/.*v//')
python3 - "$out" "$N" "$BIG" "$CLUSTER" "$version" "$(nproc)" \
  "$bulk" "$noop" "$written" "$plan_n" "$floor_n" "$client" "$up" "$plan_running" "$hot" "$reload" \
  "$hot_first" "$reload_first" "$rm_apply" "$rm_fence" "$rm_final" \
  "$bulk_big" "$plan_big" "$floor_big" "$mem_big" "$capply" "$creload" "$sapply" \
  "$sib_base_max" "$sib_max" "$sib_p99" "$sib_failed" "$server_start" "$readiness" \
  "$jsz_every" "$jsz_one" "$largest" "$bulk_cap" "$plan_cap" "$floor_cap" "$mem_cap" "$big_note" <<'PY'
import sys, datetime
a = sys.argv[1:]
out, n, big, cluster, version, cores = a[0], int(a[1]), int(a[2]), int(a[3]), a[4], a[5]
(bulk, noop, written, plan_n, floor_n, client, up, plan_running, hot, reload,
 hot_first, reload_first, rm_apply, rm_fence, rm_final,
 bulk_big, plan_big, floor_big, mem_big, capply, creload, sapply,
 sib_base_max, sib_max, sib_p99, sib_failed, server_start, readiness, jsz_every, jsz_one,
 largest, bulk_cap, plan_cap, floor_cap, mem_cap, past) = a[6:]
# The stopped root of the sweep's largest broker has rows of its own unless BIG is that root.
own = int(largest) != big
f = float
ms = lambda s: f"{f(s) * 1000:.0f} ms" if f(s) < 10 else f"{f(s):.1f} s"
ratio = lambda x, y: f"{f(x) / f(y):.2f}x" if f(y) > 0 else "n/a"
rows = [
    ("`apply` adding 1 space to a running broker of %d (median of 3)" % n, ms(hot), "broker's own reload (median of the same 3): " + ms(reload), ratio(hot, reload), "at most 1.5x"),
    ("the same steady add, against the reload and the broker's answers to its two JSZ requests", ms(hot),
     "reload %s + JSZ of every account's streams %s + one account's JSZ %s" % (ms(reload), ms(jsz_every), ms(jsz_one)),
     ratio(hot, f(reload) + f(jsz_every) + f(jsz_one)), ""),
    ("the same, first apply after `up` (registries cached by `up`)", ms(hot_first), "broker's own reload: " + ms(reload_first), ratio(hot_first, reload_first), "at most 2x"),
    ("`apply` removing 1 space from it (the fence's reload, its streams deleted, the final reload)", ms(rm_apply), "broker's own two reloads: %s + %s" % (ms(rm_fence), ms(rm_final)), ratio(rm_apply, f(rm_fence) + f(rm_final)), ""),
    ("`plan`, broker stopped, %d spaces" % n, ms(plan_n), "reading + parsing the records: " + ms(floor_n), ratio(plan_n, floor_n), "at most 4x"),
] + ([
    ("`plan`, broker stopped, %s spaces (the sweep's largest broker)" % largest, "%s, %d MB peak" % (ms(plan_cap), int(mem_cap) // 1024), "reading + parsing the records: " + ms(floor_cap), ratio(plan_cap, floor_cap), ""),
] if own else []) + [
    ("`plan`, broker stopped, %d spaces%s" % (big, " (%s)" % past if past else ""), "%s, %d MB peak" % (ms(plan_big), int(mem_big) // 1024), "reading + parsing the records: " + ms(floor_big), ratio(plan_big, floor_big), "at 10,000: < 0.4 s, < 200 MB"),
    ("no-op `apply`, broker stopped, %d spaces" % n, "%s, %s paths written" % (ms(noop), written), "", "", "< 60 ms, nothing written"),
    ("first `apply` of %d spaces (broker stopped)" % n, ms(bulk), "", "", "< 2 s"),
] + ([
    ("first `apply` of %s spaces (broker stopped)" % largest, ms(bulk_cap), "", "", ""),
] if own else []) + [
    ("first `apply` of %d spaces (broker stopped%s)" % (big, "; " + past if past else ""), ms(bulk_big), "", "", ""),
    ("`up` provisioning %d new spaces (15 streams and buckets each)" % n, ms(up), "tight concurrent client: " + ms(client), ratio(up, client), "at most 1.5x"),
    ("the same `up`, against its peer as a whole", ms(up), "bare server's start %s + every account's JetStream %s + tight client %s" % (ms(server_start), ms(readiness), ms(client)),
     ratio(up, f(server_start) + f(readiness) + f(client)), ""),
    ("`plan`, broker running, %d spaces (registries cached)" % n, ms(plan_running), "", "", ""),
]
sweep = [l.split("\t") for l in open(f"{out}/sweep.tsv").read().splitlines()[1:]]
def sibling(max_ms, p99_ms, failed):
    return "max %.1f ms, p99 %.1f ms, %s failed" % (f(max_ms), f(p99_ms), failed)
rows.append(("a sibling's JetStream publish during the first of those adds (%d spaces)" % n, sibling(sib_max, sib_p99, sib_failed),
             "the same publisher just before: max %.1f ms" % f(sib_base_max), ratio(sib_max, sib_base_max), "reported"))
last = sweep[-1]
rows.append(("the same at the largest broker of the sweep (%s spaces)" % last[0], sibling(last[5], last[6], last[7]),
             "the same publisher just before: max %.1f ms" % f(last[4]), ratio(last[5], last[4]), "max < 100 ms"))
if cluster:
    rows.append(("`apply` adding 1 space, 3-node cluster of %d (replicas 3)" % cluster, ms(capply), "single server, same add: %s; slowest node's reload: %s" % (ms(sapply), ms(creload)), ratio(capply, sapply), ""))
lines = ["| what | measured | floor or peer, same run | ratio | goal |", "|---|---|---|---|---|"]
lines += ["| %s |" % " | ".join(r) for r in rows]
head = f"Measured {datetime.date.today()} with nats-server {version} on {cores} cores (release build)."
text = head + "\n\n" + "\n".join(lines) + "\n"
print(text)
open(f"{out}/results.md", "w").write(text)

spaces = [int(r[0]) for r in sweep]
apply_s, reload_s, restart_s, before_ms, sib_ms, p99_ms = ([f(r[i]) for r in sweep] for i in (1, 2, 3, 4, 5, 6))
print("spaces  apply    reload   restart  sibling max (before)  p99")
for s, x, y, z, b, m, p in zip(spaces, apply_s, reload_s, restart_s, before_ms, sib_ms, p99_ms):
    print(f"{s:6d}  {x*1000:6.0f}ms {y*1000:6.0f}ms {z:6.2f}s  {m:6.1f}ms ({b:5.1f}ms) {p:6.1f}ms")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(matplotlib is not installed: no picture; pip install matplotlib)")
    sys.exit(0)
fig, (ax, sx) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110, width_ratios=(3, 2))
ax.plot(spaces, restart_s, "s-", label="restart (down + up)", color="#b33")
ax.plot(spaces, apply_s, "o-", label="cotal apply adding one space", color="#1565c0")
ax.plot(spaces, reload_s, "^--", label="nats-server's own reload", color="#555")
ax.set_xscale("log"); ax.set_yscale("log")
ax.set_xlabel("spaces on the broker"); ax.set_ylabel("seconds")
ax.set_title(f"Hot apply vs reload vs restart (nats-server {version}, {datetime.date.today()})", fontsize=10)
ax.grid(True, which="both", alpha=0.3); ax.legend()
sx.plot(spaces, sib_ms, "o-", label="max during the apply", color="#1565c0")
sx.plot(spaces, p99_ms, "^--", label="p99 during the apply", color="#555")
sx.plot(spaces, before_ms, "s:", label="max just before it", color="#2e7d32")
sx.axhline(100, color="#b33", linewidth=0.8, label="goal: max < 100 ms")
sx.set_xscale("log")
sx.set_xlabel("spaces on the broker"); sx.set_ylabel("milliseconds")
sx.set_title("A sibling space's JetStream publish (ack latency)", fontsize=10)
sx.grid(True, which="both", alpha=0.3); sx.legend(fontsize=8)
fig.tight_layout()
fig.savefig(f"{out}/apply-vs-spaces.png")
print(f"wrote {out}/apply-vs-spaces.png, {out}/sweep.tsv and {out}/results.md")
PY
