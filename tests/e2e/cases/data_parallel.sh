# shellcheck shell=bash
# Data parallelism: N ranks against one, replicas, gradient accumulation, the watchdog.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_dp_matches_single_rank() {
    # 2 ranks x batch 32 follow the same loss curve as 1 rank x batch 64 on the same data
    # order (MLP: no BatchNorm, no dropout; unscaled constant LR), up to float rounding.
    base=(--config "$SRC/configs/quickstart.yaml" --set train.max_steps=40 --set train.log_every=1
          --set train.eval_every_epochs=0 --set optimizer.lr_scaling=none --set optimizer.schedule=constant
          --set threads=1 --set data.synthetic.noise=1 --set output.metrics= --set output.model_dir="$WORK/model")
    expect_ok 0 "${base[@]}" --set data.batch_size=64
    grep -oE '^\[step [0-9]+\].*train_loss=[0-9.e+-]+' "$WORK/out" | sed 's/ lr=.*//' >"$WORK/one.txt"
    expect_ok 2 "${base[@]}" --set data.batch_size=32
    grep -oE '^\[step [0-9]+\].*train_loss=[0-9.e+-]+' "$WORK/out" | sed 's/ lr=.*//' >"$WORK/two.txt"
    same_loss_curves "$WORK/one.txt" "$WORK/two.txt" 40
}

case_accumulate_matches_ranks() {
    # 1 rank x 2 micro-batches of 64 and 2 ranks x 64: the same global batch of 128, the same
    # samples per step, the same LR (linear scaling from the 64 reference: 0.04). The step's
    # gradient is (g0 + g1) * 0.5 in both (a sum of two floats does not depend on the order;
    # halving is exact), so the runs are bitwise equal: losses and final model. With 4, the
    # summation order differs (((g0 + g1) + g2) + g3 vs the AllReduce's): float rounding only.
    base=(--config "$SRC/configs/quickstart.yaml" --set train.max_steps=40 --set train.log_every=1
          --set train.eval_every_epochs=0 --set threads=1 --set data.synthetic.noise=1 --set output.metrics=)
    expect_ok 0 "${base[@]}" --set train.accumulate_steps=2 --set output.model_dir="$WORK/m1"
    grep -q '^\[start\] world_size=1 batch_per_rank=64 accumulate_steps=2 global_batch=128 reference_batch=64 base_lr=0.02 peak_lr=0.04 ' "$WORK/out" || fail "[start] line lacks the global batch or the scaled LR"
    grep -qF 'global batch 128 (64 x 1 rank x 2), lr 0.02 @ 64 -> 0.04 (linear)' "$WORK/out" || fail "plan lacks the LR rule"
    step_losses >"$WORK/one.txt"
    expect_ok 2 "${base[@]}" --set output.model_dir="$WORK/m2"
    step_losses >"$WORK/two.txt"
    [ "$(wc -l <"$WORK/one.txt")" -eq 40 ] || fail "expected 40 loss lines"
    diff "$WORK/one.txt" "$WORK/two.txt" || fail "1 rank x 2 micro-batches and 2 ranks differ"
    same_tensors "$WORK/m1/model.safetensors" "$WORK/m2/model.safetensors"
    # Measured: equal to the 6 printed digits, parameters within 5e-8 of each other.
    expect_ok 0 "${base[@]}" --set train.accumulate_steps=4 --set output.model_dir="$WORK/m1"
    step_losses >"$WORK/one.txt"
    expect_ok 4 "${base[@]}" --set output.model_dir="$WORK/m2"
    step_losses >"$WORK/four.txt"
    close_curves "$WORK/one.txt" "$WORK/four.txt" 40 1e-4
}

