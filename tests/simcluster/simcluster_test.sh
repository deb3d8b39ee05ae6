#!/usr/bin/env bash
# Multi-host tests on the simulated cluster (scripts/simcluster.sh): 2 hosts x 2 ranks as
# network namespaces, MPI between hosts over TCP on a private subnet.
#   simcluster_test.sh BUILD_DIR SOURCE_DIR CASE
# Cases:
#   allreduce_exact  the MPI test binary of the collectives (every algorithm, compression,
#                    shared memory; exact sums, replicas bitwise identical) across hosts
#   bytes            bytes leaving each host per AllReduce of S bytes, from the hosts'
#                    /sys/class/net/eth0/statistics/tx_bytes, against each algorithm's
#                    theory (2 hosts: hierarchical S, ring 1.5 S, flat/mpi at least S);
#                    asserts bytes, never time
#   train            sdp-train on quickstart.yaml (synthetic data) with each algorithm, the
#                    replica check after every step
#   delay            simcluster.sh delay (the relay that stands in for netem): `plan
#                    --calibrate` measures the added latency between hosts (2 links of 1 ms:
#                    2 ms or more one way), a job trains across it, and `delay off` restores
#                    the link
#   wire             simcluster.sh delay 0 --rate 1gbit (the relay as the link, no token
#                    bucket): `plan --calibrate` measures the link at 85-100 % of 1 Gbit/s,
#                    a 64 KiB MPI message takes at least 90 % of its bytes' time on the wire
#                    (tc HTB's saved-up burst lets it through at the veth's speed), the socket
#                    ring's steps are measured, and `delay off` leaves the link unshaped
#   cpus             simcluster.sh cpus: every process a host launches is in its CPU share
#                    (cgroup cpu quota), the quota throttles a busy host, sdp-train reads it as
#                    the CPUs it may use (its thread warning names the quota), `cpus off`
#                    removes it
#   sharded_memory   simcluster.sh memory: hosts of 300 MB; a CTR table too large for one
#                    is refused replicated and trains sharded over the 2 hosts, each rank's
#                    peak resident set within 20 % of its share of the table plus a step
# Exits 77 (skipped) without root or network namespaces. Uses its own cluster (prefix sdpt,
# subnet 10.214.0) and removes it at exit; CTest runs the cases one at a time (RESOURCE_LOCK).
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CASE=$3
export SIMCLUSTER_PREFIX=sdpt SIMCLUSTER_NET=10.214.0
SIM="$SRC/scripts/simcluster.sh"
WORK=$(mktemp -d)
trap '"$SIM" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SM_CHANNEL_TRAINING SM_HOSTS SM_CURRENT_HOST SM_CHECKPOINT_DIR SM_MODEL_DIR
HOSTS=2
SLOTS=2
NP=$((HOSTS * SLOTS))

fail() { echo "FAIL [$CASE]: $*"; echo "--- output ---"; cat "$WORK/out" 2>/dev/null; exit 1; }

"$SIM" up $HOSTS --slots $SLOTS >"$WORK/up" 2>&1
status=$?
if [ $status -eq 77 ]; then cat "$WORK/up"; exit 77; fi
[ $status -eq 0 ] || { cat "$WORK/up"; fail "simcluster up failed"; }
read -r -a MPIARGS <<<"$("$SIM" mpirun-args)"

# mpirun_hosts ARGS...: NP ranks spread over the hosts, output in $WORK/out.
mpirun_hosts() {
  mkdir -p "$WORK/run"
  (cd "$WORK/run" && timeout 120 mpirun -np $NP "${MPIARGS[@]}" "$@") >"$WORK/out" 2>&1
  STATUS=$?
  [ $STATUS -eq 124 ] && fail "hung: no exit within 120 s"
  return 0
}

tx_bytes() { "$SIM" counters | awk '{print $2}'; }

