#!/usr/bin/env bash
# End-to-end tests of the sdp-train command line: `cli_test.sh BINARY SOURCE_DIR CASE`.
# Each case runs the real binary (bad inputs under `mpirun -np 2`) and asserts the exit
# status, the message, that it is printed once, and that no rank hangs (timeout).
set -u
BIN=$1
SRC=$2
CASE=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1
unset SM_CHANNEL_TRAINING SM_HOSTS SM_CURRENT_HOST SM_CHECKPOINT_DIR SM_MODEL_DIR SM_OUTPUT_DIR SM_OUTPUT_DATA_DIR
HANG_LIMIT=${HANG_LIMIT:-60}

fail() { echo "FAIL [$CASE]: $*"; echo "--- output ---"; cat "$WORK/out" 2>/dev/null; exit 1; }

# run NP ARGS...: runs the binary on NP ranks (NP=0: without mpirun), output in $WORK/out.
# Each run starts in a fresh directory: outputs a job spec names relatively (checkpoints
# with checkpoint.resume: auto above all) never leak from one run or case into another.
RUNS=0
run() {
  local np=$1; shift
  RUNS=$((RUNS + 1))
  mkdir -p "$WORK/run$RUNS"
  if [ "$np" = 0 ]; then
    (cd "$WORK/run$RUNS" && timeout $HANG_LIMIT "$BIN" "$@") >"$WORK/out" 2>&1
  else
    (cd "$WORK/run$RUNS" && timeout $HANG_LIMIT mpirun -np "$np" --oversubscribe "$BIN" "$@") >"$WORK/out" 2>&1
  fi
  STATUS=$?
  [ $STATUS -eq 124 ] && fail "hung: no exit within ${HANG_LIMIT}s"
  return 0
}

# expect_error NP 'pattern' ARGS...: exit 2, one "sdp-train: error:" line matching pattern.
expect_error() {
  local np=$1 pattern=$2; shift 2
  run "$np" "$@"
  [ $STATUS -eq 2 ] || fail "exit status $STATUS, expected 2"
  local count
  count=$(grep -c '^sdp-train: error:' "$WORK/out")
  [ "$count" -eq 1 ] || fail "expected the error printed once, found $count times"
  grep '^sdp-train: error:' "$WORK/out" | grep -qE -- "$pattern" || fail "error does not match /$pattern/"
}

expect_ok() {
  local np=$1; shift
  run "$np" "$@"
  [ $STATUS -eq 0 ] || fail "exit status $STATUS, expected 0"
}

json_check() {  # json_check 'python expression over d' : evaluated on the JSON in $WORK/out
  python3 - "$WORK/out" "$1" <<'PY' || fail "JSON check failed: $1"
import json, re, sys
# mpirun forwards the ranks' stderr apart from their stdout, so a log line may land inside
# the JSON: leave those out.
text = re.sub(r"(?m)^\[sdp-train rank [0-9]+\] .*\n?", "", open(sys.argv[1]).read())
d = json.loads(text[text.index('{'):text.rindex('}') + 1])
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)
PY
}

yaml() { printf '%b' "$2" >"$WORK/$1"; echo "$WORK/$1"; }

# need_data SUBDIR: sets DATA to the real data set directory, or exits 77 (CTest: skipped)
# with the reason. Not to be called in $(...): the exit must end this script.
need_data() {
  DATA="${SDP_DATA_DIR:-$SRC/../shared/data}/$1"
  if [ ! -d "$DATA" ]; then
    echo "SKIP [$CASE]: no data set at $DATA (set SDP_DATA_DIR to a directory with $1/)"
    exit 77
  fi
}

# final_accuracy: the test_accuracy of the last [epoch N] line of the run's output.
final_accuracy() { grep -oE '^\[epoch [0-9]+\].*test_accuracy=[0-9.]+' "$WORK/out" | tail -1 | grep -oE '[0-9.]+$'; }

# expect_accuracy MIN: the final test accuracy is at least MIN.
expect_accuracy() {
  local acc
  acc=$(final_accuracy)
  [ -n "$acc" ] || fail "no test_accuracy line"
  python3 -c "import sys; sys.exit(0 if float('$acc') >= $1 else 1)" || fail "test_accuracy $acc < $1"
  echo "test_accuracy=$acc (>= $1)"
}