case_err_accumulate_and_reference_batch() {
    cfg=$(yaml bad.yaml 'train: {accumulate_steps: 0}\n')
    expect_error 2 "bad.yaml:1: key 'train.accumulate_steps': must be >= 1" validate --config "$cfg"
    expect_error 2 "--set: key 'optimizer.reference_batch': must be a positive integer" validate --config "$SRC/configs/quickstart.yaml" --set optimizer.reference_batch=-1
    expect_error 2 "--set: key 'train.accumulate_steps': expected an integer, got 'two'" --config "$SRC/configs/quickstart.yaml" --set train.accumulate_steps=two
    cfg=$(yaml bad2.yaml 'optimizer: {reference_batch: [256]}\n')
    expect_error 2 "bad2.yaml:1: key 'optimizer.reference_batch': expected an integer" validate --config "$cfg"
    expect_error 2 "key 'data.batch_size': 64 x 2 rank\(s\) x 100 micro-batches \(train.accumulate_steps\) is more than the 8192 training samples" \
      --config "$SRC/configs/quickstart.yaml" --set train.accumulate_steps=100
}

case_dp_replicas_identical() {
    # The replica check (checksum of every parameter byte) runs after every step and would
    # stop the job (exit 1) at the first drift: 4 ranks as 2 nodes x 2, every algorithm.
    for algo in hierarchical flat ring; do
      expect_ok 4 --config "$SRC/configs/quickstart.yaml" --set train.max_steps=30 --set distributed.ranks_per_node=2 \
        --set distributed.allreduce=$algo --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25 \
        --set output.metrics= --set output.model_dir="$WORK/model"
      grep -q "allreduce    : $algo.*, over mpi$" "$WORK/out" || fail "algorithm $algo over MPI not used"
      grep -q "agreement    : the loss and stop requests ride in the last gradient bucket$" "$WORK/out" ||
        fail "the plan does not say the last bucket carries the step's agreement"
      grep -q "across nodes : host (the node's shard summed by a TCP socket ring)$" "$WORK/out" ||
        fail "the plan does not say how the gradients cross the nodes"
    done
}

case_dp_compressed_wire_agrees_over_mpi() {
    # A 16-bit wire would round the loss riding in the last bucket: such a job agrees on it in
    # an MPI allreduce of its own, and its ranks stay identical and stop together.
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set train.max_steps=20 --set distributed.compression=bf16 \
      --set distributed.check_every_steps=1 --set output.metrics= --set output.model_dir="$WORK/model"
    grep -q "agreement    : the loss and stop requests in one 16-byte MPI allreduce per step" "$WORK/out" ||
      fail "the plan does not say a compressed job agrees over MPI"
    grep -q '^\[done\] steps=20 ' "$WORK/out" || fail "the run did not train its 20 steps"
}

case_err_inter_node_nccl_on_cpu() {
    # distributed.inter_node: nccl on a CPU job cannot run: exit 2 on every rank, said once.
    expect_error 2 "distributed.inter_node: nccl needs GPU gradients over NCCL, but this job's go from the CPU; use auto or host" \
      validate --config "$SRC/configs/quickstart.yaml" --set device=cpu --set distributed.inter_node=nccl
    expect_error 2 "key 'distributed.inter_node': unknown value 'gpu' \(expected one of: auto, nccl, host\)" \
      validate --config "$SRC/configs/quickstart.yaml" --set distributed.inter_node=gpu
}

case_dp_model_mismatch() {
    # Two ranks that build different models (MPMD launch): a clear error, no hang.
    timeout $HANG_LIMIT mpirun -np 1 "$BIN" --config "$SRC/configs/quickstart.yaml" --set model.hidden=[64] : \
      -np 1 "$BIN" --config "$SRC/configs/quickstart.yaml" --set model.hidden=[32] >"$WORK/out" 2>&1
    STATUS=$?
    [ $STATUS -ne 124 ] || fail "hung"
    [ $STATUS -eq 2 ] || fail "exit status $STATUS, expected 2"
    [ "$(grep -c '^sdp-train: error:' "$WORK/out")" -eq 1 ] || fail "error not printed once"
    grep -q "rank 1 built a different model than rank 0" "$WORK/out" || fail "mismatch not named"
}

