# shellcheck shell=bash
# Training and evaluating: the quick start, non-finite values, divergence, the evaluate command.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_train_quickstart() {
    # The default job learns: >= 95% test accuracy on the noisy synthetic set (98% measured).
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set threads=1 --set output.model_dir="$WORK/model" --set output.metrics="$WORK/m.jsonl"
    grep -q 'plan for job' "$WORK/out" || fail "no plan printed"
    grep -qE '^\[step [0-9]+\] epoch=[0-9]+ step=[0-9]+ train_loss=[0-9.e+-]+ lr=[0-9.e+-]+ images_per_sec=[0-9.]+ data_wait_ms=[0-9.e+-]+$' "$WORK/out" || fail "no metric line"
    acc=$(grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.95 else 1)" || fail "test_accuracy $acc < 0.95"
    python3 - "$WORK/model/model.safetensors" <<'PY' || fail "model.safetensors is not valid safetensors"
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + n])
meta = header.pop('__metadata__')
assert meta['model'] == 'mlp' and float(meta['test_accuracy']) >= 0.95
end = max(v['data_offsets'][1] for v in header.values())
assert 8 + n + end == len(data)
assert 'fc1.weight' in header or any(k.endswith('weight') for k in header)
PY
    grep -q '"event":"eval"' "$WORK/m.jsonl" || fail "metrics.jsonl has no eval record"
}

case_train_quickstart_np2() {
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set output.model_dir="$WORK/model" --set output.metrics=
    grep -q 'global_batch=128' "$WORK/out" || fail "global batch not 2 x 64"
    grep -q 'peak_lr=0.04 ' "$WORK/out" || fail "LR not scaled linearly to 0.04"
    acc=$(grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.95 else 1)" || fail "test_accuracy $acc < 0.95"
    [ "$(grep -c '^\[done\]' "$WORK/out")" -eq 1 ] || fail "metrics printed by more than one rank"
}

case_nonfinite_skip_np2() {
    # Rank 1's input has a NaN at step 5 (0-based). ReLU turns it into 0, so the loss stays
    # finite, but the first layer's weight gradient is NaN: every rank skips that update (the
    # replica check after every step would stop the job at the first drift), the run goes on.
    ckpt_args
    SDP_TEST_NAN_RANK=1 SDP_TEST_NAN_STEP=5 expect_ok 2 "${CKPT_ARGS[@]}" --set train.max_steps=20 \
      --set train.on_nonfinite=skip --set distributed.check_every_steps=1 --set output.model_dir="$WORK/m" \
      --set checkpoint.dir="$WORK/ck"
    [ "$(grep -c 'the update is skipped on every rank' "$WORK/out")" -eq 1 ] || fail "expected one skip warning"
    grep -q 'step 5 (epoch 0): the training loss is finite but a gradient is not .*1 skipped so far' "$WORK/out" || fail "warning does not name step 5"
    grep -qE '^\[step 6\] epoch=1 step=6 lr=' "$WORK/out" || fail "the step-6 line should have no train_loss"
    grep -qE '^\[step 7\].*train_loss=' "$WORK/out" || fail "no loss after the skipped step"
    grep -qE '^\[done\] steps=20 .*skipped_steps=1' "$WORK/out" || fail "[done] does not count the skipped step"
    python3 - "$WORK/ck/ckpt-000000020.safetensors" <<'PY' || fail "optimizer steps in the checkpoint"
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
meta = json.loads(data[8:8 + struct.unpack('<Q', data[:8])[0]])['__metadata__']
assert meta['step'] == '20' and meta['optimizer_steps'] == '19', meta
PY
}

case_nonfinite_abort_np2() {
    ckpt_args
    SDP_TEST_NAN_RANK=1 SDP_TEST_NAN_STEP=5 run 2 "${CKPT_ARGS[@]}" --set train.max_steps=20 --set output.model_dir="$WORK/m"
    [ $STATUS -eq 1 ] || fail "exit status $STATUS, expected 1"
    [ "$(grep -c '^sdp-train: error:' "$WORK/out")" -eq 1 ] || fail "expected the error once"
    grep -q '^sdp-train: error: step 5 (epoch 0): the training loss is finite but a gradient is not .*train.on_nonfinite: skip' "$WORK/out" || fail "error does not name the step and the option"
}