case "$CASE" in
  allreduce_exact)
    mpirun_hosts "$BUILD/tests/mpi/test_mpi_collectives" --gtest_brief=1
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    grep -q "PASSED" "$WORK/out" || fail "no PASSED line" ;;
  bytes)
    S=$((4 << 20))
    CALLS=6  # bench: --warmup 1 + --iters 4 + the checked run
    for alg in hierarchical ring flat mpi; do
      mapfile -t before < <(tx_bytes)
      mpirun_hosts "$BUILD/sdp-train" bench allreduce --min-bytes $S --max-bytes $S --warmup 1 --iters 4 --algorithms $alg
      [ $STATUS -eq 0 ] || fail "$alg: exit status $STATUS"
      mapfile -t after < <(tx_bytes)
      grep -q "($HOSTS nodes x $SLOTS)" "$WORK/out" || fail "$alg: not $HOSTS nodes x $SLOTS ranks"
      err=$(awk -v a=$alg '$3 == a {print $7}' "$WORK/out")
      [ "$err" = 0 ] || fail "$alg: max_err '$err', expected 0"
      for h in $(seq 0 $((HOSTS - 1))); do
        sent=$((after[h] - before[h]))
        # theory, per AllReduce of S bytes on H hosts of L ranks (n = H L):
        #   hierarchical: every rank sends 2(H-1)/H of its S/L part -> 2(H-1)/H S per host;
        #   ring: one ring edge leaves each host, carrying 2(n-1)/n S;
        #   flat, mpi: Open MPI's choice; no algorithm sends less than 2(H-1)/H S.
        python3 - "$alg" "$sent" "$S" "$CALLS" "$HOSTS" "$NP" <<'PY' || fail "$alg host $((h + 1)): bytes out of range (see above)"
import sys
alg, sent, S, calls, H, n = sys.argv[1], *map(int, sys.argv[2:])
optimal = 2 * (H - 1) / H * S * calls
theory = {"hierarchical": optimal, "ring": 2 * (n - 1) / n * S * calls}.get(alg)
# Overhead: TCP/IP headers and ACKs, MPI wire-up and the benchmark's own small messages.
slack = 0.02 * optimal + (256 << 10)
print(f"{alg}: {sent} B out of the host = {sent / (S * calls):.4f} S per AllReduce"
      + (f" (theory {theory / (S * calls):.4f} S)" if theory else f" (lower bound {optimal / (S * calls):.4f} S)"))
lo, hi = (theory, theory + slack) if theory else (optimal, float("inf"))
sys.exit(0 if lo <= sent <= hi else 1)
PY
      done
    done ;;
  train)
    for alg in hierarchical ring flat; do
      mpirun_hosts "$BUILD/sdp-train" --config "$SRC/configs/quickstart.yaml" --set train.max_steps=20 \
        --set distributed.allreduce=$alg --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25 \
        --set output.metrics= --set output.model_dir="$WORK/model" --set checkpoint.dir="$WORK/ck-$alg"
      [ $STATUS -eq 0 ] || fail "$alg: exit status $STATUS"
      grep -q "allreduce    : $alg" "$WORK/out" || fail "algorithm $alg not used"
      grep -qE "$HOSTS nodes?" "$WORK/out" || fail "$alg: not spread over $HOSTS hosts"
      # Its own checkpoint.dir: with a shared one, the runs after the first resumed the first's
      # finished checkpoint and trained nothing.
      grep -q "^\[done\] steps=20 " "$WORK/out" || fail "$alg: no [done] line of 20 steps"
      grep -q "^\[step 20\]" "$WORK/out" || fail "$alg: did not train"
    done ;;
  delay)
    one_way_us() {  # LATENCY: the calibrated one-way latency between the hosts, in microseconds
      mpirun_hosts "$BUILD/sdp-train" plan --config "$SRC/configs/quickstart.yaml" --calibrate "$WORK/cal.json"
      [ $STATUS -eq 0 ] || fail "calibration: exit status $STATUS"
      LATENCY=$(grep -oE 'latency [0-9.]+ us one way' "$WORK/out" | grep -oE '[0-9.]+')
      [ -n "$LATENCY" ] || fail "no latency in the calibration"
    }
    one_way_us
    base=$LATENCY
    "$SIM" delay 1 >"$WORK/out" 2>&1 || fail "simcluster.sh delay 1 failed"
    one_way_us
    delayed=$LATENCY
    echo "one-way latency: $base us plain, $delayed us with 1 ms on each host's link"
    python3 -c "import sys; sys.exit(0 if 2000 <= $delayed - $base <= 6000 else 1)" ||
      fail "1 ms on each of the two links added $(python3 -c "print($delayed - $base)") us, not 2000-6000"
    mpirun_hosts "$BUILD/sdp-train" --config "$SRC/configs/quickstart.yaml" --set train.max_steps=10 \
      --set distributed.allreduce=hierarchical --set output.metrics= --set output.model_dir="$WORK/model" \
      --set checkpoint.dir="$WORK/ck-delay"
    [ $STATUS -eq 0 ] && grep -q "^\[done\] steps=10 " "$WORK/out" || fail "training across delayed links failed"
    "$SIM" delay off >"$WORK/out" 2>&1 || fail "simcluster.sh delay off failed"
    one_way_us
    restored=$LATENCY
    python3 -c "import sys; sys.exit(0 if $restored < $base + 500 else 1)" ||
      fail "after delay off the latency is $restored us (plain: $base us)" ;;
  wire)
    "$SIM" delay 0 --rate 1gbit >"$WORK/out" 2>&1 || fail "simcluster.sh delay 0 --rate 1gbit failed"
    "$SIM" status | grep -q "link rate 1gbit (a wire: no burst)" || fail "status does not show the wire"
    mpirun_hosts "$BUILD/sdp-train" plan --config "$SRC/configs/quickstart.yaml" --calibrate "$WORK/cal.json"
    [ $STATUS -eq 0 ] || fail "calibration: exit status $STATUS"
    python3 - "$WORK/cal.json" <<'PY' || fail "the calibration does not show a 1 Gbit/s wire"