# start_local_worker_then_lead: runs the entry point as the worker in the background (its
# "remote" shell runs here, so the worker is localhost), then points OPT_ML at a copy in which
# this host is the leader algo-1. Sets WORKER_PID and START.
start_local_worker_then_lead() {
  printf '#!/bin/sh\nshift; exec sh -c "$*"\n' >"$WORK/agent"; chmod +x "$WORK/agent"
  (cd "$WORK" && SDP_OPT_ML="$OPT_ML" SDP_RUN_DIR="$WORK/run" SDP_RSH_AGENT="$WORK/agent" SDP_WORKER_TIMEOUT_S=60 \
     timeout $HANG_LIMIT bash "$SRC/scripts/sagemaker-entrypoint.sh" train >"$WORK/worker.out" 2>&1; echo $? >"$WORK/worker.status") &
  WORKER_PID=$!
  # The worker clears its signal files when it starts: the leader may only begin once it waits.
  local i
  for i in $(seq 300); do grep -q 'waiting for the leader' "$WORK/worker.out" 2>/dev/null && break; sleep 0.1; done
  grep -q 'waiting for the leader' "$WORK/worker.out" || fail "the worker did not start waiting within 30 s"
  cp -r "$OPT_ML" "$WORK/leader-opt-ml"
  OPT_ML=$WORK/leader-opt-ml
  sed -i 's/"current_host": "localhost"/"current_host": "algo-1"/' "$OPT_ML/input/config/resourceconfig.json"
  START=$(date +%s)
}
# expect_worker_ended STATUS: that worker exited with the leader's STATUS within 15 s of START,
# saying so.
expect_worker_ended() {
  wait "$WORKER_PID"
  [ "$(cat "$WORK/worker.status")" = "$1" ] || { cat "$WORK/worker.out"; fail "worker: exit status $(cat "$WORK/worker.status"), expected $1"; }
  [ $(( $(date +%s) - START )) -le 15 ] || fail "the worker took $(( $(date +%s) - START ))s to end"
  grep -q "^sdp-train: error: the job ended with exit status $1 on the leader algo-1" "$WORK/worker.out" || { cat "$WORK/worker.out"; fail "worker: no clear error"; }
}

# need_matplotlib: sets PLOT_PY to a Python that imports matplotlib (python3, else the system
# /usr/bin/python3 where scripts/install-deps.sh --bench puts it), or exits 77 (skipped).
need_matplotlib() {
  for PLOT_PY in python3 /usr/bin/python3; do
    "$PLOT_PY" -c 'import matplotlib' 2>/dev/null && return 0
  done
  echo "SKIP [$CASE]: matplotlib is not importable by python3 or /usr/bin/python3 (scripts/install-deps.sh --bench installs it)"
  exit 77
}
# is_png FILE: a non-empty PNG (the 8 signature bytes, then more).
is_png() {
  [ -s "$1" ] || fail "no PNG written at $1"
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$1 is not a PNG"
  [ "$(wc -c <"$1")" -gt 1000 ] || fail "$1 is suspiciously small"
}
# A short quickstart job (a few seconds on one thread) with its metrics in $WORK/m.jsonl.
SHORT_TRAIN=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.epochs=2
             --set data.synthetic.train_samples=4096 --set train.log_every=8
             --set output.model_dir="$WORK/model" --set checkpoint.dir="$WORK/ckpt" --set output.metrics="$WORK/m.jsonl")

# SageMaker's /opt/ml as a bring-your-own-container image gets it, under $WORK/opt/ml:
# fake_opt_ml CURRENT_HOST HOST... writes input/config/resourceconfig.json and an empty
# hyperparameters.json. The entry point runs on it with SDP_OPT_ML/SDP_RUN_DIR pointing here.
fake_opt_ml() {
  local current=$1; shift
  OPT_ML=$WORK/opt/ml
  mkdir -p "$OPT_ML/input/config" "$OPT_ML/input/data" "$OPT_ML/output"
  python3 -c 'import json, sys; print(json.dumps({"current_host": sys.argv[1], "hosts": sys.argv[2:], "network_interface_name": "eth0"}))' \
    "$current" "$@" >"$OPT_ML/input/config/resourceconfig.json"
  echo '{}' >"$OPT_ML/input/config/hyperparameters.json"
}
# entrypoint ARGS...: the entry point (`train`) on the fake /opt/ml, output in $WORK/out,
# status in $STATUS; SDP_* variables of the caller pass through.
entrypoint() {
  (cd "$WORK" && SDP_OPT_ML="$OPT_ML" SDP_RUN_DIR="$WORK/run" SDP_TRAIN="$BIN" \
     timeout $HANG_LIMIT bash "$SRC/scripts/sagemaker-entrypoint.sh" train "$@") >"$WORK/out" 2>&1
  STATUS=$?
  [ $STATUS -eq 124 ] && fail "the entry point hung: no exit within ${HANG_LIMIT}s"
  return 0
}


