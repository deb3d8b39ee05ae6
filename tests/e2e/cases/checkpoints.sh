# shellcheck shell=bash
# Checkpoints: bitwise resume, interruptions, damaged and incompatible files, the pre-flight check of output locations.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_ckpt_resume_bitwise_np1() {
    resume_bitwise 0
}

case_ckpt_resume_bitwise_np2() {
    resume_bitwise 2
}

case_ckpt_resume_bitwise_lars() {
    # LARS's momentum buffers and LAMB's moments + update count come back: the same bits.
    resume_bitwise 0 --set optimizer.name=lars --set optimizer.lr=0.5 --set optimizer.trust_coefficient=0.01 \
      --set optimizer.weight_decay=5e-4
    grep -aq '"optimizer\.[^"]*\.momentum_buffer"' "$WORK/ckB/ckpt-000000040.safetensors" || fail "no momentum buffers in the checkpoint"
}

case_ckpt_resume_bitwise_lamb() {
    resume_bitwise 0 --set optimizer.name=lamb --set optimizer.lr=0.005 --set optimizer.weight_decay=0.01
    grep -aq '"optimizer\.[^"]*\.exp_avg_sq"' "$WORK/ckB/ckpt-000000040.safetensors" || fail "no exp_avg_sq in the checkpoint"
}

case_ckpt_resume_bitwise_batchnorm_np2() {
    # ResNet-20: each rank's own BatchNorm running statistics come back too (final model).
    resume_bitwise 2 --set model.name=resnet20 --set data.synthetic.channels=3 --set data.synthetic.height=16 \
      --set data.synthetic.width=16 --set data.batch_size=16
}

case_ckpt_resume_bitwise_accumulate() {
    resume_bitwise 0 --set train.accumulate_steps=2
}

case_ckpt_resume_bitwise_accumulate_np2() {
    # 2 ranks x 3 micro-batches: 5 steps per epoch of 2048 samples, so 8 epochs for 40 steps.
    resume_bitwise 2 --set train.accumulate_steps=3 --set train.epochs=8
}

case_ckpt_resume_ranks_to_accumulation() {
    # 2 ranks stop at step 15; 1 rank with 2 micro-batches (the same global batch of 128, the
    # same samples per step) continues: bitwise the uninterrupted 2-rank run (see
    # accumulate_matches_ranks), so the resume is exact across the switch.
    ckpt_args
    expect_ok 2 "${CKPT_ARGS[@]}" --set train.max_steps=40 --set checkpoint.dir="$WORK/ckA" --set output.model_dir="$WORK/mA"
    step_losses >"$WORK/once.txt"
    expect_ok 2 "${CKPT_ARGS[@]}" --set train.max_steps=15 --set checkpoint.dir="$WORK/ckB" --set output.model_dir="$WORK/mB"
    step_losses >"$WORK/resumed.txt"
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=40 --set train.accumulate_steps=2 --set checkpoint.dir="$WORK/ckB" --set output.model_dir="$WORK/mB"
    grep -q 'world size 2 -> 1, accumulate_steps 1 -> 2, global batch 128 -> 128, steps per epoch 16 -> 16, peak LR 0.04 -> 0.04, step 15 -> 15' "$WORK/out" || fail "changes not logged"
    step_losses >>"$WORK/resumed.txt"
    [ "$(wc -l <"$WORK/once.txt")" -eq 40 ] || fail "expected 40 loss lines"
    diff "$WORK/once.txt" "$WORK/resumed.txt" || fail "per-step losses differ after the resume"
    same_tensors "$WORK/mA/model.safetensors" "$WORK/mB/model.safetensors"
}

case_ckpt_resume_other_world_size() {
    # 2 ranks stop at step 10 (global batch 128 = 1280 samples); 1 rank continues from the
    # same sample cursor with batch 64: step 20 of its count, 44 steps to go to 64.
    ckpt_args
    expect_ok 2 "${CKPT_ARGS[@]}" --set train.max_steps=10 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=64 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    grep -q 'resuming from .*ckpt-000000010.safetensors: step 10, epoch 1 at sample 1280' "$WORK/out" || fail "no resume line"
    grep -q 'world size 2 -> 1, global batch 128 -> 64, steps per epoch 16 -> 32, peak LR 0.04 -> 0.02, step 10 -> 20' "$WORK/out" || fail "changes not logged"
    [ "$(step_losses | wc -l)" -eq 44 ] || fail "expected 44 steps after the resume"
    grep -q '^\[step 64\]' "$WORK/out" || fail "did not reach step 64"
}