import json, sys
link = json.load(open(sys.argv[1]))["link"]
rate = 1e9 / 8
message = dict((int(b), s) for b, s in link["mpi_message"])[65536]
# The ring's and MPI_Allreduce's steps, every rank at once: the ring's step of 512 KiB cannot
# beat its bytes' time on the wire (MPI_Allreduce may cross nodes with fewer bytes than 2(n-1)
# steps of S/n: its curve need only be there).
steps = {k: dict((int(b), s) for b, s in link[k]).get(512 << 10, 0) for k in ("ring_step", "flat_step")}
print(f"wire: {link['bytes_per_s'] * 8 / 1e6:.1f} Mbit/s, 64 KiB one way in {message * 1e3:.2f} ms "
      f"(its bytes on the wire: {65536 / rate * 1e3:.2f} ms), {len(link['socket_step'])} socket ring steps, "
      f"steps of 512 KiB: ring {steps['ring_step'] * 1e3:.2f} ms, MPI_Allreduce {steps['flat_step'] * 1e3:.2f} ms "
      f"(their bytes: {(512 << 10) / rate * 1e3:.2f} ms)")
sys.exit(0 if 0.85 * rate <= link["bytes_per_s"] <= rate and message >= 0.9 * 65536 / rate
         and len(link["socket_step"]) >= 4 and steps["ring_step"] >= 0.9 * (512 << 10) / rate and steps["flat_step"] > 0 else 1)