# Checkpoint cases: a short constant-LR quickstart job (the cosine schedule depends on the
# total step count, which the stop-and-resume runs change), one loss line per step.
ckpt_args() {
  CKPT_ARGS=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.log_every=1
             --set train.eval_every_epochs=0 --set optimizer.schedule=constant --set output.metrics=
             --set data.synthetic.train_samples=2048)
}
# The SGD recipe configs/lenet-mnist.yaml had before it moved to LAMB. The MNIST cases that
# test a mechanism (resume, ranks vs accumulation, a dead LR) pin it, so that a change of the
# shipped recipe does not change what they test; the recipe cases use the file as shipped.
LENET_SGD=(--set optimizer.name=sgd --set optimizer.lr=0.05 --set optimizer.nesterov=true
           --set optimizer.weight_decay=5e-4 --set optimizer.eps=1e-8 --set optimizer.lr_scaling=linear
           --set optimizer.reference_batch=0 --set optimizer.warmup_epochs=0)
# step_losses: the "[step N] ... train_loss=X" pairs of the run's output.
step_losses() { grep -oE '^\[step [0-9]+\].*train_loss=[0-9.e+-]+' "$WORK/out" | sed -E 's/ epoch=[0-9]+//'; }
# flip_4k_in_the_middle FILE: XORs 4 KB in the middle of FILE with 0xFF (a disk or copy error
# that keeps the file's size and header).
flip_4k_in_the_middle() {
  python3 - "$1" <<'PY' || fail "cannot damage $1"
import sys
data = bytearray(open(sys.argv[1], "rb").read())
mid = len(data) // 2
data[mid:mid + 4096] = bytes(b ^ 0xFF for b in data[mid:mid + 4096])
open(sys.argv[1], "wb").write(data)
PY
}
# same_tensors A B: the two safetensors files hold the same tensors, bit for bit (the
# metadata differs: step counts, the job spec).
same_tensors() {
  python3 "$SRC/scripts/load_checkpoint.py" --compare "$1" "$2" || fail "tensors of $1 and $2 differ"
}
# close_curves A B COUNT MAX_REL: the train_loss values of two step_losses files, COUNT of
# each, differ by at most MAX_REL relative (to max(|loss|, 1e-3)); prints the worst.
close_curves() {
  python3 - "$1" "$2" "$3" "$4" <<'PY' || fail "loss curves differ"
import re, sys
curves = [[float(x) for x in re.findall(r"train_loss=([0-9.e+-]+)", open(f).read())] for f in sys.argv[1:3]]
assert len(curves[0]) == len(curves[1]) == int(sys.argv[3]), [len(c) for c in curves]
worst = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(*curves))
print(f"max relative loss difference over {sys.argv[3]} steps: {worst:.2e} (allowed {sys.argv[4]})")
assert worst <= float(sys.argv[4]), worst
assert curves[0][-1] < 0.5 * curves[0][0], "did not learn"
PY
}
# resume_bitwise NP [ARGS...]: 40 steps at once vs 15 steps, then the same job resumed to 40.
# same_loss_curves A B STEPS: two runs' [step] lines hold STEPS losses each, equal to within
# 1e-3 relative (float rounding of a different split of the batch), and the first run learned.
same_loss_curves() {
  python3 - "$1" "$2" "$3" <<'PY' || fail "loss curves differ"
import re, sys
curves = [[float(x) for x in re.findall(r"train_loss=([0-9.e+-]+)", open(f).read())] for f in sys.argv[1:3]]
steps = int(sys.argv[3])
assert len(curves[0]) == len(curves[1]) == steps, [len(c) for c in curves]
worst = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(*curves))
print(f"max relative loss difference over {steps} steps: {worst:.2e}")
assert worst < 1e-3, worst
assert curves[0][-1] < 0.5 * curves[0][0], "did not learn"
PY
}