case_ckpt_incompatible_model() {
    ckpt_args
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=3 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_error 2 "ckpt-000000003.safetensors: cannot resume from this checkpoint: .*other parameter names or shapes.*checkpoint.resume: never" \
      "${CKPT_ARGS[@]}" --set model.hidden=[32] --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_error 2 "cannot resume from this checkpoint: it holds the state of optimizer 'sgd' but key 'optimizer.name' is 'adam'" \
      "${CKPT_ARGS[@]}" --set optimizer.name=adam --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    # Another input shape is another model too (the first layer's weights): still exit 2.
    expect_error 2 "ckpt-000000003.safetensors: cannot resume from this checkpoint: .*other parameter names or shapes" \
      "${CKPT_ARGS[@]}" --set data.synthetic.height=14 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_ok 0 "${CKPT_ARGS[@]}" --set model.hidden=[32] --set checkpoint.dir="$WORK/ck" --set checkpoint.resume=never \
      --set train.max_steps=2 --set output.model_dir="$WORK/m"
}

case_ckpt_bad_loss_scale() {
    # A checkpoint whose metadata holds no usable loss scale (amp-fp16's): rank 0 refuses it
    # before anything is broadcast, one error naming the file and the key, exit 2.
    ckpt_args
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=3 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    python3 - "$WORK/ck/ckpt-000000003.safetensors" <<'PY' || fail "could not rewrite the metadata"
import json, struct, sys
path = sys.argv[1]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header["__metadata__"]["loss_scale"] = "banana"
header["__metadata__"]["loss_scale_good_steps"] = "0"
del header["__metadata__"]["crc32c"]  # edited by hand: as a file without checksums, loaded unverified
text = json.dumps(header).encode()
open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
    expect_error 2 "ckpt-000000003.safetensors: checkpoint metadata 'loss_scale' is not a loss scale \(a finite number >= 1\): 'banana'" \
      "${CKPT_ARGS[@]}" --set train.max_steps=5 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    grep -q "note: .*ckpt-000000003.safetensors carries no checksums (written before sdp-train checked them): loaded unverified" "$WORK/out" ||
      fail "no note that the file carries no checksums"
}

case_ckpt_skip_corrupt() {
    # The newest checkpoint is truncated: skipped with a warning naming it, the previous used.
    ckpt_args
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=20 --set checkpoint.every_steps=10 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    truncate -s -100 "$WORK/ck/ckpt-000000020.safetensors"
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=25 --set checkpoint.every_steps=10 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    grep -qE 'warning: skipping checkpoint .*ckpt-000000020.safetensors' "$WORK/out" || fail "no warning naming the damaged file"
    grep -q 'resuming from .*ckpt-000000010.safetensors: step 10' "$WORK/out" || fail "did not fall back to step 10"
    [ "$(step_losses | wc -l)" -eq 15 ] || fail "expected 15 steps after the resume"
    expect_error 2 "key 'checkpoint.resume': .*ckpt-000000099.safetensors" "${CKPT_ARGS[@]}" \
      --set checkpoint.resume="$WORK/ck/ckpt-000000099.safetensors" --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
}

