#!/usr/bin/env bash
# sdp-train under a real Slurm (scripts/simcluster.sh slurm: munged, slurmctld and one slurmd
# per simulated host), submitted with the job script users copy, scripts/slurm-train.sbatch:
# 2 hosts x 2 ranks, `srun --mpi=pmix`.
#   slurm_test.sh BUILD_DIR SOURCE_DIR CASE
# Cases:
#   quickstart    trains configs/quickstart.yaml to its accuracy; the plan shows 2 nodes x 2
#                 ranks and the Slurm job
#   lenet_mnist   configs/lenet-mnist.yaml on real MNIST to >= 99.0 % (skipped without it)
#   scancel       scancel mid-run: CANCELLED, with a checkpoint of the step it stopped at;
#                 the same script submitted again resumes, and the final model is bitwise
#                 the one of an uninterrupted run
#   requeue       scontrol requeue mid-run: Slurm starts the job again by itself, which
#                 resumes; final model bitwise the uninterrupted one
#   time_limit    the script's time-limit warning (USR1 to the batch shell, as
#                 --signal=B:USR1@120 sends it): the ranks checkpoint, the script requeues
#                 the job, which finishes; final model bitwise the uninterrupted one
#   link_cut      host 2's link cut for good mid-run (2 hosts x 1 task): exit code 3 within
#                 timeout_s + 10 s (sdp-launch ends srun), host 2 named, checkpoints intact
#   mpirun        mpirun inside an sbatch allocation (Open MPI launches through Slurm)
# Exits 77 (skipped) without root, namespaces or Slurm (scripts/install-deps.sh installs it).
# Uses its own cluster (prefix sdps, subnet 10.215.0, slurmctld port 6827), removed at exit.
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CASE=$3
export SIMCLUSTER_PREFIX=sdps SIMCLUSTER_NET=10.215.0 SIMCLUSTER_SLURMCTLD_PORT=6827
SIM="$SRC/scripts/simcluster.sh"
WORK=$(mktemp -d)
trap '"$SIM" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
unset SM_CHANNEL_TRAINING SM_HOSTS SM_CURRENT_HOST SM_CHECKPOINT_DIR SM_MODEL_DIR
# The job inherits the submitter's environment: sdp-train from this build.
export SDP_TRAIN="$BUILD/sdp-train"
JOB_SCRIPT="$SRC/scripts/slurm-train.sbatch"

