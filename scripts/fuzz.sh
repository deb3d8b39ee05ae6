#!/usr/bin/env bash
# Fuzzes the readers of untrusted input with libFuzzer under ASan+UBSan (docs/robustness.md).
#
#   scripts/fuzz.sh [--seconds N] [reader...]
#     --seconds N   fuzzing time per reader (default 600)
#     reader        safetensors idx cifar10 tfrecord libsvm tar image job_spec json plan_files
#                   model_index
#                   (default: all)
#
# Configures and builds build-fuzz (clang, -DSDP_FUZZ=ON), generates the seed corpora from
# code and configs/, runs two targets at a time (the machine has two cores) and prints a
# table reader / runs / seconds / findings. Exits non-zero on any finding; the inputs that
# crashed (or leaked, timed out, or allocated beyond the limits) are kept under
# build-fuzz/findings/<reader>/, the logs under build-fuzz/logs/. The corpus grows across
# runs in build-fuzz/corpus/<reader>/.
#
# It takes no lock itself: to keep it off other builds, run it under the shared one,
#   CCACHE_BASEDIR=/work flock /tmp/sdp-build.lock scripts/fuzz.sh --seconds 600 safetensors idx
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
readers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) readers+=("$1"); shift ;;
  esac
done
all=(safetensors idx cifar10 tfrecord libsvm tar image job_spec json plan_files model_index)
[ ${#readers[@]} -gt 0 ] || readers=("${all[@]}")
for r in "${readers[@]}"; do
  [[ " ${all[*]} " == *" $r "* ]] || { echo "fuzz.sh: unknown reader '$r' (one of: ${all[*]})" >&2; exit 2; }
done

B=build-fuzz
if [ ! -f "$B/build.ninja" ]; then
  mkdir -p "$B"
  CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DSDP_FUZZ=ON -DSDP_WITH_CUDA=OFF \
    -DSDP_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >"$B/configure.log" 2>&1 ||
    { cat "$B/configure.log"; exit 1; }
fi
cmake --build "$B" --target fuzz_all -j2

# Seeds: binary ones from code, text ones from the repository's own examples. The targets
# that take several files read a leading flags byte (see each tests/fuzz/fuzz_*.cpp).
seeds="$B/seeds"
rm -rf "$seeds"
"$B/tests/fuzz/make_fuzz_seeds" "$seeds"
mkdir -p "$seeds/job_spec" "$seeds/json"
cp configs/*.yaml "$seeds/job_spec/"
{ printf '\x00'; cat configs/resourceconfig-example.json; } >"$seeds/json/resourceconfig"
printf '\x00{"current_host":"algo-1","hosts":["algo-1"]}' >"$seeds/json/resourceconfig-min"
printf '\x01{"optimizer.lr": "0.05", "training.epochs": "2", "model": {"name": "\\"mlp\\""}, "sagemaker_program": "x"}' \
  >"$seeds/json/hyperparameters"
# sdp-train plan's files: a compute profile (\x00), a calibration (\x01), the instance table (\x02),
# a CTR job's step profile (\x03).
mkdir -p "$seeds/plan_files"
printf '\x00{"version":1,"kind":"sdp-train compute profile","model":"lenet5","precision":"fp32","device":"cpu","measured_on":"x","batch_per_rank":64,"forward_s":0.002,"backward_s":0.003,"optimizer_s":0.0002,"arena_elements":3000,"element_size":4,"params":[{"offset":0,"count":1000,"ready_s":0.003},{"offset":1024,"count":1000,"ready_s":0.002},{"offset":2048,"count":900,"ready_s":0.001}]}' \
  >"$seeds/plan_files/compute"
printf '\x01{"version":1,"kind":"sdp-train plan calibration","date":"2026-11-26","hosts":"a,b","nodes":2,"ranks_per_node":2,"link":{"measured":true,"bytes_per_s":1.2e8,"latency_s":2e-5},"intra":{"measured":true,"ranks":2,"points":[[4096,3e-6],[65536,7e-6],[67108864,0.012]]},"convert":{"measured":true,"bytes_per_s":1.6e9}}' \
  >"$seeds/plan_files/calibration"
{ printf '\x02'; cat configs/plan/instances.yaml; } >"$seeds/plan_files/instances"
printf '\x03{"version":1,"kind":"sdp-train CTR step profile","model":"deepfm","measured_on":"x","batch_per_rank":1024,"table_rows":117581,"fields":39,"width":33,"dense_floats":400000,"samples":200000,"data_s":0.002,"compute_s":0.02,"update_s":0.004,"update_rows":9000,"record_s":5e-8,"unique":[[1024,9000],[2048,14000],[4096,21000]]}' \
  >"$seeds/plan_files/ctr"
# A model's index (model.safetensors.index.json), as a sharded table's run writes it.
mkdir -p "$seeds/model_index"
printf '{"metadata":{"model":"deepfm","table_shards":"2","total_size":"4096"},"weight_map":{"bias":"model-00001-of-00002.safetensors","table.shard-00001-of-00002":"model-00001-of-00002.safetensors","table.shard-00002-of-00002":"model-00002-of-00002.safetensors"}}' \
  >"$seeds/model_index/index"

run_one() {
  local r="$1"
  mkdir -p "$B/corpus/$r" "$B/findings/$r" "$B/logs"
  local t0
  t0=$(date +%s)
  # -rss_limit_mb / -malloc_limit_mb: a reader that allocates a gigabyte for a small file
  # is a finding, not a slow test. -timeout: so is one input taking 25 s.
  "$B/tests/fuzz/fuzz_$r" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -timeout=25 -print_final_stats=1 -artifact_prefix="$B/findings/$r/" \
    "$B/corpus/$r" "$seeds/$r" >"$B/logs/$r.log" 2>&1 || true
  echo $(($(date +%s) - t0)) >"$B/logs/$r.seconds"
}

before=()
for r in "${readers[@]}"; do
  mkdir -p "$B/findings/$r"
  before+=("$(find "$B/findings/$r" -type f ! -name 'slow-unit-*' | wc -l)")
done
start=$(date +%s)
running=0
for r in "${readers[@]}"; do
  if [ "$running" -ge 2 ]; then wait -n; running=$((running - 1)); fi
  echo "fuzzing $r for ${seconds}s ($(date -u +%H:%M:%S) UTC)"
  run_one "$r" &
  running=$((running + 1))
done
wait

status=0
printf '\n%-12s %12s %8s %9s\n' reader runs seconds findings
i=0
for r in "${readers[@]}"; do
  log="$B/logs/$r.log"
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  secs=$(cat "$B/logs/$r.seconds")
  after=$(find "$B/findings/$r" -type f ! -name 'slow-unit-*' | wc -l)
  new=$((after - ${before[$i]}))
  # A run that ended without its final stats crashed in a way the counts above miss.
  if [ -z "$runs" ] || grep -q 'ERROR: \(AddressSanitizer\|UndefinedBehaviorSanitizer\|libFuzzer\|LeakSanitizer\)\|runtime error:' "$log"; then
    [ "$new" -gt 0 ] || new=1
  fi
  printf '%-12s %12s %8s %9s\n' "$r" "${runs:-?}" "${secs:-?}" "$new"
  [ "$new" -eq 0 ] || status=1
  i=$((i + 1))
done
[ "$status" -eq 0 ] || echo "findings: see $B/findings/ and $B/logs/ (total wall $(( $(date +%s) - start ))s)" >&2
exit "$status"
