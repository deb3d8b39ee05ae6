#!/usr/bin/env bash
# Final test accuracy against the global batch, for each LR rule and optimizer: the evidence
# that a recipe holds when the world grows (Goyal et al. 2017; You et al. 2017, 2019).
#
#   scripts/bench-scale-accuracy.sh [--model lenet5|resnet20] [--batches "64 128 ..."]
#       [--methods "linear sqrt linear-warmup lars lamb"] [--cells "lars:128 sqrt:256 ..."]
#       [--epochs N] [--ranks R] [--device cpu|cuda] [--jobs J]
#       [--data DIR] [--bin PATH] [--out DIR] [--threads T]
#
# --cells runs only those method:batch pairs (instead of methods x batches); --jobs runs J of
# them at once (each then should get --threads cores, or share one GPU: a small model leaves
# most of a GPU idle between its steps); --device cuda trains on the GPU.
#
# A global batch B runs as R ranks (default 1) x a per-rank batch b x train.accumulate_steps
# k, with b = min(B / R, the model's largest per-rank batch) and k = B / (R b). LeNet-5 has no
# BatchNorm, so how B is split changes only the summation order; ResNet-20 keeps 128 per
# micro-batch, the BatchNorm statistics of 8 ranks x 128. Every method states its LR for a
# reference global batch (optimizer.reference_batch), so one recipe serves every B.
#
# Prints a table (rows: global batch; columns: methods; cells: final test accuracy in %,
# "*" when the run warned of divergence), writes $OUT/scale-accuracy-<model>.csv and, when
# matplotlib is there, $OUT/scale-accuracy-<model>.png (scripts/plot_scale_accuracy.py).
# Needs the real data set: $SDP_DATA_DIR/{mnist,cifar10} (default ../shared/data).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
model=lenet5
batches=""
methods="linear sqrt linear-warmup lars lamb"
epochs=10
ranks=1
threads=""
device=""
jobs=1
cells=""
data="${SDP_DATA_DIR:-$src/../shared/data}"
bin="$src/build/sdp-train"
out="$src/out/bench-scale-accuracy"
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --cells) cells=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bench-scale-accuracy: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

case $model in
  lenet5)
    config="$src/configs/lenet-mnist.yaml"; dataset=mnist; max_per_rank=4096
    : "${batches:=64 128 256 512 1024 2048 4096}"
    # SGD as the recipe stood before LAMB (Nesterov, weight decay 5e-4, cosine), its LR for 64.
    sgd=(--set optimizer.name=sgd --set optimizer.nesterov=true --set optimizer.lr=0.05
         --set optimizer.weight_decay=5e-4 --set optimizer.reference_batch=64)
    lars=(--set optimizer.name=lars --set optimizer.nesterov=false --set optimizer.lr=10
          --set optimizer.reference_batch=1024 --set optimizer.lr_scaling=sqrt --set optimizer.weight_decay=5e-4
          --set optimizer.warmup_epochs=1)
    lamb=(--set optimizer.name=lamb --set optimizer.nesterov=false --set optimizer.lr=0.02
          --set optimizer.reference_batch=1024 --set optimizer.lr_scaling=sqrt --set optimizer.eps=1e-6
          --set optimizer.weight_decay=0.01 --set optimizer.warmup_epochs=1) ;;
  resnet20)
    config="$src/configs/resnet20-cifar10.yaml"; dataset=cifar10; max_per_rank=128
    : "${batches:=128 256 512 1024}"
    # SGD and LARS as docs/scaling.md measured them: random crops + flips, without the file's
    # label smoothing.
    sgd=(--set optimizer.name=sgd --set optimizer.nesterov=false --set optimizer.lr=0.1
         --set optimizer.reference_batch=128 --set optimizer.weight_decay=1e-4 --set train.label_smoothing=0
         --set data.augment=crop-flip)
    lars=(--set optimizer.name=lars --set optimizer.nesterov=false --set optimizer.lr=5
          --set optimizer.reference_batch=1024 --set optimizer.lr_scaling=sqrt --set optimizer.weight_decay=5e-4
          --set optimizer.warmup_epochs=2 --set train.label_smoothing=0 --set data.augment=crop-flip)
    # The shipped recipe (label smoothing 0.1 and flips from the file).
    lamb=(--set optimizer.name=lamb --set optimizer.nesterov=false --set optimizer.lr=0.02
          --set optimizer.reference_batch=1024 --set optimizer.lr_scaling=sqrt --set optimizer.eps=1e-6
          --set optimizer.weight_decay=0.01 --set optimizer.warmup_epochs=1) ;;
  *) echo "bench-scale-accuracy: --model must be lenet5 or resnet20" >&2; exit 2 ;;
esac

[ -x "$bin" ] || { echo "bench-scale-accuracy: no binary at $bin (build first, or --bin)" >&2; exit 2; }
if [ ! -d "$data/$dataset" ]; then
  echo "bench-scale-accuracy: SKIP: no $dataset data set at $data/$dataset (set SDP_DATA_DIR or --data)"
  exit 0
fi