fail() {
  echo "FAIL [$CASE]: $*"
  for f in "$WORK"/run/*.out; do [ -f "$f" ] && { echo "--- $f ---"; tail -n 40 "$f"; }; done
  echo "--- squeue ---"; squeue 2>&1
  exit 1
}

"$SIM" up 2 --slots 2 >"$WORK/up" 2>&1
status=$?
if [ $status -eq 77 ]; then cat "$WORK/up"; exit 77; fi
[ $status -eq 0 ] || { cat "$WORK/up"; fail "simcluster up failed"; }
"$SIM" slurm >"$WORK/slurm" 2>&1
status=$?
if [ $status -eq 77 ]; then cat "$WORK/slurm"; exit 77; fi
[ $status -eq 0 ] || { cat "$WORK/slurm"; fail "simcluster slurm failed"; }
# shellcheck disable=SC1090
. "$("$SIM" env-file)"
mkdir -p "$WORK/run"
cd "$WORK/run" || exit 1

# submit SBATCH_OPTIONS... -- SDP_TRAIN_ARGS...: prints the job id. 2 nodes x 2 tasks of 1 CPU.
submit() {
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  sbatch --parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --output="job-%j.out" "${opts[@]}" \
    "$JOB_SCRIPT" "$@" || fail "sbatch refused the job"
}
state() { scontrol show job "$1" 2>/dev/null | grep -oP 'JobState=\K\S+'; }
# wait_state JOB STATE SECONDS
wait_state() {
  local t=0
  while [ "$(state "$1")" != "$2" ]; do
    sleep 1; t=$((t + 1))
    [ $t -le "$3" ] || fail "job $1 not $2 within $3 s (state $(state "$1"))"
  done
}
# wait_line FILE REGEX SECONDS: until the job's log has a line matching REGEX.
wait_line() {
  local t=0
  until grep -qE "$2" "$1" 2>/dev/null; do
    sleep 0.5; t=$((t + 1))
    [ $t -le $(($3 * 2)) ] || fail "no line /$2/ in $1 within $3 s"
  done
}
# A requeued job waits cred_expire seconds (10 on the simulated cluster) and starts again.
wait_requeued() {
  wait_state "$1" PENDING 60
}

# 12 epochs of quickstart (384 steps): long enough to interrupt at step ~100.
LONG=(--set train.epochs=12 --set train.log_every=20 --set output.metrics=)
# reference: the uninterrupted run, MODEL_REF its model directory.
reference() {
  local j
  j=$(submit -- "$SRC/configs/quickstart.yaml" "${LONG[@]}" --set checkpoint.dir=ck-ref --set output.model_dir=model-ref)
  wait_state "$j" COMPLETED 180
  MODEL_REF=$WORK/run/model-ref
  [ -f "$MODEL_REF/model.safetensors" ] || fail "the reference run wrote no model"
}
# expect_same_model DIR: bitwise the reference's model (its tensors: the metadata names paths).
expect_same_model() {
  python3 "$SRC/scripts/load_checkpoint.py" --compare "$1/model.safetensors" "$MODEL_REF/model.safetensors" ||
    fail "the resumed model differs from the uninterrupted run's"
}
INTERRUPTED=(--set checkpoint.dir=ck --set output.model_dir=model)
# interrupted_run: the reference, then the same job with its own checkpoint.dir, submitted and
# waited for up to step 100; JOB is its id, LOG its log.
interrupted_run() {
  reference
  JOB=$(submit -- "$SRC/configs/quickstart.yaml" "${LONG[@]}" "${INTERRUPTED[@]}")
  LOG=job-$JOB.out
  wait_line "$LOG" '^\[step 100\]' 120
}
# stopped_step LOG: the step an interrupted run stopped at, with its checkpoint.
stopped_step() { grep -oE 'stopped at step [0-9]+ with checkpoint' "$1" | grep -oE '[0-9]+' | head -1; }
# expect_resumed LOG STEP: the run in LOG resumed STEP's checkpoint and ended with the model of
# the uninterrupted run.
expect_resumed() {
  grep -q "resuming from ck/ckpt-$(printf %09d "$2").safetensors: step $2" "$1" || fail "$1: no resume of step $2"
  expect_same_model model
}

case "$CASE" in
  quickstart)
    j=$(submit -- "$SRC/configs/quickstart.yaml" --set output.metrics=)
    wait_state "$j" COMPLETED 120
    log=job-$j.out
    grep -q "4 rank(s) on 2 node(s) x 2 rank(s) per node" "$log" || fail "not 2 nodes x 2 ranks"
    grep -qE "slurm +: job $j step 0 on sdps-h\[1-2\], 1 CPU\(s\) per task" "$log" || fail "the plan does not name the Slurm job"
    [ "$(grep -cE '^    [0-3] +[01] +[01] +cpu +1 +sdps-h[12]$' "$log")" -eq 4 ] || fail "ranks table: not 1 thread (SLURM_CPUS_PER_TASK) on both hosts"
    acc=$(grep -oE '^\[done\].*test_accuracy=[0-9.]+' "$log" | grep -oE '[0-9.]+$')
    echo "quickstart under sbatch: test_accuracy=$acc"
    python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= 0.95 else 1)" || fail "accuracy ${acc:-none} < 0.95" ;;
  lenet_mnist)
    mnist="${SDP_DATA_DIR:-$SRC/../shared/data}/mnist"
    [ -d "$mnist" ] || { echo "SKIP [$CASE]: no data set at $mnist (set SDP_DATA_DIR to a directory with mnist/)"; exit 77; }
    j=$(submit -- "$SRC/configs/lenet-mnist.yaml" --set data.train="$mnist" --set data.test="$mnist" \
      --set train.log_every=200 --set output.metrics=)
    wait_state "$j" COMPLETED 900
    acc=$(grep -oE '^\[done\].*test_accuracy=[0-9.]+' "job-$j.out" | grep -oE '[0-9.]+$')
    grep -oE '^\[(done|epoch [0-9]+)\].*' "job-$j.out"
    echo "lenet-mnist under sbatch, 2 hosts x 2 ranks: test_accuracy=$acc"
    python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= 0.99 else 1)" || fail "accuracy ${acc:-none} < 0.99" ;;
  scancel)
    interrupted_run
    scancel "$JOB"
    wait_state "$JOB" CANCELLED 60
    # Every rank stopped, and rank 0 wrote the checkpoint of that step before it did.
    wait_line "$LOG" 'interrupted .*stopped at step [0-9]+ with checkpoint' 45
    stopped=$(stopped_step "$LOG")
    [ -f "ck/ckpt-$(printf %09d "$stopped").safetensors" ] || fail "no checkpoint of step $stopped in ck/"
    [ -f model/model.safetensors ] && fail "the cancelled run wrote a final model"
    j2=$(submit -- "$SRC/configs/quickstart.yaml" "${LONG[@]}" "${INTERRUPTED[@]}")
    wait_state "$j2" COMPLETED 180
    echo "scancel at step $stopped, submitted again"
    expect_resumed "job-$j2.out" "$stopped" ;;
  requeue)
    interrupted_run
    scontrol requeue "$JOB" || fail "scontrol requeue refused"
    wait_requeued "$JOB"
    wait_state "$JOB" COMPLETED 180
    stopped=$(stopped_step "$LOG")
    [ -n "$stopped" ] || fail "the requeued run did not stop with a checkpoint"
    grep -q "^\[slurm\] job $JOB (restart 1)" "$LOG" || fail "no restart 1 in the job's log"
    grep -q "requeued 1 time(s)" "$LOG" || fail "the plan does not say the job was requeued"
    echo "requeued at step $stopped, restarted"
    expect_resumed "$LOG" "$stopped" ;;
  time_limit)
    interrupted_run
    # What --signal=B:USR1@120 does 2 minutes before the time limit.
    scancel --batch --signal=USR1 "$JOB" || fail "scancel --batch --signal=USR1 refused"
    wait_line "$LOG" 'time limit near' 30
    wait_requeued "$JOB"
    wait_state "$JOB" COMPLETED 180
    stopped=$(stopped_step "$LOG")
    [ -n "$stopped" ] || fail "the warned run did not stop with a checkpoint"
    echo "time-limit warning at step $stopped, requeued by the script"
    expect_resumed "$LOG" "$stopped" ;;
  link_cut)
    # Host 2's link cut for good after the first checkpoint (timeout_s 5): the watchdog ends
    # the job and sdp-launch ends srun 5 s later (srun alone waits KillWait, 30 s here), so the
    # job ends with exit code 3 within timeout_s + 10 s; its checkpoints are intact.
    j=$(submit --ntasks-per-node=1 -- "$SRC/configs/quickstart.yaml" --set train.epochs=100000 --set train.max_steps=1000000 \
      --set distributed.timeout_s=5 --set checkpoint.every_steps=10 --set checkpoint.dir=ck --set output.model_dir=model \
      --set output.metrics= --set train.log_every=1000)
    wait_state "$j" RUNNING 60
    # Any checkpoint: with keep 3 and steps of a few ms, step 10's may be rotated away unseen.
    for _ in $(seq 1 600); do compgen -G 'ck/ckpt-*.safetensors' >/dev/null && break; sleep 0.1; done
    compgen -G 'ck/ckpt-*.safetensors' >/dev/null || fail "no first checkpoint within 60 s"
    "$SIM" link 2 down >/dev/null
    cut=$SECONDS
    while [ "$(state "$j")" = RUNNING ] && [ $((SECONDS - cut)) -le 60 ]; do sleep 0.5; done
    ended=$((SECONDS - cut))
    "$SIM" link 2 up >/dev/null
    code=$(scontrol show job "$j" | grep -oP ' ExitCode=\K\S+')
    echo "link cut under srun: the job left RUNNING $ended s later, ExitCode=$code"
    [ "$code" = "3:0" ] || fail "ExitCode $code, expected 3:0 (the watchdog's)"
    [ $ended -le 15 ] || fail "the job ended $ended s after the cut, more than timeout_s + 10 s"
    grep -q "(sdps-h2: rank(s) 1) cannot be inspected from here" "job-$j.out" || fail "the error does not name host 2 and its rank"
    grep -q "^sdp-launch: rank 0 ended the job (MPI_Abort, exit status 3) and srun is still running" "job-$j.out" ||
      fail "sdp-launch did not end srun"
    newest=$(ls ck/ckpt-*.safetensors | tail -1)
    # Loaded as a resume would: every checksum verified.
    "$SDP_TRAIN" evaluate --config "$SRC/configs/quickstart.yaml" --set threads=1 --model "$newest" >eval.out 2>&1 ||
      fail "the newest checkpoint $newest does not load: $(tail -2 eval.out)" ;;
  mpirun)
    cat >mpirun.sbatch <<EOS
#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun --mca btl tcp,vader,self --mca btl_tcp_if_include $SIMCLUSTER_NET.0/24 --mca oob_tcp_if_include $SIMCLUSTER_NET.0/24 "$SDP_TRAIN" train --config "$SRC/configs/quickstart.yaml" --set output.metrics= --set train.max_steps=20
EOS
    j=$(sbatch --parsable --nodes=2 --ntasks-per-node=2 --output="job-%j.out" mpirun.sbatch) || fail "sbatch refused"
    wait_state "$j" COMPLETED 120
    grep -q "4 rank(s) on 2 node(s) x 2 rank(s) per node" "job-$j.out" || fail "mpirun in the allocation: not 2 nodes x 2 ranks"
    grep -q '^\[done\] steps=20 ' "job-$j.out" || fail "mpirun in the allocation did not train" ;;
  *) echo "unknown case $CASE"; exit 2 ;;
esac
echo "PASS [$CASE]"
