#!/usr/bin/env bash
# The CTR table rows' exchange between hosts (distributed.embedding_exchange): DeepFM on the
# planted synthetic Criteo-shaped set (39 fields, Zipf ids, K = 16, MLP 256-128-64) on the
# simulated cluster (scripts/simcluster.sh, links shaped to RATE), each table size, topology and
# way in turn: samples/s, the step's milliseconds, what a rank received a step, and the bytes
# each host sent a step (its link's counters), with the bytes Horovod's allgather of the
# IndexedSlices (no deduplication: every (id, row) pair of every rank) would send, computed
# from the same batch. With --plan, `sdp-train plan` predicts each row's step first, under the
# same launch, from a calibration of the cluster's link (`plan --calibrate`) and its own
# measured step; the table adds the prediction and its ratio to the measured step. The way
# `sharded` is the table's rows sharded over the ranks (model.embedding_sharding: rows).
#
#   scripts/bench-ctr-exchange.sh [--rows 1000000,10000000] [--topologies 1x1,2x1,2x2]
#                                 [--ways sparse,dense,auto,sharded] [--batch 4096] [--steps 12]
#                                 [--rate 1gbit] [--compression none|fp16|bf16] [--plan] [--keep-cluster]
# Root (network namespaces). Hosts sharing this machine's cores compute slower than hosts of
# their own would: compare the ways within one topology.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${SDP_TRAIN:-$ROOT/build/sdp-train}
ROWS=1000000,10000000 TOPOLOGIES=1x1,2x1,2x2 WAYS=sparse,dense,auto BATCH=4096 STEPS=12 RATE=1gbit KEEP=0
COMPRESSION=none PLAN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS=$2; shift 2 ;;
    --topologies) TOPOLOGIES=$2; shift 2 ;;
    --ways) WAYS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --compression) COMPRESSION=$2; shift 2 ;;
    --plan) PLAN=1; shift ;;
    --keep-cluster) KEEP=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 2; }
