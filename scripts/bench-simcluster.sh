#!/usr/bin/env bash
# AllReduce across simulated hosts (scripts/simcluster.sh) with rate-limited links: every
# algorithm and Open MPI's MPI_Allreduce ("mpi"), the bytes that leave a host per
# AllReduce (read from the hosts' tx_bytes) and the share of the link they reach.
#
#   scripts/bench-simcluster.sh [--rate 1gbit] [--topologies 2x2,4x2] [--sizes 16,64]
#                               [--algorithms mpi,flat,ring,hierarchical,auto] [--runs 3]
#                               [--iters 5]
#     --topologies  HOSTSxRANKS per host, comma-separated
#     --sizes       MiB per AllReduce
#     --runs        separate mpirun launches per row; the table shows the median time
#
# Definitions (S = bytes per AllReduce, R = link rate in bytes/s, each way):
#   bytes/host  = bytes a host sent per AllReduce (tx_bytes of its link over the run, divided
#                 by the number of AllReduce calls: warm-up + timed + the checked one;
#                 includes TCP/IP headers and ACKs);
#   time        = the benchmark's mean time per AllReduce, median over the runs;
#   share       = bytes/host / (time x R): how busy the busiest direction of a host's link
#                 was. 100 % means the link, not the algorithm, is the limit;
#   bound       = time the link needs for the algorithm's bytes: bytes/host / R. The best any
#                 algorithm can do is 2(H-1)/H S per host (hierarchical and the ring of hosts
#                 reach it; a ring over all ranks sends 2(n-1)/n S).
# Times with more ranks than cores (4x2 on a 2-core machine) are indicative only; the bytes
# are exact. Needs root; brings its own cluster (prefix sdpb) up and down.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=1gbit
topologies=2x2,4x2
sizes=16,64
algorithms=mpi,flat,ring,hierarchical,auto
runs=3
iters=5
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --topologies) topologies=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --algorithms) algorithms=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-simcluster: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=${BUILD_DIR:-build}/sdp-train
[ -x "$BIN" ] || { echo "bench-simcluster: no $BIN; build first" >&2; exit 1; }

export SIMCLUSTER_PREFIX=sdpb SIMCLUSTER_NET=10.215.0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SIM=scripts/simcluster.sh
tmp=$(mktemp -d)
trap '"$SIM" down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
warmup=1
# Bytes all hosts have sent: summed in bash (64-bit; mawk's printf %d stops at 2^31).
sent_total() {
  local total=0 v
  for v in $("$SIM" counters | awk '{print $2}'); do total=$((total + v)); done
  echo $total
}

echo "# bench-simcluster: links $rate each way; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $BIN bench allreduce --warmup $warmup --iters $iters, one algorithm and size per launch, $runs launch(es) per row"
for topo in ${topologies//,/ }; do
  hosts=${topo%x*}
  slots=${topo#*x}
  "$SIM" up "$hosts" --slots "$slots" >/dev/null
  "$SIM" shape "$rate" >/dev/null
  read -r -a mpiargs <<<"$("$SIM" mpirun-args)"
  for mib in ${sizes//,/ }; do
    bytes=$((mib << 20))
    for alg in ${algorithms//,/ }; do
      for ((run = 1; run <= runs; run++)); do
        before=$(sent_total)
        mpirun -np $((hosts * slots)) "${mpiargs[@]}" "$BIN" bench allreduce --min-bytes $bytes --max-bytes $bytes \
          --warmup $warmup --iters $iters --algorithms "$alg" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
        after=$(sent_total)
        row=$(awk -v a="$alg" '$3 ~ "^"a {print $3, $4, $7}' "$tmp/out")
        echo "$topo $mib $alg $row $(( (after - before) / hosts ))" >>"$tmp/rows"
      done
    done
  done
  "$SIM" down >/dev/null
done

python3 - "$tmp/rows" "$rate" "$warmup" "$iters" <<'PY'
import re, statistics, sys
from collections import OrderedDict
rows_file, rate, warmup, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = re.fullmatch(r"([0-9.]+)([kmg]?)(bit|bps)", rate.lower())
unit = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
link = float(m.group(1)) * unit / (8 if m.group(3) == "bit" else 1)  # bytes/s
rows = OrderedDict()
for line in open(rows_file):
    topo, mib, alg, ran, time_us, err, sent = line.split()
    rows.setdefault((topo, int(mib), alg, ran), []).append((float(time_us), float(err), int(sent)))
print(f"# link {rate} = {link / 1e6:.1f} MB/s each way; share = bytes out of a host / (time x link rate)")
print("| hosts x ranks | algorithm | size | bytes out of a host | link bound | time (median) | share of link | max_err |")
print("|---|---|---|---|---|---|---|---|")
best = {}
for (topo, mib, alg, ran), runs in rows.items():
    S = mib << 20
    hosts = int(topo.split("x")[0])
    # iterations the benchmark ran: warm-up + timed (>= 5 above 8 MiB, scaled down) + checked
    timed = iters if S <= (8 << 20) else max(5, int(iters * (8 << 20) / S))
    calls = warmup + timed + 1
    time_s = statistics.median(r[0] for r in runs) / 1e6
    per_call = statistics.median(r[2] for r in runs) / calls
    share = per_call / (time_s * link)
    name = alg if ran == alg else f"{alg} ({ran.split('>')[-1]})"
    print(f"| {topo} | {name} | {mib} MiB | {per_call / 1e6:.1f} MB = {per_call / S:.2f} S | "
          f"{per_call / link:.3f} s | {time_s:.3f} s | {100 * share:.0f} % | {max(r[1] for r in runs):g} |")
PY