case_divergence_warns_and_aborts() {
    # LR 1 (x 2 ranks) kills the quickstart MLP (no NaN: a dead network at chance level): a warning
    # naming the step and the LR by default; exit 1 on every rank with on_divergence: abort.
    ckpt_args
    dead=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set output.metrics= --set optimizer.lr=1
          --set train.epochs=2 --set output.model_dir="$WORK/m" --set checkpoint.dir="$WORK/ck")
    expect_ok 2 "${dead[@]}"
    [ "$(grep -c 'the run has diverged or stalled' "$WORK/out")" -eq 1 ] || fail "expected one divergence warning"
    grep -qE 'warning: step [0-9]+, lr [0-9.e+-]+: the (training loss|test accuracy)' "$WORK/out" || fail "the warning names no step and LR"
    run 2 "${dead[@]}" --set train.on_divergence=abort --set checkpoint.dir="$WORK/ck_abort"
    [ $STATUS -eq 1 ] || fail "exit status $STATUS under on_divergence: abort, expected 1"
    grep -q '^sdp-train: error: step [0-9]*, lr .*the run has diverged or stalled.*(train.on_divergence: abort)' "$WORK/out" || fail "no abort error"
    grep -q '^\[done\]' "$WORK/out" && fail "finished despite on_divergence: abort"
    # The quickstart itself is healthy: no warning.
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set threads=1 --set output.metrics= --set output.model_dir="$WORK/m2" \
      --set checkpoint.dir="$WORK/ck2"
    grep -q 'diverged or stalled' "$WORK/out" && fail "a healthy run was flagged"
    true
}