case_ckpt_bit_flip() {
    # The newest checkpoint has 4 KB XORed in its middle (size and header intact): skipped with a
    # warning naming the file and the tensor, the run resumes from the one before and ends as a
    # run never interrupted (same losses, same test accuracy). When every checkpoint is damaged
    # the job stops, exit 2, and never starts afresh over them.
    ckpt_args
    local job=("${CKPT_ARGS[@]}" --set train.eval_every_epochs=1 --set checkpoint.every_steps=10 --set checkpoint.keep_last=3)
    expect_ok 0 "${job[@]}" --set train.max_steps=40 --set checkpoint.dir="$WORK/ckA" --set output.model_dir="$WORK/mA"
    step_losses >"$WORK/once.txt"
    local undisturbed
    undisturbed=$(final_accuracy)
    [ -n "$undisturbed" ] || fail "the undisturbed run printed no test accuracy"
    expect_ok 0 "${job[@]}" --set train.max_steps=30 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    step_losses | head -20 >"$WORK/resumed.txt"
    flip_4k_in_the_middle "$WORK/ck/ckpt-000000030.safetensors"
    expect_ok 0 "${job[@]}" --set train.max_steps=40 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    grep -qE "warning: skipping checkpoint .*ckpt-000000030.safetensors: tensor '[^']+' is damaged" "$WORK/out" ||
      fail "no warning naming the damaged file and tensor"
    grep -q 'resuming from .*ckpt-000000020.safetensors: step 20' "$WORK/out" || fail "did not fall back to step 20"
    step_losses >>"$WORK/resumed.txt"
    cmp -s "$WORK/once.txt" "$WORK/resumed.txt" || fail "the resumed losses differ from the undisturbed run's: $(diff "$WORK/once.txt" "$WORK/resumed.txt" | head -4)"
    [ "$(final_accuracy)" = "$undisturbed" ] || fail "test accuracy $(final_accuracy), undisturbed run $undisturbed"
    for f in "$WORK"/ck/ckpt-*.safetensors; do flip_4k_in_the_middle "$f"; done
    expect_error 2 "key 'checkpoint.dir': none of the 3 checkpoints in '.*/ck' can be resumed" \
      "${job[@]}" --set train.max_steps=50 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    [ "$(ls "$WORK/ck" | wc -l)" -eq 3 ] || fail "the damaged checkpoints were touched: $(ls "$WORK/ck")"
}

case_ckpt_python_loader() {
    python3 -c 'import numpy' 2>/dev/null || { echo "SKIP [$CASE]: NumPy is not installed (pip install numpy)"; exit 77; }
    ckpt_args
    expect_ok 0 "${CKPT_ARGS[@]}" --set train.max_steps=5 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    python3 - "$SRC/scripts" "$WORK/ck/ckpt-000000005.safetensors" <<'PY' || fail "load_checkpoint.py failed"
import sys
sys.path.insert(0, sys.argv[1])
from load_checkpoint import load_checkpoint
t, meta = load_checkpoint(sys.argv[2])
assert meta["format"] == "sdp-train checkpoint" and meta["step"] == "5" and meta["model"] == "mlp", meta
assert meta["cursor_epoch"] == "0" and meta["cursor_offset"] == "320" and meta["optimizer_steps"] == "5", meta
w = [k for k in t if not k.startswith("optimizer.") and k.endswith(".weight")][0]
assert t["optimizer." + w + ".momentum_buffer"].shape == t[w].shape
assert "mlp" in meta["job_spec"]
print(len(t), "arrays", sorted(t)[:3])
PY
}