# need_gpus N: skips the case (exit 77, the reason printed) unless this sdp-train has the
# CUDA backend and the machine N GPUs.
need_gpus() {
  "$BIN" --version | grep -q 'CUDA backend: built' || { echo "SKIP: built without the CUDA backend"; exit 77; }
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [ "${gpus:-0}" -ge "$1" ] || { echo "SKIP: no CUDA device (needs $1 GPU(s), found ${gpus:-0})"; exit 77; }
}

# amp_overflow_run NP RANK STEP STEPS [ARGS...]: the default job in amp-fp16 on the GPU with
# rank RANK's gradients forced to overflow at step STEP; the run goes on to STEPS, the step is
# reported and counted once, and the plan says the gradients cross in fp16
# (distributed.compression: auto).
amp_overflow_run() {
  local np=$1 rank=$2 step=$3 steps=$4; shift 4
  SDP_TEST_OVERFLOW_RANK=$rank SDP_TEST_OVERFLOW_STEP=$step expect_ok "$np" --config "$SRC/configs/quickstart.yaml" \
    --set device=cuda --set precision=amp-fp16 --set train.max_steps="$steps" --set output.model_dir="$WORK/m" "$@"
  grep -qE "step $step: the f16 gradients overflowed" "$WORK/out" || fail "no overflow line for step $step"
  grep -qE "^\[done\] steps=$steps .*overflow_skips=1" "$WORK/out" || fail "[done] does not count the overflow skip"
  grep -q 'compression fp16 (auto)' "$WORK/out" || fail "the plan does not say the gradients go in fp16"
}

resume_bitwise() {
  local np=$1; shift
  ckpt_args
  CKPT_ARGS+=("$@")
  expect_ok "$np" "${CKPT_ARGS[@]}" --set train.max_steps=40 --set checkpoint.dir="$WORK/ckA" --set output.model_dir="$WORK/mA"
  step_losses >"$WORK/once.txt"
  expect_ok "$np" "${CKPT_ARGS[@]}" --set train.max_steps=15 --set checkpoint.dir="$WORK/ckB" --set output.model_dir="$WORK/mB"
  step_losses >"$WORK/resumed.txt"
  [ -f "$WORK/ckB/ckpt-000000015.safetensors" ] || fail "no checkpoint at step 15"
  expect_ok "$np" "${CKPT_ARGS[@]}" --set train.max_steps=40 --set checkpoint.dir="$WORK/ckB" --set output.model_dir="$WORK/mB"
  grep -q "resuming from $WORK/ckB/ckpt-000000015.safetensors: step 15" "$WORK/out" || fail "did not resume from step 15"
  step_losses >>"$WORK/resumed.txt"
  [ "$(wc -l <"$WORK/once.txt")" -eq 40 ] || fail "expected 40 loss lines"
  diff "$WORK/once.txt" "$WORK/resumed.txt" || fail "per-step losses differ after the resume"
  same_tensors "$WORK/mA/model.safetensors" "$WORK/mB/model.safetensors"
  same_tensors "$WORK/ckA/ckpt-000000040.safetensors" "$WORK/ckB/ckpt-000000040.safetensors"
}


