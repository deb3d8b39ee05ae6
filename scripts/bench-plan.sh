#!/usr/bin/env bash
# `sdp-train plan` against measured training steps (docs/plan.md, "Checked against runs"):
# for each topology, one calibration (`plan --calibrate` under the same launch), then per
# model and algorithm, alternating, `plan` (compute measured by every rank of the launch at
# once) and a short training run (median step from its metric lines, the first interval left
# out). Prints predicted and measured step, and the error, medians over --runs alternations.
#
#   scripts/bench-plan.sh [--topologies 1x2,2x1,2x2] [--rate 1gbit] [--models lenet5,resnet20]
#                         [--algorithms flat,ring,hierarchical] [--runs 3] [--steps 48]
#     --topologies  HOSTSxRANKS per host; 1xR runs on this machine without namespaces, H > 1
#                   on scripts/simcluster.sh's hosts with links shaped to --rate (needs root)
#     --models      lenet5 (MNIST shape), resnet20 (CIFAR shape), resnet50 (224 px): synthetic data
#     --steps       training steps per run (the metric lines log every 8)
# Simulated hosts share this machine's cores: the plan's compute is measured with every rank
# of the launch running at once, as in the training run. The host's speed drifts (up to 2x),
# hence the alternation.
set -euo pipefail
cd "$(dirname "$0")/.."

topologies=1x2,2x1,2x2
rate=1gbit
models=lenet5,resnet20
algorithms=flat,ring,hierarchical
runs=3
steps=48
while [ $# -gt 0 ]; do
  case "$1" in
    --topologies) topologies=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --algorithms) algorithms=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-plan: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=$PWD/${BUILD_DIR:-build}/sdp-train
[ -x "$BIN" ] || { echo "bench-plan: no $BIN; build first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export SIMCLUSTER_PREFIX=sdpp SIMCLUSTER_NET=10.216.0
SIM=scripts/simcluster.sh
tmp=$(mktemp -d)
trap '"$SIM" down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

job_args() {  # model ranks -> the job's --set options
  local model=$1 ranks=$2 batch config
  case "$model" in
    lenet5) config=configs/lenet-mnist.yaml; batch=64 ;;
    resnet20) config=configs/resnet20-cifar10.yaml; batch=32 ;;
    resnet50) config=configs/resnet50-synthetic-bench.yaml; batch=8 ;;
    *) echo "bench-plan: unknown model $model" >&2; exit 2 ;;
  esac
  echo "--config $config --set data.format=synthetic --set data.batch_size=$batch" \
    "--set data.synthetic.train_samples=$((steps * batch * ranks)) --set train.epochs=1 --set train.log_every=8" \
    "--set train.eval_every_epochs=0 --set checkpoint.dir=$tmp/ckpt --set checkpoint.resume=never" \
    "--set output.model_dir=$tmp/model --set output.metrics=$tmp/metrics.jsonl --set output.progress=lines"
}

echo "# bench-plan: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $steps steps per run, $runs alternation(s)"
for topo in ${topologies//,/ }; do
  hosts=${topo%x*}
  slots=${topo#*x}
  mpiargs=()
  if [ "$hosts" -gt 1 ]; then
    "$SIM" up "$hosts" --slots "$slots" >/dev/null
    "$SIM" shape "$rate" >/dev/null
    read -r -a mpiargs <<<"$("$SIM" mpirun-args)"
  else
    [ "$slots" -gt "$(nproc)" ] && mpiargs=(--oversubscribe)
  fi
  np=$((hosts * slots))
  run() { mpirun -np $np "${mpiargs[@]}" "$BIN" "$@"; }
  run plan --config configs/quickstart.yaml --calibrate "$tmp/cal-$topo.json" >"$tmp/cal.out" 2>&1 || { cat "$tmp/cal.out"; exit 1; }
  sed 's/^/  /' "$tmp/cal.out" | grep -v written
  for model in ${models//,/ }; do
    read -r -a job <<<"$(job_args "$model" "$np")"
    for alg in ${algorithms//,/ }; do
      for ((r = 1; r <= runs; r++)); do
        run plan "${job[@]}" --calibration "$tmp/cal-$topo.json" --nodes "$hosts" --algorithms "$alg" --bucket-mb 25 \
          --json >"$tmp/plan.json" 2>"$tmp/plan.err" || { cat "$tmp/plan.err"; exit 1; }
        rm -f "$tmp/metrics.jsonl"
        run "${job[@]}" --set distributed.allreduce="$alg" >"$tmp/train.out" 2>&1 || { tail "$tmp/train.out"; exit 1; }
        python3 - "$tmp/plan.json" "$tmp/metrics.jsonl" "$topo $model $alg" >>"$tmp/rows" <<'PY'
import json, statistics, sys
plan = json.load(open(sys.argv[1]))
row = plan["rows"][0]["best"]
lines = [json.loads(l) for l in open(sys.argv[2])]
start = next(l for l in lines if l.get("event") == "start")
steps = [start["global_batch"] / l["images_per_sec"] for l in lines if l.get("event") == "train"][1:]
print(sys.argv[3], row["step_s"], row["exposed_s"], statistics.median(steps))
PY
      done
    done
  done
  [ "$hosts" -gt 1 ] && "$SIM" down >/dev/null
done

python3 - "$tmp/rows" "$rate" <<'PY'
import statistics, sys
from collections import OrderedDict
rows = OrderedDict()
for line in open(sys.argv[1]):
    topo, model, alg, predicted, exposed, measured = line.split()
    rows.setdefault((topo, model, alg), []).append((float(predicted), float(exposed), float(measured)))
print(f"| hosts x ranks | model | allreduce | predicted step | of it exposed comm | measured step | error |")
print("|---|---|---|---|---|---|---|")
errors = []
for (topo, model, alg), runs in rows.items():
    p = statistics.median(r[0] for r in runs)
    e = statistics.median(r[1] for r in runs)
    m = statistics.median(r[2] for r in runs)
    errors.append(abs(p - m) / m)
    link = "" if topo.startswith("1x") else f" ({sys.argv[2]})"
    print(f"| {topo}{link} | {model} | {alg} | {p * 1e3:.2f} ms | {e * 1e3:.2f} ms | {m * 1e3:.2f} ms | {100 * (p - m) / m:+.1f} % |")
print(f"# {len(errors)} rows: median |error| {100 * statistics.median(errors):.1f} %, largest {100 * max(errors):.1f} %; "
      f"within 10 %: {sum(e <= 0.10 for e in errors)} of {len(errors)}")
PY