case_dp_watchdog_timeout() {
    # Rank 1 stops taking part at step 3: rank 0's watchdog warns after 1 s and ends the
    # job with exit status 3 after 4 s, naming rank 1.
    start=$(date +%s)
    SDP_TEST_STALL_RANK=1 SDP_TEST_STALL_STEP=3 run 2 --config "$SRC/configs/quickstart.yaml" \
      --set distributed.stall_warning_s=1 --set distributed.timeout_s=4 --set output.metrics= --set output.model_dir="$WORK/model"
    elapsed=$(( $(date +%s) - start ))
    [ $STATUS -eq 3 ] || fail "exit status $STATUS, expected 3"
    [ $elapsed -le 20 ] || fail "took ${elapsed}s to abort (timeout 4 s)"
    grep -q '^sdp-train: error: .*step 3' "$WORK/out" || fail "abort message does not name the step"
    grep -qE 'never arrived: .*1' "$WORK/out" || fail "abort message does not name rank 1"
    grep -qiE 'warning: .*(waited|stall)' "$WORK/out" || fail "no stall warning before the abort"
}

case_dp_watchdog_stall_in_evaluation() {
    # Rank 1 stops before the evaluation after epoch 1: rank 0 waits in the evaluation's
    # collectives, which are watched like the gradient buckets: a warning after 1 s, exit 3
    # after 4 s naming the collective and rank 1 (before, it waited for ever).
    start=$(date +%s)
    SDP_TEST_STALL_RANK=1 SDP_TEST_STALL_IN=evaluation run 2 --config "$SRC/configs/quickstart.yaml" \
      --set threads=1 --set distributed.stall_warning_s=1 --set distributed.timeout_s=4 --set output.metrics= \
      --set output.model_dir="$WORK/model" --set checkpoint.dir="$WORK/ck"
    elapsed=$(( $(date +%s) - start ))
    [ $STATUS -eq 3 ] || fail "exit status $STATUS, expected 3"
    [ $elapsed -le 25 ] || fail "took ${elapsed}s to abort (timeout 4 s)"
    grep -q 'rank 1 stops taking part before the evaluation' "$WORK/out" || fail "the stall hook did not trigger"
    grep -qE '^sdp-train: error: rank 0 step [0-9]+: evaluation (buffer average|allreduce) .*has waited' "$WORK/out" ||
      fail "abort message does not name the evaluation collective"
    grep -qE 'never arrived: .*1' "$WORK/out" || fail "abort message does not name rank 1"
    grep -qiE 'warning: .*evaluation.*waited' "$WORK/out" || fail "no stall warning before the abort"
}

case_dp_watchdog_stall_in_checkpoint_broadcast() {
    # A run leaves a checkpoint; the next one resumes from it, and rank 0 (the root, which
    # read the file) stops before the checkpoint's broadcast: rank 1's watchdog ends the job.
    ckpt_args
    expect_ok 2 "${CKPT_ARGS[@]}" --set train.max_steps=6 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    start=$(date +%s)
    SDP_TEST_STALL_RANK=0 SDP_TEST_STALL_IN=checkpoint_broadcast run 2 "${CKPT_ARGS[@]}" --set train.max_steps=12 \
      --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" \
      --set distributed.stall_warning_s=1 --set distributed.timeout_s=4
    elapsed=$(( $(date +%s) - start ))
    [ $STATUS -eq 3 ] || fail "exit status $STATUS, expected 3"
    [ $elapsed -le 25 ] || fail "took ${elapsed}s to abort (timeout 4 s)"
    grep -q 'rank 0 stops taking part before the checkpoint broadcast' "$WORK/out" || fail "the stall hook did not trigger"
    grep -qE '^sdp-train: error: rank 1 step 0: checkpoint broadcast .*has waited' "$WORK/out" ||
      fail "abort message does not name the checkpoint broadcast"
    grep -qE 'never arrived: .*0' "$WORK/out" || fail "abort message does not name rank 0"
}