# signal_run NP rank|mpirun ARGS...: starts the job on NP ranks, waits for its first [step]
# line, sends $SIGNAL (default TERM) to rank 1's process (rank) or to mpirun, and waits. Only
# processes this script started are signalled (mpirun's own children).
signal_run() {
  local np=$1 target=$2 sig=${SIGNAL:-TERM}; shift 2
  RUNS=$((RUNS + 1)); mkdir -p "$WORK/run$RUNS"
  (cd "$WORK/run$RUNS" && exec mpirun -np "$np" --oversubscribe "$BIN" "$@") >"$WORK/out" 2>&1 &
  local mp=$! i
  for i in $(seq 300); do grep -q '^\[step' "$WORK/out" && break; sleep 0.1; done
  grep -q '^\[step' "$WORK/out" || { kill -KILL $mp; fail "no [step] line within 30 s"; }
  if [ "$target" = rank ]; then
    local ranks=($(pgrep -P $mp))
    [ ${#ranks[@]} -eq "$np" ] || { kill -KILL $mp; fail "expected $np rank processes under mpirun, found ${ranks[*]}"; }
    kill -"$sig" "${ranks[1]}"
  else
    kill -"$sig" $mp
  fi
  SIGNALLED_AT=$(date +%s)
  local waited=0
  while kill -0 $mp 2>/dev/null && [ $waited -lt $((HANG_LIMIT * 10)) ]; do sleep 0.1; waited=$((waited + 1)); done
  kill -0 $mp 2>/dev/null && { kill -KILL $mp; fail "hung after SIGTERM"; }
  wait $mp
  STATUS=$?
}
# check_interrupted: the run stopped at a step with a checkpoint of that step; sets STOPPED.
check_interrupted() {
  STOPPED=$(grep -oE 'interrupted .*stopped at step [0-9]+' "$WORK/out" | grep -oE '[0-9]+$')
  [ -n "$STOPPED" ] || fail "no 'interrupted ... stopped at step N' line"
  local file
  file=$(printf '%s/ck/ckpt-%09d.safetensors' "$WORK" "$STOPPED")
  [ -f "$file" ] || fail "no checkpoint of step $STOPPED"
  grep -q '^sdp-train: error' "$WORK/out" && fail "an error was printed"
  [ "$STOPPED" -lt 3000 ] || fail "the job ended before the signal"
  echo "stopped at step $STOPPED with $file"
}

# run_tty NP ARGS...: like run, under a pseudo-terminal (util-linux `script`; skipped, exit
# 77, where there is none), as an interactive user sees it: output in $WORK/out, raw.
run_tty() {
  command -v script >/dev/null || { echo "SKIP [$CASE]: no 'script' (util-linux) for a pseudo-terminal"; exit 77; }
  local np=$1; shift
  local cmd
  if [ "$np" = 0 ]; then cmd=$(printf '%q ' "$BIN" "$@"); else cmd=$(printf '%q ' mpirun -np "$np" --oversubscribe "$BIN" "$@"); fi
  RUNS=$((RUNS + 1))
  mkdir -p "$WORK/run$RUNS"
  (cd "$WORK/run$RUNS" && TERM=xterm timeout $HANG_LIMIT script -qfec "$cmd" /dev/null) >"$WORK/out" 2>&1 </dev/null
  STATUS=$?
  [ $STATUS -eq 124 ] && fail "hung: no exit within ${HANG_LIMIT}s"
  return 0
}

# check_tty_lines MIN_BARS: the terminal output in $WORK/out drew the progress bar at least
# MIN_BARS times, and every line as the terminal shows it (what follows the last \r, the
# erase sequence dropped) is whole: the metric lines match their form, no bar is left.
check_tty_lines() {
  python3 - "$WORK/out" "$1" <<'PY' || fail "progress bar or lines not as expected"
import re, sys
raw = open(sys.argv[1], 'rb').read().decode('utf-8', 'replace').replace('\r\n', '\n')
bars = len(re.findall(r'\repoch \d+/\d+ \[[#-]+\] \d+/\d+.*?ETA [0-9:-]+\x1b\[K', raw))
if bars < int(sys.argv[2]):
    sys.exit(f"{bars} progress bar draws, expected at least {sys.argv[2]}")
visible = [line.split('\r')[-1].replace('\x1b[K', '') for line in raw.split('\n')]
metric = re.compile(r'^\[(step \d+|epoch \d+|done|start)\]( [a-z_]+=[^ ]+)+$')
bad = [l for l in visible if 'ETA' in l or (l.startswith('[') and not l.startswith('[sdp-train') and not metric.match(l))]
if bad:
    sys.exit(f"broken lines: {bad[:3]}")
if not any(l.startswith('[done] ') for l in visible):
    sys.exit("no [done] line")
if not visible[-1] == '' and not visible[-1].startswith('['):
    sys.exit(f"output ends with {visible[-1]!r}")
PY
}

# The cases, one function each (case_<name>), by area in cases/*.sh.
for area_file in "$(dirname "${BASH_SOURCE[0]}")"/cases/*.sh; do
  # shellcheck source=/dev/null
  source "$area_file"
done
declare -F "case_$CASE" >/dev/null || { echo "unknown case $CASE"; exit 1; }
"case_$CASE"
echo "PASS [$CASE]"
