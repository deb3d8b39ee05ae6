#!/usr/bin/env bash
# `sdp-train plan` against measured training steps (docs/records/plan-record.md, "Checked against runs"):
# for each topology, one calibration (`plan --calibrate` under the same launch), then per
# model and algorithm, alternating, `plan` (compute measured by every rank of the launch at
# once) and a short training run (median step from its metric lines, the first interval left
# out). Prints predicted and measured step, and the error, medians over --runs alternations;
# then each row's step split in two, the plan's against the training's metric lines: the
# exposed communication (the wait for the gradients after backward, which in the training
# also holds the wait for slower ranks, where the plan counts them in the slowest rank's
# compute) and the rest.
#
#   scripts/bench-plan.sh [--topologies 1x2,2x1,2x2] [--rate 1gbit] [--models lenet5,resnet20]
#                         [--algorithms flat,ring,hierarchical] [--runs 3] [--steps 48] [--confirm]
#     --topologies  HOSTSxRANKS per host; 1xR runs on this machine without namespaces, H > 1
#                   on scripts/simcluster.sh's hosts with links shaped to --rate (needs root)
#     --models      lenet5 (MNIST shape), resnet20 (CIFAR shape), resnet50 (224 px): synthetic data
#     --algorithms  the rows' algorithms (none: skip the rows, e.g. with --confirm alone)
#     --steps       training steps per run (the metric lines log every 8)
#     --delay       milliseconds added to each host link, each way (simcluster.sh delay; a host
#                   to another crosses two links); default none
#     --burst       the shaped links' HTB burst (simcluster.sh shape --burst; default 256k):
#                   gradients smaller than it cross at the veth's speed once it has refilled
#     --wire        the links' rate and delay from simcluster.sh's relay (delay MS --rate RATE), a
#                   wire's: no burst (then --burst plays no part)
#     --pin         each rank on one core of this machine (rank modulo the cores): simulated
#                   hosts then do not share a core while there are as many cores as ranks
#     --cpus C      each simulated host's processes get at most C CPUs (simcluster.sh cpus; auto:
#                   0.9 x this machine's cores / hosts): more hosts than cores then compute as
#                   hosts with cores of their own, slower, whether the others compute or wait
#     --raw FILE    also write each run's "topology model allreduce predicted exposed measured
#                   measured_exposed" (s)
#     --bracket     plan each row both before and after its training run and predict their mean:
#                   a prediction that follows the host's drift across the run (long steps: ResNet-50)
#     --vs OLD_BIN  also train each row with another build of sdp-train (e.g. main before a change),
#                   alternating with this one, and print the two builds' measured steps side by side
#     --confirm     also, per topology and model: the plan's own choice of algorithm and bucket
#                   size (every algorithm, buckets 1,5,10,25,50,100,0 MB) against the job's
#                   default (auto, 25 MB), both trained --runs times alternately
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
confirm=0
pin=0
burst=256k
wire=0
delay=
cpus=
raw=
vs=
bracket=0
while [ $# -gt 0 ]; do
  case "$1" in
    --topologies) topologies=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --algorithms) algorithms=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --confirm) confirm=1; shift ;;
    --pin) pin=1; shift ;;
    --burst) burst=$2; shift 2 ;;
    --wire) wire=1; shift ;;
    --delay) delay=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --raw) raw=$2; shift 2 ;;
    --bracket) bracket=1; shift ;;
    --vs) vs=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-plan: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$algorithms" = none ] && algorithms=