method_args() {
  case $1 in
    linear) echo "${sgd[@]}" --set optimizer.lr_scaling=linear --set optimizer.warmup_epochs=0 ;;
    sqrt) echo "${sgd[@]}" --set optimizer.lr_scaling=sqrt --set optimizer.warmup_epochs=0 ;;
    linear-warmup) echo "${sgd[@]}" --set optimizer.lr_scaling=linear --set optimizer.warmup_epochs=2 ;;
    lars) echo "${lars[@]}" ;;
    lamb) echo "${lamb[@]}" ;;
    *) echo "bench-scale-accuracy: unknown method $1 (linear sqrt linear-warmup lars lamb)" >&2; return 2 ;;
  esac
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
mkdir -p "$out"
csv="$out/scale-accuracy-$model.csv"
echo "model,method,global_batch,ranks,batch_per_rank,accumulate_steps,peak_lr,test_accuracy,diverged,seconds" >"$csv"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_cell METHOD B: one training run; its CSV row goes to $work/row-METHOD-B.
run_cell() {
  local method=$1 B=$2 args per k start secs acc peak diverged log="$work/log-$1-$2"
  args=$(method_args "$method")
  per=$((B / ranks)); [ $per -gt $max_per_rank ] && per=$max_per_rank
  k=$((B / (ranks * per)))
  [ $((ranks * per * k)) -eq "$B" ] || { echo "bench-scale-accuracy: $B is not ranks x batch x k" >&2; return 2; }
  local launch=("$bin"); [ "$ranks" -gt 1 ] && launch=(mpirun -np "$ranks" --oversubscribe "$bin")
  start=$(date +%s)
  mkdir -p "$work/run-$method-$B"
  # shellcheck disable=SC2086  # $args is a list of --set options
  (cd "$work/run-$method-$B" && "${launch[@]}" --config "$config" --set data.train="$data/$dataset" --set data.test="$data/$dataset" \
     --set train.epochs="$epochs" --set data.batch_size=$per --set train.accumulate_steps=$k $args \
     ${threads:+--set threads=$threads} ${device:+--set device=$device} --set train.log_every=1000000 --set output.metrics= \
     --set output.model_dir="$work/model-$method-$B" --set checkpoint.dir="$work/ck-$method-$B" --set checkpoint.resume=never) \
    >"$log" 2>&1 || true
  secs=$(($(date +%s) - start))
  acc=$(grep -oE '^\[epoch [0-9]+\].*test_accuracy=[0-9.]+' "$log" | tail -1 | grep -oE '[0-9.]+$' || true)
  peak=$(grep -oE '^\[start\].* peak_lr=[0-9.e+-]+' "$log" | grep -oE '[0-9.e+-]+$' || true)
  diverged=$(grep -cE 'diverged or stalled|not finite' "$log" || true)
  if [ -z "$acc" ]; then
    echo "bench-scale-accuracy: $method at $B produced no accuracy; its log:" >&2
    tail -5 "$log" >&2
    acc=0
  fi
  echo "$model,$method,$B,$ranks,$per,$k,${peak:-},$acc,$diverged,$secs" >"$work/row-$method-$B"
  printf '%-14s batch %5d (%d x %d x %d): peak lr %-10s accuracy %6.2f%%%s (%d s)\n' "$method" "$B" "$ranks" "$per" "$k" \
    "${peak:-?}" "$(python3 -c "print(100 * $acc)")" "$([ "$diverged" -gt 0 ] && echo ' diverged' || true)" "$secs"
}

if [ -z "$cells" ]; then
  for method in $methods; do for B in $batches; do cells+=" $method:$B"; done; done
fi
for cell in $cells; do method_args "${cell%%:*}" >/dev/null || exit 2; done
running=0
for cell in $cells; do
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  run_cell "${cell%%:*}" "${cell##*:}" &
  running=$((running + 1))
done
wait
for cell in $cells; do
  row="$work/row-${cell%%:*}-${cell##*:}"
  [ -f "$row" ] && cat "$row" >>"$csv"
done

python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
methods = list(dict.fromkeys(r['method'] for r in rows))
batches = sorted({int(r['global_batch']) for r in rows})
cell = {(r['method'], int(r['global_batch'])): r for r in rows}
print()
print(f"final test accuracy (%), {rows[0]['model']}; * = the run warned of divergence or a non-finite loss")
print('| global batch | ' + ' | '.join(methods) + ' |')
print('|---:|' + '---:|' * len(methods))
for b in batches:
    out = []
    for m in methods:
        r = cell.get((m, b))
        out.append('' if r is None else f"{100 * float(r['test_accuracy']):.2f}{'*' if int(r['diverged']) else ''}")
    print(f'| {b} | ' + ' | '.join(out) + ' |')
PY
echo "table: $csv"
# The first Python that has matplotlib (a pyenv or venv python3 may lack Debian's package).
plot_python=""
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import matplotlib' 2>/dev/null; then plot_python=$py; break; fi
done
if [ -n "$plot_python" ]; then
  band=5; [ "$model" = resnet20 ] && band=15  # ResNet-20's methods spread wider than LeNet-5's
  "$plot_python" "$here/plot_scale_accuracy.py" "$csv" "${csv%.csv}.png" $band && echo "plot: ${csv%.csv}.png"
else
  echo "no matplotlib (scripts/install-deps.sh --bench installs it): no plot"
fi