case_evaluate_final_model_and_checkpoint() {
    # `evaluate` on 2 ranks reproduces the test accuracy the 1-rank training reported for the
    # final model, and for the checkpoint written at the end.
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.epochs=1 --set output.model_dir="$WORK/model" --set output.metrics= --set checkpoint.dir="$WORK/ckpt"
    trained=$(final_accuracy)
    [ -n "$trained" ] || fail "training printed no accuracy"
    expect_ok 2 evaluate --config "$SRC/configs/quickstart.yaml" --set threads=1 --model "$WORK/model/model.safetensors"
    [ "$(grep -c '^\[eval\]' "$WORK/out")" -eq 1 ] || fail "expected one [eval] line"
    evaluated=$(grep -oE '^\[eval\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    [ "$evaluated" = "$trained" ] || fail "evaluate says $evaluated, training said $trained"
    ckpt=$(ls "$WORK/ckpt"/ckpt-*.safetensors | tail -1)
    [ -n "$ckpt" ] || fail "no checkpoint written"
    expect_ok 0 evaluate --config "$SRC/configs/quickstart.yaml" --set threads=1 --model "$ckpt"
    evaluated=$(grep -oE '^\[eval\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    [ "$evaluated" = "$trained" ] || fail "evaluate of the checkpoint says $evaluated, training said $trained"
}

case_err_evaluate_model_mismatch() {
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.max_steps=2 --set output.model_dir="$WORK/model" --set output.metrics= --set checkpoint.dir="$WORK/ckpt"
    expect_error 2 "model.safetensors: tensor 'conv1.weight' of the job's model is missing" evaluate --config "$SRC/configs/quickstart.yaml" --set model.name=lenet5 --model "$WORK/model/model.safetensors"
    expect_error 2 "no/such/model.safetensors" evaluate --config "$SRC/configs/quickstart.yaml" --model "$WORK/no/such/model.safetensors"
    # 4 KB in the middle of the file XORed: a model nobody trained is not evaluated (2 ranks: on each).
    flip_4k_in_the_middle "$WORK/model/model.safetensors"
    expect_error 2 "model.safetensors: tensor '[^']+' is damaged: its CRC-32C is [0-9a-f]{8}, the file recorded [0-9a-f]{8}" \
      evaluate --config "$SRC/configs/quickstart.yaml" --model "$WORK/model/model.safetensors"
    run 2 evaluate --config "$SRC/configs/quickstart.yaml" --model "$WORK/model/model.safetensors"
    [ $STATUS -eq 2 ] || fail "2 ranks: exit status $STATUS, expected 2"
}

case_sdp_launch() {
    # scripts/sdp-launch against stand-ins for mpirun: after sdp-train's "rank R ends the job"
    # line or Open MPI's "MPI_ABORT was invoked", an mpirun that goes on waiting (for a host it
    # cannot reach) is ended SDP_ABORT_GRACE_S later with the abort's code; one that exits by itself keeps its
    # own status; stderr passes through whole, a line written in two pieces included.
    # sdp-train's line before its MPI_Abort, and Open MPI's failing to print its own message
    # (as 4.1 did under the SageMaker entry point).
    cat >"$WORK/hung-mpirun" <<'SH'
#!/bin/bash
echo "sdp-train: error: rank 0 step 25: allreduce has waited 5.0 s; aborting the job" >&2
echo "sdp-train: rank 0 ends the job with exit status 3 (MPI_Abort)" >&2
echo "[sdpf-h1:30959] [[55099,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer" >&2
printf 'a line in ' >&2; sleep 1.5; echo 'two pieces' >&2
exec sleep 60
SH
    # Another program's abort: Open MPI's message alone, over two lines.
    cat >"$WORK/hung-other-mpirun" <<'SH'
#!/bin/bash
printf 'MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 4.\n' >&2
exec sleep 60
SH
    cat >"$WORK/exiting-mpirun" <<'SH'
#!/bin/bash
echo "args: $*"
printf 'MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 2.\n' >&2
exit 7
SH
    chmod +x "$WORK/hung-mpirun" "$WORK/hung-other-mpirun" "$WORK/exiting-mpirun"
    local start=$SECONDS
    SDP_ABORT_GRACE_S=2 timeout 30 "$SRC/scripts/sdp-launch" "$WORK/hung-mpirun" -np 2 x >"$WORK/out" 2>&1
    STATUS=$?
    [ $STATUS -eq 3 ] || fail "exit status $STATUS after a hung mpirun's abort, expected the abort's 3"
    [ $((SECONDS - start)) -le 6 ] || fail "took $((SECONDS - start)) s with a 2 s grace"
    grep -q "^sdp-launch: rank 0 ended the job (MPI_Abort, exit status 3) and hung-mpirun is still running 2 s later" "$WORK/out" || fail "no line saying why mpirun was ended"
    grep -q "^sdp-train: error: rank 0 step 25" "$WORK/out" || fail "the rank's error did not pass through whole"
    grep -q "^a line in two pieces$" "$WORK/out" || fail "a line written in two pieces was broken"
    SDP_ABORT_GRACE_S=1 timeout 30 "$SRC/scripts/sdp-launch" "$WORK/hung-other-mpirun" >"$WORK/out" 2>&1
    STATUS=$?
    [ $STATUS -eq 4 ] || fail "exit status $STATUS after Open MPI's abort message alone, expected its errorcode 4"
    grep -q "^sdp-launch: rank 1 ended the job (MPI_Abort, exit status 4)" "$WORK/out" || fail "no line naming rank 1's abort"
    timeout 30 "$SRC/scripts/sdp-launch" "$WORK/exiting-mpirun" -np 2 "a b" >"$WORK/out" 2>&1
    STATUS=$?
    [ $STATUS -eq 7 ] || fail "exit status $STATUS, expected mpirun's own 7"
    grep -q "^args: -np 2 a b$" "$WORK/out" || fail "the arguments did not reach mpirun"
    grep -q "sdp-launch:" "$WORK/out" && fail "sdp-launch intervened in a job that ended by itself"
    SDP_ABORT_GRACE_S=soon "$SRC/scripts/sdp-launch" true >"$WORK/out" 2>&1
    [ $? -eq 2 ] && grep -q "SDP_ABORT_GRACE_S must be a whole number" "$WORK/out" || fail "a bad SDP_ABORT_GRACE_S is not exit 2"
    true
}