case_ckpt_sigterm_rank() {
    # SIGTERM to one rank: all ranks agree at the next step, rank 0 writes the checkpoint,
    # every rank exits 0 (so mpirun does); the same job restarted ends at the same step.
    ckpt_args
    job=("${CKPT_ARGS[@]}" --set train.log_every=50 --set train.max_steps=3000 --set train.epochs=1000
         --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m")
    signal_run 2 rank "${job[@]}"
    [ $STATUS -eq 0 ] || fail "exit status $STATUS after SIGTERM to rank 1, expected 0"
    check_interrupted
    expect_ok 2 "${job[@]}"
    grep -q "resuming from .*ckpt-0*$STOPPED.safetensors: step $STOPPED" "$WORK/out" || fail "did not resume from step $STOPPED"
    grep -q '^\[done\] steps=3000 ' "$WORK/out" || fail "the restarted job did not end at step 3000"
}

case_ckpt_sigterm_mpirun() {
    # SIGTERM to mpirun: Open MPI 4.1 passes it on to the ranks one second later and
    # SIGKILLs them one more second later (odls_base_sigkill_timeout); mpirun itself exits 1
    # whatever the ranks do. The ranks stop at the next step with a checkpoint in that second.
    ckpt_args
    job=("${CKPT_ARGS[@]}" --set train.log_every=50 --set train.max_steps=3000 --set train.epochs=1000
         --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m")
    signal_run 2 mpirun "${job[@]}"
    check_interrupted
    expect_ok 2 "${job[@]}"
    grep -q '^\[done\] steps=3000 ' "$WORK/out" || fail "the restarted job did not end at step 3000"
}

case_ckpt_kill9_rank() {
    # kill -9 of one rank: the job ends promptly and non-zero; the newest checkpoint loads.
    ckpt_args
    job=("${CKPT_ARGS[@]}" --set train.log_every=50 --set train.max_steps=3000 --set train.epochs=1000
         --set checkpoint.every_steps=20 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m")
    SIGNAL=KILL signal_run 2 rank "${job[@]}"
    took=$(( $(date +%s) - SIGNALLED_AT ))
    [ $STATUS -ne 0 ] || fail "exit status 0 after kill -9 of a rank"
    [ $took -le 10 ] || fail "took ${took}s to end after kill -9 of a rank"
    echo "exit status $STATUS ${took}s after kill -9"
    # What a write cut short by kill -9 leaves behind goes at the next start, with a warning.
    leftover="$WORK/ck/ckpt-000009999.safetensors.tmp.4242"
    echo partial >"$leftover"
    expect_ok 0 "${job[@]}" --set train.max_steps=100
    grep -qE 'resuming from .*ckpt-0+[1-9][0-9]*.safetensors' "$WORK/out" || fail "the newest checkpoint did not load"
    [ ! -e "$leftover" ] || fail "the leftover temporary file is still there"
    grep -q "removed $leftover: the unfinished write" "$WORK/out" || fail "no warning about the leftover"
}

case_ckpt_second_signal() {
    # The first SIGTERM asks for a stop at the next step boundary; a rank stalled inside a
    # step never gets there, so the second SIGTERM must end it at once (128 + 15).
    ckpt_args
    (cd "$WORK" && SDP_TEST_STALL_RANK=0 SDP_TEST_STALL_STEP=3 exec "$BIN" "${CKPT_ARGS[@]}" \
       --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m") >"$WORK/out" 2>&1 &
    pid=$!
    for i in $(seq 300); do grep -q 'stops taking part' "$WORK/out" && break; sleep 0.1; done
    grep -q 'stops taking part' "$WORK/out" || { kill -KILL $pid; fail "the stall hook did not trigger"; }
    # The second signal is sent once the first is handled (two pending signals are one).
    kill -TERM $pid
    for i in $(seq 300); do grep -q 'signal received: stopping at the next step boundary' "$WORK/out" && break; sleep 0.1; done
    grep -q 'signal received: stopping at the next step boundary' "$WORK/out" || fail "the first SIGTERM was not acknowledged"
    kill -0 $pid 2>/dev/null || fail "the first SIGTERM ended the process inside a step"
    kill -TERM $pid; start=$(date +%s%N)
    for i in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && { kill -KILL $pid; fail "still running 5 s after the second SIGTERM"; }
    wait $pid; STATUS=$?
    [ $STATUS -eq 143 ] || fail "exit status $STATUS after the second SIGTERM, expected 143"
    grep -q 'second signal: exiting at once' "$WORK/out" || fail "no 'second signal' message"
    echo "exited $STATUS $(( ($(date +%s%N) - start) / 1000000 )) ms after the second SIGTERM"
}

case_ckpt_resume_bitwise_dropout_np2() {
    # Dropout masks are drawn at (seed, layer, rank, step): a resumed run draws the same ones.
    resume_bitwise 2 --set model.dropout=0.3
}

case_preflight_unwritable_model_dir() {
    expect_error 2 "key 'output.model_dir': cannot write to '/proc/x'" --config "$SRC/configs/quickstart.yaml" --set output.model_dir=/proc/x
    grep -q '^\[step' "$WORK/out" && fail "trained before failing"
    expect_error 2 "key 'checkpoint.dir': cannot write to '/proc/y'" --config "$SRC/configs/quickstart.yaml" --set checkpoint.dir=/proc/y
    expect_error 2 "key 'output.metrics': cannot write to '/proc/z'" --config "$SRC/configs/quickstart.yaml" --set output.metrics=/proc/z/m.jsonl
    grep -q '^\[step' "$WORK/out" && fail "trained before failing"
    true
}

case_ckpt_full_disk() {
    # A write that fails for want of space is a clear error naming the file, and the previous
    # checkpoint stays, bit for bit, and resumes once there is room again.
    # Needs a tiny tmpfs (root with CAP_SYS_ADMIN); skipped otherwise.
    mkdir -p "$WORK/small"
    if ! mount -t tmpfs -o size=1600k tmpfs "$WORK/small" 2>/dev/null; then
      echo "SKIP [$CASE]: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)"; exit 77
    fi
    trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
    ckpt_args  # one checkpoint of the MLP is ~2.2 MB: params + momentum; use a smaller one
    args=("${CKPT_ARGS[@]}" --set model.hidden=[128] --set checkpoint.dir="$WORK/small" --set output.model_dir="$WORK/m")
    expect_ok 0 "${args[@]}" --set train.max_steps=2
    [ -f "$WORK/small/ckpt-000000002.safetensors" ] || fail "first checkpoint not written"
    cp "$WORK/small/ckpt-000000002.safetensors" "$WORK/ref.safetensors"
    # Leave 128 KB: the pre-flight probe fits, the next checkpoint does not.
    avail=$(df --output=avail -k "$WORK/small" | tail -1)
    dd if=/dev/zero of="$WORK/small/filler" bs=1k count=$((avail - 128)) 2>/dev/null
    run 0 "${args[@]}" --set train.max_steps=4
    [ $STATUS -eq 1 ] || fail "exit status $STATUS on a full disk, expected 1"
    grep -qE '^sdp-train: error: .*ckpt-000000004.safetensors.*No space left' "$WORK/out" || fail "no clear error"
    cmp "$WORK/small/ckpt-000000002.safetensors" "$WORK/ref.safetensors" || fail "previous checkpoint changed"
    ls "$WORK/small" | grep -q tmp && fail "temporary file left behind"
    # Space freed, the same command resumes from the checkpoint written before the disk filled.
    rm "$WORK/small/filler"
    expect_ok 0 "${args[@]}" --set train.max_steps=4
    grep -q "resuming from $WORK/small/ckpt-000000002.safetensors: step 2" "$WORK/out" || fail "did not resume from step 2"
}

case_ckpt_resume_finished_job() {
    # A job run again over its own finished checkpoint trains nothing and says so: no metric
    # lines, the final model left as it is, metrics.jsonl kept; past the end with the model gone,
    # the model is made from the checkpoint. A resumed run continues metrics.jsonl.
    ckpt_args
    job=("${CKPT_ARGS[@]}" --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" --set output.metrics="$WORK/m.jsonl")
    expect_ok 0 "${job[@]}" --set train.max_steps=10
    expect_ok 0 "${job[@]}" --set train.max_steps=20
    [ "$(grep -c '"event":"train"' "$WORK/m.jsonl")" -eq 20 ] || fail "metrics.jsonl does not hold both runs' 20 steps"
    cp "$WORK/m/model.safetensors" "$WORK/final.safetensors"
    cp "$WORK/m.jsonl" "$WORK/m.before"
    expect_ok 0 "${job[@]}" --set train.max_steps=20
    grep -q "info: nothing to train: .*ckpt-000000020.safetensors is at step 20, the end of this job's 20 steps (train.epochs, train.max_steps); the final model of the run that wrote it is already in $WORK/m/model.safetensors and is left as it is. To train further, raise train.epochs or train.max_steps; to start afresh, set checkpoint.resume: never or another checkpoint.dir$" "$WORK/out" ||
      fail "no clear message for a finished job"
    grep -qE '^\[(start|step|epoch|done)' "$WORK/out" && fail "metric lines for a run that trained nothing"
    cmp -s "$WORK/m/model.safetensors" "$WORK/final.safetensors" || fail "the final model was rewritten"
    cmp -s "$WORK/m.jsonl" "$WORK/m.before" || fail "metrics.jsonl changed"
    [ "$(ls "$WORK/ck")" = "$(printf 'ckpt-000000010.safetensors\nckpt-000000020.safetensors')" ] || fail "checkpoints changed: $(ls "$WORK/ck")"
    rm "$WORK/m/model.safetensors"
    expect_ok 0 "${job[@]}" --set train.max_steps=12
    grep -q "info: nothing to train: .*ckpt-000000020.safetensors is at step 20, past this job's 12 steps (train.epochs, train.max_steps); the final model is written now from it to $WORK/m/model.safetensors\. To train further" "$WORK/out" ||
      fail "no clear message for a checkpoint past the job's end"
    same_tensors "$WORK/m/model.safetensors" "$WORK/final.safetensors"
}

case_ckpt_resume_lists_changed_keys() {
    # At resume, every key that differs from the job spec the checkpoint holds is one line;
    # unchanged keys are not listed.
    ckpt_args
    job=("${CKPT_ARGS[@]}" --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m")
    expect_ok 0 "${job[@]}" --set train.max_steps=5
    expect_ok 2 "${job[@]}" --set train.max_steps=8 --set optimizer.lr=0.2 --set optimizer.milestones=[1,2]
    for line in "resume: key 'train.max_steps' was 5 in the checkpoint, now 8" \
                "resume: key 'optimizer.lr' was 0.02 in the checkpoint, now 0.2" \
                "resume: key 'optimizer.milestones' was [] in the checkpoint, now [1, 2]"; do
      [ "$(grep -cF "info: $line" "$WORK/out")" -eq 1 ] || fail "not said once: $line"
    done
    [ "$(grep -c 'resume: key ' "$WORK/out")" -eq 3 ] || fail "other keys listed: $(grep 'resume: key ' "$WORK/out")"
    grep -q '^\[step 8\]' "$WORK/out" || fail "did not train on to step 8"
}

case_bench_checkpoint() {
    # `sdp-train bench checkpoint`: the job's model and optimizer state written and read back
    # in a directory of its own inside --dir (removed after, what --dir held left alone), a row
    # per operation with its milliseconds and MB/s; bad options are exit 2.
    local job=(--config "$SRC/configs/quickstart.yaml" --set model.name=resnet20 --set data.synthetic.channels=3
               --set data.synthetic.height=32 --set data.synthetic.width=32)
    expect_ok 0 bench checkpoint "${job[@]}" --repeat 3 --dir "$WORK/ck"
    grep -qE '^# checkpoint of resnet20 \(sgd state\): [0-9]+ tensors, [0-9]+ bytes, in .*/ck/sdp-bench-checkpoint-[^/]+; medians of 3$' "$WORK/out" ||
      fail "no heading naming the model, the state and the repeat count"
    for op in 'write \(temp file, fsync, rename\)' 'read \(every check of a resume\)' 'CRC-32C of every tensor'; do
        grep -qE "^$op +[0-9.]+ +[0-9]+$" "$WORK/out" || fail "no row '$op' with ms and MB/s"
    done
    [ -z "$(ls "$WORK/ck")" ] || fail "the benchmark left files in --dir: $(ls "$WORK/ck")"
    # A directory holding a job's checkpoints: they stay as they are.
    mkdir -p "$WORK/jobck" && echo kept >"$WORK/jobck/ckpt-000000099.safetensors"
    expect_ok 0 bench checkpoint "${job[@]}" --repeat 2 --dir "$WORK/jobck"
    [ "$(ls "$WORK/jobck")" = "ckpt-000000099.safetensors" ] && grep -q kept "$WORK/jobck/ckpt-000000099.safetensors" ||
      fail "the benchmark touched the files already in --dir: $(ls "$WORK/jobck")"
    expect_error 0 "repeat" bench checkpoint "${job[@]}" --repeat 0
    expect_error 0 "model.name" bench checkpoint --config "$SRC/configs/quickstart.yaml" --set model.name=resnet7
}