PY
    "$SIM" delay off >"$WORK/out" 2>&1 || fail "simcluster.sh delay off failed"
    "$SIM" status | grep -q "link rate unshaped" || fail "after delay off the link is not unshaped" ;;
  cpus)
    "$SIM" cpus 0.3 >"$WORK/out" 2>&1 || fail "simcluster.sh cpus 0.3 failed"
    cg=/sys/fs/cgroup/cpu/sdpt-h1
    [ "$(cat $cg/cpu.cfs_quota_us)" -eq $((3 * $(cat $cg/cpu.cfs_period_us) / 10)) ] || fail "host 1's quota is not 0.3 CPUs"
    mpirun_hosts sh -c 'echo "$(hostname) $(grep -E "^[0-9]+:cpu(,cpuacct)?:" /proc/self/cgroup)"'
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    for h in 1 2; do
      [ "$(grep -c "^sdpt-h$h [0-9]*:cpu[a-z,]*:/sdpt-h$h\$" "$WORK/out")" -eq $SLOTS ] || fail "host $h's ranks are not in its share"
    done
    throttled_before=$(awk '/^nr_throttled/ {print $2}' $cg/cpu.stat)
    agent=$(. "$("$SIM" env-file)" && echo "$SIMCLUSTER_AGENT")
    "$agent" sdpt-h1 timeout 1 sh -c 'while :; do :; done' >/dev/null 2>&1
    throttled=$(awk '/^nr_throttled/ {print $2}' $cg/cpu.stat)
    [ "$throttled" -gt "$throttled_before" ] || fail "a busy second on host 1 was never throttled"
    # One rank alone on host 1 would take both cores of this machine; its quota grants it 1.
    (cd "$WORK" && timeout 60 "$agent" sdpt-h1 "$BUILD/sdp-train" validate --config "$SRC/configs/quickstart.yaml" \
      --set device=cpu) >"$WORK/out" 2>&1 || fail "validate on host 1 failed"
    if [ "$(nproc)" -gt 1 ]; then
      grep -q "cgroup grants 1 CPU(s) (its CPU quota" "$WORK/out" || fail "sdp-train does not name the host's quota"
    fi
    "$SIM" cpus off >"$WORK/out" 2>&1 || fail "simcluster.sh cpus off failed"
    [ ! -d $cg ] || fail "cpus off left $cg" ;;
  sharded_memory)
    # 1 rank a host, each host 300 MB: a 3M-row DeepFM table with Adam (324 MB) is refused
    # replicated (exit 2 naming model.table_rows) and trains sharded, each rank's peak within
    # 20 % of its share of the table plus the same job's peak with a 1,000-row table.
    "$SIM" memory 300M >"$WORK/out" 2>&1
    status=$?
    if [ $status -eq 77 ]; then cat "$WORK/out"; exit 77; fi
    [ $status -eq 0 ] || fail "simcluster.sh memory 300M failed"
    [ "$(cat /sys/fs/cgroup/memory/sdpt-h1/memory.limit_in_bytes)" -eq $((300 * 1024 * 1024)) ] || fail "no limit on host 1"
    NP=$HOSTS
    job=(--config "$SRC/configs/deepfm-criteo.yaml" --set data.format=synthetic --set model.table_rows=3000000
         --set model.embedding_size=8 --set model.hidden=[32] --set model.dropout=0 --set data.batch_size=128
         --set data.synthetic.train_samples=12800 --set data.synthetic.test_samples=2048 --set train.epochs=1
         --set threads=1 --set output.metrics= --set checkpoint.dir="$WORK/ck" --set checkpoint.every_steps=50
         --set output.model_dir="$WORK/m" --set distributed.ranks_per_node=1)
    mpirun_hosts --map-by node --bind-to none "$BUILD/sdp-train" "${job[@]}"
    [ $STATUS -eq 2 ] || fail "the replicated table: exit $STATUS, expected 2"
    grep -q "error: key 'model.table_rows'.*0.324 GB a rank (replicated" "$WORK/out" || fail "the error does not name the key"
    peak() { grep -oE "train_peak_rss_mb=[0-9.]+" "$WORK/out" | cut -d= -f2; }
    mpirun_hosts --map-by node --bind-to none "$BUILD/sdp-train" "${job[@]}" --set model.embedding_sharding=rows --set model.table_rows=1000 \
      --set checkpoint.dir="$WORK/ck-small"
    [ $STATUS -eq 0 ] || fail "the small table: exit $STATUS"
    base=$(peak)
    mpirun_hosts --map-by node --bind-to none "$BUILD/sdp-train" "${job[@]}" --set model.embedding_sharding=rows
    [ $STATUS -eq 0 ] || fail "the sharded table: exit $STATUS"
    grep -q "the model is in 2 parts" "$WORK/out" || fail "rank 0 gathered a table it has no room for"
    python3 -c "import sys; p, b = float('$(peak)'), float('$base'); e = 324e6 / 2 / 2**20 + b
print(f'peak {p:.0f} MB a rank, expected table/world + step = {e:.0f} MB ({p / e:.2f}x)'); sys.exit(0 if p <= 1.2 * e else 1)" ||
      fail "a rank's peak is more than 20 % over its share of the table"
    "$SIM" memory off >"$WORK/out" 2>&1 || fail "simcluster.sh memory off failed"
    [ ! -d /sys/fs/cgroup/memory/sdpt-h1 ] || fail "memory off left the cgroup" ;;
  *) echo "unknown case $CASE"; exit 2 ;;
esac
echo "PASS [$CASE]"