SIM="$ROOT/scripts/simcluster.sh"
WORK=$(mktemp -d)
cleanup() { rm -rf "$WORK"; [ $KEEP = 1 ] || "$SIM" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1

echo "# CTR row exchange $(date '+%Y-%m-%d %H:%M')  CPU: $(lscpu | sed -n 's/^Model name: *//p')  $(nproc) cores"
echo "# command: $0 --rows $ROWS --topologies $TOPOLOGIES --ways $WAYS --batch $BATCH --steps $STEPS --rate $RATE --compression $COMPRESSION$([ $PLAN = 1 ] && echo ' --plan')"
echo
if [ $PLAN = 1 ]; then
  echo "| table rows | hosts x ranks | way | samples/s | step ms | plan's step ms | plan / measured | rank received MB/step | host sent MB/step | Horovod allgather MB/step | dense steps |"
  echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
else
  echo "| table rows | hosts x ranks | way | samples/s | step ms | rank received MB/step | host sent MB/step | Horovod allgather MB/step | dense steps |"
  echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
fi
for topology in ${TOPOLOGIES//,/ }; do
  hosts=${topology%x*} per_host=${topology#*x}
  "$SIM" down >/dev/null 2>&1 || true
  "$SIM" up "$hosts" --slots "$per_host" >/dev/null
  "$SIM" shape "$RATE" >/dev/null
  read -r -a launch <<<"$("$SIM" mpirun-args)"
  ranks=$((hosts * per_host))
  if [ $PLAN = 1 ] && [ "$hosts" -gt 1 ]; then
    mpirun -np "$ranks" --bind-to none "${launch[@]}" "$BIN" plan --config "$ROOT/configs/deepfm-criteo.yaml" \
      --set data.format=synthetic --set threads=1 --calibrate "$WORK/cal.json" >"$WORK/cal.out" 2>&1 ||
      { tail -20 "$WORK/cal.out" >&2; exit 1; }
  fi
  for rows in ${ROWS//,/ }; do
    job=(--config "$ROOT/configs/deepfm-criteo.yaml"
      --set data.format=synthetic --set model.table_rows="$rows" --set model.embedding_size=16
      --set data.batch_size="$BATCH" --set data.synthetic.train_samples=$((BATCH * ranks * STEPS))
      --set data.synthetic.test_samples=2000 --set train.epochs=1 --set threads=1
      --set distributed.ranks_per_node="$per_host" --set distributed.compression="$COMPRESSION")
    plan_out="$WORK/plan.out"
    : >"$plan_out"
    if [ $PLAN = 1 ]; then
      link=(--link-gbps 1)  # one host: no link crossed
      [ "$hosts" -gt 1 ] && link=(--calibration "$WORK/cal.json")
      mpirun -np "$ranks" --bind-to none "${launch[@]}" "$BIN" plan "${job[@]}" --nodes "$hosts" "${link[@]}" \
        --steps 8 --warmup 3 >"$plan_out" 2>&1 || { tail -20 "$plan_out" >&2; exit 1; }
      { echo "## $rows rows, $topology"; grep -E '^# (compute|unique)|^ +[0-9]+ +[0-9]+ ' "$plan_out"; } >>"$WORK/plans"
    fi
    ways=$WAYS
    [ $ranks -gt 1 ] || ways=none  # one rank exchanges nothing: the baseline for scaling
    for way in ${ways//,/ }; do
      before=$("$SIM" counters | awk '{tx += $2} END {printf "%.0f\n", tx}')
      out="$WORK/out"
      # --bind-to none: every simulated host's launcher would bind its first rank to core 0,
      # the same core of this machine for every host.
      placement=(--set distributed.embedding_exchange="${way/none/auto}")
      [ "$way" = sharded ] && placement=(--set model.embedding_sharding=rows)
      mpirun -np "$ranks" --bind-to none "${launch[@]}" "$BIN" "${job[@]}" --set train.log_every=$((STEPS / 2)) \
        --set train.eval_every_epochs=0 "${placement[@]}" \
        --set checkpoint.dir="$WORK/ck" --set checkpoint.every_steps=0 \
        --set output.model_dir="$WORK/m" --set output.metrics= >"$out" 2>&1 || { tail -20 "$out" >&2; exit 1; }
      rm -rf "$WORK/ck" "$WORK/m"
      after=$("$SIM" counters | awk '{tx += $2} END {printf "%.0f\n", tx}')
      python3 - "$out" "$rows" "$topology" "$way" "$before" "$after" "$hosts" "$ranks" "$BATCH" "$plan_out" <<'PY'
import re, sys
out, rows, topology, way, before, after, hosts, ranks, batch, plan_out = sys.argv[1:]
text = open(out).read()
steps = [m for m in re.finditer(r"^\[step (\d+)\].*samples_per_sec=([0-9.e+]+).*exchanged_mb_per_step=([0-9.e+-]+)", text, re.M)]
done = re.search(r"^\[done\] (.*)$", text, re.M).group(1)
values = dict(re.findall(r"(\w+)=([-+0-9.eE]+)", done))
n = int(values["steps"])
rate = float(steps[-1].group(2))  # the second window: after the first steps' warm-up
step_ms = int(batch) * int(ranks) / rate * 1000
sent = (float(after) - float(before)) / int(hosts) / n / 1e6  # every step, evaluation left out
# Horovod's allgather of IndexedSlices: each rank's B x F (id, row) pairs, (K + 1) floats and
# an int64 id each, sent to every other host's ranks (ring: each host forwards (P - 1) shares).
k1, fields = 17, 39
horovod = (int(ranks) - 1) * int(ranks) / int(hosts) * int(batch) * fields * (4 * k1 + 8) / 1e6
planned = ""
plan = open(plan_out).read()
if plan:
    # The plan's row: nodes ranks step_ms samples/s scale uniq/rank uniq/world sparse_ms dense_ms auto sharded_ms ...
    row = re.search(r"^\s*" + hosts + r"\s+" + ranks + r"\s+(\S+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+(\w+)\s+(\S+)",
                    plan, re.M)
    if not row:
        sys.exit("no plan row for " + topology + " in:\n" + plan)
    job_ms, sparse_ms, dense_ms, auto_way = float(row.group(1)), float(row.group(2)), float(row.group(3)), row.group(4)
    sharded_ms = float(row.group(5))
    predicted = {"sparse": sparse_ms, "dense": dense_ms, "auto": job_ms, "none": job_ms, "sharded": sharded_ms}[way]
    planned = f" {predicted:,.0f} | {predicted / step_ms:.2f} |"
print(f"| {int(rows):,} | {topology} | {way} | {rate:,.0f} | {step_ms:,.0f} |{planned} {float(values['exchanged_mb_per_step']):.2f} | "
      f"{sent:.2f} | {horovod:.1f} | {values['dense_exchange_steps']} |")
PY
    done
  done
done
echo
echo "# samples/s and step ms: the [step] window after the first (warm-up); rank received: the exchange's bytes a rank took"
echo "# in, dense gradients included; host sent: the host link's tx bytes over the run / steps (data and set-up included)."
if [ $PLAN = 1 ]; then
  echo
  echo "# the plans' measured steps and rows:"
  sed 's/^/#   /' "$WORK/plans"
fi