BIN=$PWD/${BUILD_DIR:-build}/sdp-train
[ -x "$BIN" ] || { echo "bench-plan: no $BIN; build first" >&2; exit 1; }
[ -z "$vs" ] || [ -x "$vs" ] || { echo "bench-plan: --vs $vs is not an executable" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export SIMCLUSTER_PREFIX=sdpp SIMCLUSTER_NET=10.216.0
SIM=scripts/simcluster.sh
tmp=$(mktemp -d)
trap '"$SIM" down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
touch "$tmp/rows" "$tmp/confirm" "$tmp/vs"
if [ $pin = 1 ]; then  # mpirun starts the wrapper, which pins the rank and becomes sdp-train
  for build in BIN vs; do
    [ -n "${!build}" ] || continue
    printf '#!/bin/sh\nexec taskset -c $((OMPI_COMM_WORLD_RANK %% %s)) %s "$@"\n' "$(nproc)" "${!build}" >"$tmp/pinned-$build"
    chmod +x "$tmp/pinned-$build"
    printf -v "$build" '%s' "$tmp/pinned-$build"
  done
fi

job_args() {  # model ranks -> the job's options
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
# A training run's metric lines, the first interval left out, medians in seconds: the step,
# and with --exposed also its exposed communication (exposed_comm_ms: the wait for the
# gradients after backward).
median_step() {
  python3 - "$@" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
batch = next(l for l in lines if l.get("event") == "start")["global_batch"]
train = [l for l in lines if l.get("event") == "train"][1:]
medians = [statistics.median(batch / l["images_per_sec"] for l in train)]
if "--exposed" in sys.argv[2:]:
    medians.append(statistics.median(l["exposed_comm_ms"] / 1e3 for l in train))
print(*medians)
PY
}
json_field() {  # json_field FILE 'python expression over d'
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

echo "# bench-plan: $(nproc) cores$([ $pin = 1 ] && echo ", each rank pinned to one")$([ $bracket = 1 ] && echo ", each prediction the mean of plans before and after its run")$([ -n "$cpus" ] && echo ", each host's share: $cpus CPUs"), $([ $wire = 1 ] && echo "links as wires (the relay's rate, no burst)" || echo "HTB burst $burst"); load average $(cut -d' ' -f1-3 /proc/loadavg); $steps steps per run, $runs alternation(s)"
for topo in ${topologies//,/ }; do
  hosts=${topo%x*}
  slots=${topo#*x}
  mpiargs=()
  if [ "$hosts" -gt 1 ]; then
    "$SIM" up "$hosts" --slots "$slots" >/dev/null
    if [ $wire = 1 ]; then
      "$SIM" delay "${delay:-0}" --rate "$rate" >/dev/null
    else
      "$SIM" shape "$rate" --burst "$burst" >/dev/null
      [ -z "$delay" ] || "$SIM" delay "$delay" >/dev/null
    fi
    if [ -n "$cpus" ]; then
      share=$cpus
      [ "$cpus" != auto ] || share=$(awk -v c="$(nproc)" -v h="$hosts" 'BEGIN { printf "%.2f", 0.9 * c / h }')
      "$SIM" cpus "$share" >/dev/null
      echo "# $topo: each host's processes get at most $share CPUs"
    fi
    read -r -a mpiargs <<<"$("$SIM" mpirun-args)"
  elif [ "$slots" -gt "$(nproc)" ]; then
    mpiargs=(--oversubscribe)
  fi
  np=$((hosts * slots))
  run() { mpirun -np $np "${mpiargs[@]}" "$BIN" "$@"; }
  run_vs() { mpirun -np $np "${mpiargs[@]}" "$vs" "$@"; }
  run plan --config configs/quickstart.yaml --calibrate "$tmp/cal-$topo.json" >"$tmp/cal.out" 2>&1 || { cat "$tmp/cal.out"; exit 1; }
  sed 's/^# /# '"$topo"' /' "$tmp/cal.out" | grep -v written
  for model in ${models//,/ }; do
    read -r -a job <<<"$(job_args "$model" "$np")"
    plan() { run plan "${job[@]}" --calibration "$tmp/cal-$topo.json" --nodes "$hosts" --json "$@" >"$tmp/plan.json" 2>"$tmp/plan.err" ||
               { cat "$tmp/plan.err"; exit 1; }; }
    train() { rm -f "$tmp/metrics.jsonl"; run "${job[@]}" "$@" >"$tmp/train.out" 2>&1 || { tail "$tmp/train.out"; exit 1; }; }
    for alg in ${algorithms//,/ }; do
      for ((r = 1; r <= runs; r++)); do
        # The row's own algorithm: the plan's "best" keeps the job's setting (auto) when that is
        # within 2 % of it, and would compare the measured $alg with auto's prediction.
        plan --algorithms "$alg" --bucket-mb 25
        predicted=$(json_field "$tmp/plan.json" 'd["rows"][0]["algorithms"][0]["step_s"]')
        exposed=$(json_field "$tmp/plan.json" 'd["rows"][0]["algorithms"][0]["exposed_s"]')
        train --set distributed.allreduce="$alg"
        if [ $bracket = 1 ]; then
          plan --algorithms "$alg" --bucket-mb 25
          predicted=$(python3 -c 'import sys; print((float(sys.argv[1]) + float(sys.argv[2])) / 2)' "$predicted" \
            "$(json_field "$tmp/plan.json" 'd["rows"][0]["algorithms"][0]["step_s"]')")
        fi
        echo "$topo $model $alg $predicted $exposed $(median_step "$tmp/metrics.jsonl" --exposed)" >>"$tmp/rows"
        [ -n "$vs" ] || continue
        rm -f "$tmp/metrics.jsonl"
        run_vs "${job[@]}" --set distributed.allreduce="$alg" >"$tmp/train.out" 2>&1 || { tail "$tmp/train.out"; exit 1; }
        echo "$topo $model $alg $(median_step "$tmp/metrics.jsonl")" >>"$tmp/vs"
      done
    done
    [ $confirm = 1 ] || continue
    # The plan's recommendation against the job's default (auto, 25 MB), alternately.
    plan
    best="$(json_field "$tmp/plan.json" 'd["rows"][0]["best"]["allreduce"]') $(json_field "$tmp/plan.json" '"%g" % d["rows"][0]["best"]["bucket_mb"]')"
    gain=$(json_field "$tmp/plan.json" 'd["rows"][0]["job_setting"]["step_s"] / d["rows"][0]["best"]["step_s"]')
    if [ "$best" = "auto 25" ]; then
      echo "$topo $model auto 25 same $gain 0" >>"$tmp/confirm"
      continue
    fi
    for ((r = 1; r <= runs; r++)); do
      for setting in "auto 25" "$best"; do
        read -r alg mb <<<"$setting"
        train --set distributed.allreduce="$alg" --set distributed.bucket_mb="$mb"
        echo "$topo $model $alg $mb $([ "$setting" = "auto 25" ] && echo default || echo plan) $gain $(median_step "$tmp/metrics.jsonl")" >>"$tmp/confirm"
      done
    done
  done
  if [ "$hosts" -gt 1 ]; then "$SIM" down >/dev/null; fi
done

[ -z "$raw" ] || cp "$tmp/rows" "$raw"
python3 - "$tmp/rows" "$tmp/confirm" "$rate${delay:+, +$delay ms a link}" "$tmp/vs" <<'PY'
import statistics, sys
from collections import OrderedDict
rows = OrderedDict()
for line in open(sys.argv[1]):
    topo, model, alg, predicted, exposed, measured, measured_exposed = line.split()
    rows.setdefault((topo, model, alg), []).append(
        (float(predicted), float(exposed), float(measured), float(measured_exposed)))
def where(topo):
    return topo if topo.startswith("1x") else f"{topo} ({sys.argv[3]})"
if rows:
    print("| hosts x ranks | model | allreduce | predicted step | of it exposed comm | measured step | error |")
    print("|---|---|---|---|---|---|---|")
    # Each row's medians over its runs: predicted, exposed, measured, measured exposed.
    medians = {key: [statistics.median(r[i] for r in runs) for i in range(4)] for key, runs in rows.items()}
    errors = []
    for (topo, model, alg), (p, e, m, x) in medians.items():
        errors.append(abs(p - m) / m)
        print(f"| {where(topo)} | {model} | {alg} | {p * 1e3:.2f} ms | {e * 1e3:.2f} ms | {m * 1e3:.2f} ms | {100 * (p - m) / m:+.1f} % |")
    print(f"# {len(errors)} rows: median |error| {100 * statistics.median(errors):.1f} %, largest {100 * max(errors):.1f} %; "
          f"within 10 %: {sum(e <= 0.10 for e in errors)} of {len(errors)}")
    # Where each row's error lies: the step split as the training's metric lines split it, the
    # exposed communication (the wait for the gradients after backward) and the rest (compute,
    # the update, the loader's wait), the plan's against the training's.
    print()
    print("| hosts x ranks | model | allreduce | rest of the step, plan | rest, measured | exposed comm, plan | exposed comm, measured |")
    print("|---|---|---|---|---|---|---|")
    for (topo, model, alg), (p, e, m, x) in medians.items():
        print(f"| {where(topo)} | {model} | {alg} | {(p - e) * 1e3:.2f} ms | {(m - x) * 1e3:.2f} ms | {e * 1e3:.2f} ms | {x * 1e3:.2f} ms |")
olds = OrderedDict()
for line in open(sys.argv[4]):
    topo, model, alg, measured = line.split()
    olds.setdefault((topo, model, alg), []).append(float(measured))
if olds:
    print()
    print("| hosts x ranks | model | allreduce | measured, --vs build | measured, this build | speed-up |")
    print("|---|---|---|---|---|---|")
    for key, old in olds.items():
        o = statistics.median(old)
        m = medians[key][2]
        print(f"| {where(key[0])} | {key[1]} | {key[2]} | {o * 1e3:.2f} ms | {m * 1e3:.2f} ms | {o / m:.3f}x |")
confirm = OrderedDict()
for line in open(sys.argv[2]):
    topo, model, alg, mb, who, gain, measured = line.split()
    entry = confirm.setdefault((topo, model), {"gain": float(gain)})
    entry.setdefault(who, [alg, mb, []])[2].append(float(measured))
if confirm:
    print()
    print("| hosts x ranks | model | default (auto, 25 MB) | the plan's choice | predicted gain | measured default | measured choice | measured gain |")
    print("|---|---|---|---|---|---|---|---|")
    for (topo, model), e in confirm.items():
        if "same" in e:
            print(f"| {where(topo)} | {model} | auto, 25 MB | the same | 1.000x | - | - | - |")
            continue
        d, c = statistics.median(e["default"][2]), statistics.median(e["plan"][2])
        print(f"| {where(topo)} | {model} | auto, 25 MB | {e['plan'][0]}, {e['plan'][1]} MB | {e['gain']:.3f}x | "
              f"{d * 1e3:.2f} ms | {c * 1e3:.2f} ms | {d / c:.3f}x |")
PY
