# shellcheck shell=bash
# The GPU path: cases that need a CUDA device skip with the reason where there is none; the rest check the errors a CPU-only machine gives.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_err_cuda_ranks_exceed_gpus() {
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [ "${gpus:-0}" -ge 2 ]; then echo "SKIP: this machine has $gpus GPUs, 2 ranks fit"; exit 0; fi
    expect_error 2 "device: cuda( needs one GPU per rank, but node .* runs 2 ranks and this rank sees [0-9]+ GPU|, but this sdp-train was built without)" validate --config "$SRC/configs/quickstart.yaml" --set device=cuda
}

case_err_nccl_without_gpu() {
    # distributed.backend: nccl on ranks without a GPU: one error naming the key, exit 2 on
    # every rank (the communicator is made under agreement), no hang.
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [ "${gpus:-0}" -ge 1 ]; then echo "SKIP: this machine has $gpus GPU(s): NCCL can run"; exit 77; fi
    expect_error 2 "communicator backend 'nccl' \('world', rank 0\) needs a GPU, but this process sees no CUDA device.*use distributed.backend: mpi|is not built into this sdp-train" \
      --config "$SRC/configs/quickstart.yaml" --set distributed.backend=nccl --set threads=1 --set output.model_dir="$WORK/never"
}

case_err_amp_without_gpu() {
    # device: auto with amp must not quietly train fp32 on the CPU: an error on every rank,
    # naming the key.
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [ "${gpus:-0}" -ge 1 ]; then echo "SKIP: this machine has $gpus GPU(s): amp can run"; exit 77; fi
    expect_error 2 "key 'precision': amp-fp16 needs a GPU, but rank [0-9]+ computes on the CPU" \
      train --config "$SRC/configs/quickstart.yaml" --set precision=amp-fp16 --set output.model_dir="$WORK/never"
    expect_error 2 "key 'precision': tf32 needs a GPU, but rank [0-9]+ computes on the CPU" \
      train --config "$SRC/configs/quickstart.yaml" --set precision=tf32 --set output.model_dir="$WORK/never"
    expect_error 2 "key 'precision': tf32 needs device: cuda" validate --config "$SRC/configs/quickstart.yaml" \
      --set precision=tf32 --set device=cpu
}

case_gpu_tf32_and_any_algorithm_learn_as_fp32() {
    # precision: tf32 (TF32 tensor cores) and train.deterministic: false with measured
    # algorithms learn the default job and LeNet-5 as fp32 does, to within a point, and the plan
    # says which math and rules each run takes.
    need_gpus 1
    local model run
    for model in mlp lenet5; do
      for run in fp32 tf32 any; do
        local extra=(--set precision=fp32)
        [ "$run" = tf32 ] && extra=(--set precision=tf32)
        [ "$run" = any ] && extra=(--set precision=fp32 --set train.deterministic=false --set train.conv_algorithms=measured)
        expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set model.name=$model --set device=cuda "${extra[@]}" \
          --set output.model_dir="$WORK/m-$model-$run"
        grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/acc-$model-$run"
      done
      grep -q '^  math         : f32, no TF32; convolution algorithms any (not bitwise repeatable), timed by cuDNN' \
        "$WORK/out" || fail "the plan does not say the rules of the last run"
    done
    python3 - "$WORK" <<'PY' || fail "tf32 or any algorithm does not learn as fp32 does"
import sys
acc = {f"{m}-{r}": float(open(f"{sys.argv[1]}/acc-{m}-{r}").read()) for m in ("mlp", "lenet5") for r in ("fp32", "tf32", "any")}
print(acc)
for m in ("mlp", "lenet5"):
    assert acc[f"{m}-fp32"] >= 0.9 and all(abs(acc[f"{m}-{r}"] - acc[f"{m}-fp32"]) <= 0.01 for r in ("tf32", "any")), acc
PY
}

case_gpu_train_quickstart() {
    # device: cuda trains the default job on the GPU (host batches copied in on the model's
    # stream, the optimizer's kernels after backward's) and learns as the CPU does: both reach
    # >= 95 % and agree to within a point (float sums differ between cuBLAS and oneDNN).
    need_gpus 1
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set output.model_dir="$WORK/mg"
    grep -q 'cuda:0' "$WORK/out" || fail "the plan does not name cuda:0"
    gpu=$(grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cpu --set threads=1 --set output.model_dir="$WORK/mc"
    cpu=$(grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; g, c = float('$gpu'), float('$cpu'); sys.exit(0 if g >= 0.95 and abs(g - c) <= 0.01 else 1)" ||
      fail "test_accuracy on the GPU $gpu, on the CPU $cpu"
    # The model the GPU run saved (copied out of device memory) evaluates on the CPU as trained.
    expect_ok 0 evaluate --config "$SRC/configs/quickstart.yaml" --set device=cpu --set threads=1 --model "$WORK/mg/model.safetensors"
    evaluated=$(grep -oE '^\[eval\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if abs(float('$evaluated') - float('$gpu')) <= 0.002 else 1)" ||
      fail "the saved model evaluates to $evaluated on the CPU, the GPU run said $gpu"
}

case_gpu_resume_bitwise_resnet() {
    # ResNet-20 on the GPU (cuDNN with deterministic algorithms, BatchNorm buffers, momentum):
    # stopped at step 15 and resumed, it gives the uninterrupted run's losses and tensors bit for bit.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set model.name=resnet20 --set data.synthetic.channels=3 \
      --set data.synthetic.height=16 --set data.synthetic.width=16 --set data.batch_size=16
}

case_gpu_resume_bitwise_accumulate() {
    # Gradient accumulation's sums as kernels on the compute stream, resumed exactly.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set train.accumulate_steps=3 --set train.epochs=8
}

case_gpu_nonfinite_skip() {
    # The non-finite check of the GPU's gradients: a NaN input at step 5 skips that update.
    need_gpus 1
    ckpt_args
    SDP_TEST_NAN_RANK=0 SDP_TEST_NAN_STEP=5 expect_ok 0 "${CKPT_ARGS[@]}" --set device=cuda --set train.max_steps=12 \
      --set train.on_nonfinite=skip --set output.model_dir="$WORK/m" --set checkpoint.dir="$WORK/ck"
    # (On the GPU the NaN reaches the loss: cuBLAS's product carries it where oneDNN's CPU path
    # leaves the loss finite; either way the step is skipped.)
    grep -qE 'step 5 \(epoch 0\): the training loss (is not finite|is finite but a gradient is not) .*1 skipped so far' "$WORK/out" ||
      fail "no skip warning naming step 5"
    grep -qE '^\[done\] steps=12 .*skipped_steps=1' "$WORK/out" || fail "[done] does not count the skipped step"
}

case_gpu_amp_trains() {
    # Mixed precision on the GPU: amp-fp16 (f16 activations, f32 master weights, dynamic loss
    # scaling) and amp-bf16 learn the default job as fp32 does, to within a point, and the
    # saved f32 model evaluates on the CPU as trained.
    need_gpus 1
    for p in fp32 amp-fp16 amp-bf16; do
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set precision=$p --set output.model_dir="$WORK/m-$p"
      grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/acc-$p"
    done
    grep -qE '^\[done\] .*overflow_skips=' "$WORK/out" && fail "amp-bf16 reports loss-scale skips (it has no scaling)"
    python3 - "$WORK" <<'PY' || fail "mixed precision does not learn as fp32 does"
import sys
acc = {p: float(open(f"{sys.argv[1]}/acc-{p}").read()) for p in ("fp32", "amp-fp16", "amp-bf16")}
print(acc)
assert acc["fp32"] >= 0.95 and all(abs(acc[p] - acc["fp32"]) <= 0.01 for p in acc), acc
PY
    expect_ok 0 evaluate --config "$SRC/configs/quickstart.yaml" --set device=cpu --set threads=1 --model "$WORK/m-amp-fp16/model.safetensors"
    evaluated=$(grep -oE '^\[eval\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if abs(float('$evaluated') - float(open('$WORK/acc-amp-fp16').read())) <= 0.01 else 1)" ||
      fail "the amp-fp16 model evaluates to $evaluated on the CPU"
}

case_gpu_amp_overflow_skip() {
    # A loss-scale overflow (forced at step 6 by the test hook) skips that update, halves the
    # scale and the run goes on; the [done] line counts it. Not a non-finite failure: the
    # default on_nonfinite: abort does not end the run.
    need_gpus 1
    amp_overflow_run 0 0 6 20
    grep -qE 'step 6: the f16 gradients overflowed; the update is skipped on every rank and the loss scale backs off to 32768' "$WORK/out" ||
      fail "the overflow line does not say the scale halved"
}

case_gpu_amp_resume_bitwise() {
    # amp-fp16 stopped at step 15 and resumed (the loss scale comes back from the checkpoint)
    # gives the uninterrupted run's losses and tensors bit for bit.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set precision=amp-fp16 --set model.name=resnet20 --set data.synthetic.channels=3 \
      --set data.synthetic.height=16 --set data.synthetic.width=16 --set data.batch_size=16
    grep -q '"loss_scale"' "$WORK/ckB/ckpt-000000040.safetensors" || fail "no loss scale in the checkpoint"
}

case_gpu_channels_last_resume_bitwise() {
    # The channels_last path (NHWC, BatchNorm fused with the ReLU and the residual sum in cuDNN)
    # resumes bit for bit: ResNet-20 (pad shortcuts, fused sums) in amp-fp16, stopped at step 15.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set precision=amp-fp16 --set model.memory_format=channels_last \
      --set model.name=resnet20 --set data.synthetic.channels=3 --set data.synthetic.height=16 \
      --set data.synthetic.width=16 --set data.batch_size=16
}

# expect_learns_as BASE OTHER FLOOR TOL: the test accuracies in $WORK/acc-BASE and acc-OTHER:
# BASE learns (at least FLOOR) and OTHER within TOL of it.
expect_learns_as() {
    python3 - "$WORK" "$@" <<'PY' || fail "$2 does not learn as $1 does"
import sys
work, base, other, floor, tol = sys.argv[1:]
acc = {k: float(open(f"{work}/acc-{k}").read()) for k in (base, other)}
print(acc)
assert acc[base] >= float(floor) and abs(acc[other] - acc[base]) <= float(tol), acc
PY
}

# expect_evaluates_on_cpu_as_trained MODEL ACC_FILE ARGS...: the quickstart job's model trained on
# the GPU (checkpoint names and layout as the CPU's) evaluates on the CPU to the test accuracy its
# training logged (in ACC_FILE), within a point.
expect_evaluates_on_cpu_as_trained() {
    local model=$1 acc=$2; shift 2
    expect_ok 0 evaluate --config "$SRC/configs/quickstart.yaml" --set device=cpu --set threads=1 "$@" --model "$model"
    evaluated=$(grep -oE '^\[eval\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if abs(float('$evaluated') - float(open('$acc').read())) <= 0.01 else 1)" ||
      fail "$model evaluates to $evaluated on the CPU"
}

case_gpu_batchnorm_folded_resume_bitwise() {
    # model.batchnorm: folded (each basic block's bn1 folded into conv1 and conv2, its bn2 with the
    # block's sum after conv2; cuDNN graphs from deterministic engines) resumes bit for bit:
    # ResNet-20 in amp-fp16 channels_last, stopped at step 15; the plan and the log say the 18
    # BatchNorms folded.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set precision=amp-fp16 --set model.batchnorm=folded \
      --set model.name=resnet20 --set data.synthetic.channels=3 --set data.synthetic.height=16 \
      --set data.synthetic.width=16 --set data.batch_size=16
    grep -q "^  batchnorm    : folded:" "$WORK/out" || fail "the plan does not say the BatchNorms fold"
    local folds="9 of 9 BatchNorms between two convolutions folded into them, 9 of 9 with their block's sum"
    grep -q "BatchNorm folding (model.batchnorm: folded): $folds" "$WORK/out" || fail "not every BatchNorm folded"
}

case_gpu_measured_algorithms_resume_bitwise() {
    # train.conv_algorithms: measured: every rank computes with rank 0's timed algorithms, the
    # checkpoint holds them (its conv_algorithms metadata) and the resumed run takes them instead
    # of timing again, so it resumes bit for bit: ResNet-20 in fp32 on 2 ranks sharing the GPU,
    # stopped at step 15.
    need_gpus 1
    resume_bitwise 2 --set device=cuda --set train.conv_algorithms=measured --set model.name=resnet20 \
      --set data.synthetic.channels=3 --set data.synthetic.height=16 --set data.synthetic.width=16 \
      --set data.batch_size=16
    ! grep -q "timed again\|times its own convolution algorithms" "$WORK/out" ||
      fail "a rank or the resumed run timed its own convolution algorithms"
    python3 - "$WORK/ckB/ckpt-000000015.safetensors" <<'PY' || fail "the checkpoint holds no convolution algorithms"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
text = header["__metadata__"]["conv_algorithms"]
assert text.startswith("cuDNN ") and " = " in text, text
PY
}

case_gpu_grad_sum_fused_resume_bitwise() {
    # model.grad_sum: fused (each basic block's input gradient summed in conv1's input gradient pass,
    # cuDNN graphs from deterministic engines), with model.batchnorm: folded, resumes bit for bit:
    # ResNet-20 in amp-fp16 channels_last, stopped at step 15; the plan and the log say the 9 blocks
    # fused.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set precision=amp-fp16 --set model.grad_sum=fused \
      --set model.batchnorm=folded --set model.name=resnet20 --set data.synthetic.channels=3 \
      --set data.synthetic.height=16 --set data.synthetic.width=16 --set data.batch_size=16
    grep -q "^  grad sum     : fused:" "$WORK/out" || fail "the plan does not say the sums fuse"
    grep -q "Gradient sums (model.grad_sum: fused): 9 of 9 " "$WORK/out" || fail "not every block's sum fused"
}

case_gpu_batchnorm_folded_learns_as_separate() {
    # ResNet-20 in amp-fp16 learns the synthetic job as well with its BatchNorms folded as
    # separate (within two points of test accuracy; folded_inner and folded), and the folded
    # model (checkpoint names and layout unchanged) evaluates on the CPU as trained.
    need_gpus 1
    local b
    for b in separate folded_inner folded; do
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set model.name=resnet20 --set device=cuda \
        --set precision=amp-fp16 --set model.batchnorm=$b --set data.synthetic.channels=3 \
        --set data.synthetic.height=16 --set data.synthetic.width=16 --set train.epochs=2 \
        --set output.model_dir="$WORK/m-$b"
      grep -q "^  batchnorm    : $b" "$WORK/out" || fail "the plan does not say $b"
      [ $b = separate ] || grep -q "BatchNorm folding (model.batchnorm: $b): 9 of 9 " "$WORK/out" ||
        fail "not every inner BatchNorm folded ($b)"
      [ $b != folded ] || grep -q "9 of 9 with their block's sum" "$WORK/out" ||
        fail "not every branch's last BatchNorm folded with its sum"
      grep -oE '^\[epoch 2\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/acc-$b"
    done
    expect_learns_as separate folded_inner 0.5 0.02
    expect_learns_as separate folded 0.5 0.02
    expect_evaluates_on_cpu_as_trained "$WORK/m-folded/model.safetensors" "$WORK/acc-folded" --set model.name=resnet20 \
      --set data.synthetic.channels=3 --set data.synthetic.height=16 --set data.synthetic.width=16
}

case_gpu_channels_last_learns_as_nchw() {
    # LeNet-5 in amp-fp16 learns the default job as well channels_last as NCHW (within a point),
    # the plan says which layout each run takes, and the channels_last model (checkpoint layout
    # unchanged) evaluates on the CPU as trained.
    need_gpus 1
    for f in nchw channels_last; do
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set model.name=lenet5 --set device=cuda \
        --set precision=amp-fp16 --set model.memory_format=$f --set output.model_dir="$WORK/m-$f"
      grep -q "^  layout       : $f:" "$WORK/out" || fail "the plan does not say $f"
      grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/acc-$f"
    done
    expect_learns_as nchw channels_last 0.9 0.01
    expect_evaluates_on_cpu_as_trained "$WORK/m-channels_last/model.safetensors" "$WORK/acc-channels_last" \
      --set model.name=lenet5
}

case_gpu_f32_channels_last_learns_as_nchw() {
    # model.memory_format: channels_last in fp32 and tf32 (NHWC on tensor-core kernels, opt-in):
    # LeNet-5 learns the default job as NCHW fp32 does (within a point) and the plan says so.
    need_gpus 1
    local run
    for run in fp32:nchw fp32:channels_last tf32:channels_last; do
      local p=${run%%:*} f=${run#*:}
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set model.name=lenet5 --set device=cuda \
        --set precision=$p --set model.memory_format=$f --set output.model_dir="$WORK/m-$p-$f"
      grep -q "^  layout       : $f:" "$WORK/out" || fail "the plan does not say $f for $p"
      grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/acc-$p-$f"
    done
    python3 - "$WORK" <<'PY' || fail "f32 channels_last does not learn as NCHW does"
import sys
acc = {r: float(open(f"{sys.argv[1]}/acc-{r}").read()) for r in ("fp32-nchw", "fp32-channels_last", "tf32-channels_last")}
print(acc)
assert acc["fp32-nchw"] >= 0.9, acc
assert all(abs(a - acc["fp32-nchw"]) <= 0.01 for a in acc.values()), acc
PY
}

case_gpu_f32_channels_last_resume_bitwise() {
    # The f32 NHWC path (deterministic algorithms, no TF32) resumes bit for bit: ResNet-20 (pad
    # shortcuts, BatchNorm fused where cuDNN takes f32) stopped at step 15.
    need_gpus 1
    resume_bitwise 0 --set device=cuda --set precision=fp32 --set model.memory_format=channels_last \
      --set model.name=resnet20 --set data.synthetic.channels=3 --set data.synthetic.height=16 \
      --set data.synthetic.width=16 --set data.batch_size=16
}

# expect_memory_plans_same_model OLD NEW MODEL PX: the job trained (amp-fp16 channels_last, 2
# epochs with an evaluation after each, so the arena is planned again) under model.memory_plan
# OLD and NEW gives the same tensors; the plan names each way, the log says what the GPU's peak
# held, and NEW's peak is lower.
expect_memory_plans_same_model() {
    local old=$1 new=$2 model=$3 px=$4 b
    for b in "$old" "$new"; do
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set precision=amp-fp16 \
        --set model.name="$model" --set data.synthetic.channels=3 --set data.synthetic.height="$px" \
        --set data.synthetic.width="$px" --set data.batch_size=64 --set data.synthetic.train_samples=256 \
        --set data.synthetic.test_samples=128 --set train.epochs=2 \
        --set model.memory_plan=$b --set output.model_dir="$WORK/m-$b"
      grep -q "^  memory       : $b:" "$WORK/out" || fail "the plan does not say $b"
      grep -oE 'gpu_memory_peak_mb=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/peak-$b" ||
        fail "no gpu_memory_peak_mb in the [done] line"
      grep -qE "GPU memory at its peak: [0-9.]+ MB allocated by sdp-train \(.*arena [0-9.]+ MB.*parameters" "$WORK/out" ||
        fail "the log does not say what the GPU's peak held"
    done
    same_tensors "$WORK/m-$old/model.safetensors" "$WORK/m-$new/model.safetensors" ||
      fail "the $new memory plan trained another model than $old"
    python3 -c "import sys; n, o = (float(open('$WORK/peak-' + b).read()) for b in ('$new', '$old')); print('peak MB $new', n, '$old', o); sys.exit(0 if n < o else 1)" ||
      fail "the $new memory plan did not lower the peak"
}

case_gpu_memory_plan_same_model() {
    # model.memory_plan: shared (activations and backward's buffers in one arena) trains the very
    # model per_layer trains, bit for bit (ResNet-20: fused sums, pad shortcuts).
    need_gpus 1
    expect_memory_plans_same_model per_layer shared resnet20 16
}

case_gpu_memory_plan_lean_same_model() {
    # model.memory_plan: lean (an output kept for backward only where backward reads it: the
    # projection shortcuts' BatchNorms give theirs up after the block's sum; cuDNN's workspace
    # planned per pass) trains the very model shared trains (ResNet-50, 32 px).
    need_gpus 1
    expect_memory_plans_same_model shared lean resnet50 32
}

case_gpu_loss_read_step_end_same_model() {
    # train.loss_read: step_end (the host queues backward while forward runs and reads the loss
    # once the gradients are averaged) trains the very model forward does, with the same logged
    # losses, in one micro-batch a step and in two (train.accumulate_steps), and says so in the plan.
    need_gpus 1
    local r a
    for a in 1 2; do
      for r in forward step_end; do
        expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set precision=amp-fp16 \
          --set model.name=resnet20 --set data.synthetic.channels=3 --set data.synthetic.height=16 \
          --set data.synthetic.width=16 --set data.batch_size=32 --set data.synthetic.train_samples=512 \
          --set data.synthetic.test_samples=256 --set train.epochs=2 --set train.log_every=2 \
          --set train.accumulate_steps=$a --set train.loss_read=$r --set output.model_dir="$WORK/m-$a-$r"
        grep -q "^  loss read    : $r:" "$WORK/out" || fail "the plan does not say $r"
        grep -oE '^\[(step|epoch)[^]]*\].*loss=[0-9.e+-]+' "$WORK/out" | grep -oE 'loss=[0-9.e+-]+' >"$WORK/losses-$a-$r"
      done
      [ -s "$WORK/losses-$a-forward" ] || fail "no losses logged"
      cmp "$WORK/losses-$a-forward" "$WORK/losses-$a-step_end" || fail "step_end logged other losses ($a micro-batches)"
      same_tensors "$WORK/m-$a-forward/model.safetensors" "$WORK/m-$a-step_end/model.safetensors" ||
        fail "step_end trained another model ($a micro-batches)"
    done
}

# train_resnet20_graphs NP TAG GRAPHS [--set ...]: ResNet-20 on 16 px synthetic images, 2
# epochs of 16 steps, train.cuda_graphs=GRAPHS; its losses go to $WORK/losses-TAG-GRAPHS and
# its model to $WORK/m-TAG-GRAPHS.
train_resnet20_graphs() {
    local np=$1 tag=$2 graphs=$3; shift 3
    expect_ok "$np" --config "$SRC/configs/quickstart.yaml" --set device=cuda --set model.name=resnet20 \
      --set data.synthetic.channels=3 --set data.synthetic.height=16 --set data.synthetic.width=16 \
      --set data.batch_size=32 --set data.synthetic.train_samples=512 --set data.synthetic.test_samples=256 \
      --set train.epochs=2 --set train.log_every=2 "$@" --set train.cuda_graphs=$graphs \
      --set output.model_dir="$WORK/m-$tag-$graphs"
    grep -oE '^\[(step|epoch)[^]]*\].*loss=[0-9.e+-]+' "$WORK/out" | grep -oE 'loss=[0-9.e+-]+' >"$WORK/losses-$tag-$graphs"
}

# expect_graphs_same_model TAG MIN_REPLAYED: the last run (on) recorded without a failure,
# replayed at least MIN_REPLAYED steps, and logged the losses and saved the model of the run
# with graphs off.
expect_graphs_same_model() {
    local tag=$1 min=$2 replayed
    grep -q "recording step .* failed" "$WORK/out" && fail "a recording failed ($tag): $(grep 'recording step' "$WORK/out")"
    replayed=$(grep -oE 'graph_replayed_steps=[0-9]+' "$WORK/out" | tail -1 | cut -d= -f2)
    [ "${replayed:-0}" -ge "$min" ] || fail "only ${replayed:-no} steps replayed ($tag)"
    [ -s "$WORK/losses-$tag-off" ] || fail "no losses logged"
    cmp "$WORK/losses-$tag-off" "$WORK/losses-$tag-on" || fail "the replayed steps logged other losses ($tag)"
    same_tensors "$WORK/m-$tag-off/model.safetensors" "$WORK/m-$tag-on/model.safetensors" ||
      fail "the replayed steps trained another model ($tag)"
}

case_gpu_cuda_graphs_same_model() {
    # train.cuda_graphs: on (forward and backward recorded at the third step after each new
    # shape or evaluation, then replayed) trains the very model the launches do, with the same
    # logged losses, in fp32 and in amp-fp16 (channels_last, the loss scaler); the plan and the
    # log say so, and the [done] line counts the replayed steps (2 epochs of 16: 28 at least).
    need_gpus 1
    local p g
    for p in fp32 amp-fp16; do
      for g in off on; do
        train_resnet20_graphs 0 "$p" "$g" --set precision=$p
        grep -q "^  graphs       : $g" "$WORK/out" || fail "the plan does not say graphs $g ($p)"
      done
      grep -q "recorded at the third step" "$WORK/out" || fail "the log does not say the steps are recorded ($p)"
      expect_graphs_same_model "$p" 28
    done
}

case_gpu_capturable_update_same_model() {
    # optimizer.capturable: on (the update decided and applied on the device, recorded with
    # each step's forward and backward) trains the very model the host's decision does: in fp32
    # with SGD's momentum, in amp-fp16 with LAMB (bias corrections read from the device, the
    # loss scaler); the same logged losses and tensors, the steps still replayed (28 of 32).
    # Then a loss-scale overflow (step 6) and a NaN input (step 9) are skipped by the device as
    # the host skips them: logged and counted the same.
    need_gpus 1
    local p c args
    for p in fp32 amp-fp16; do
      args=(--set precision=$p)
      [ "$p" = amp-fp16 ] && args+=(--set optimizer.name=lamb --set optimizer.lr=0.002)
      for c in off on; do
        train_resnet20_graphs 0 "$p-capturable-$c" on "${args[@]}" --set optimizer.capturable=$c
      done
      grep -q "^  update       : on the device (optimizer.capturable: on)" "$WORK/out" ||
        fail "the plan does not say the update is on the device ($p)"
      grep -q "Update (optimizer.capturable: on): decided and applied on the device, recorded with" "$WORK/out" ||
        fail "the log does not say the update is recorded with the step ($p)"
      grep -q "recording step .* failed" "$WORK/out" && fail "a recording failed ($p): $(grep 'recording step' "$WORK/out")"
      replayed=$(grep -oE 'graph_replayed_steps=[0-9]+' "$WORK/out" | tail -1 | cut -d= -f2)
      [ "${replayed:-0}" -ge 28 ] || fail "only ${replayed:-no} steps replayed ($p)"
      [ -s "$WORK/losses-$p-capturable-off-on" ] || fail "no losses logged ($p)"
      cmp "$WORK/losses-$p-capturable-off-on" "$WORK/losses-$p-capturable-on-on" ||
        fail "the device's update logged other losses ($p)"
      same_tensors "$WORK/m-$p-capturable-off-on/model.safetensors" "$WORK/m-$p-capturable-on-on/model.safetensors" ||
        fail "the device's update trained another model ($p)"
    done
    amp_overflow_run 0 0 6 20 --set optimizer.capturable=on --set train.cuda_graphs=on
    grep -q "^  update       : on the device" "$WORK/out" || fail "the overflow run's update is not on the device"
    SDP_TEST_NAN_RANK=0 SDP_TEST_NAN_STEP=9 expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda \
      --set train.max_steps=14 --set train.on_nonfinite=skip --set optimizer.capturable=on --set train.cuda_graphs=on \
      --set output.model_dir="$WORK/m-nan"
    grep -qE 'step 9 \(epoch 0\): the training loss (is not finite|is finite but a gradient is not) .*1 skipped so far' \
      "$WORK/out" || fail "no skip warning naming step 9 with the update on the device"
    grep -qE '^\[done\] steps=14 .*skipped_steps=1' "$WORK/out" || fail "[done] does not count the device's skip"
}

case_gpu_cuda_graphs_forward_alone_same_model() {
    # Where backward hands each gradient on as it is made (2 ranks sharing the GPU; 2
    # micro-batches a step on 1 rank), train.cuda_graphs: on records the forward alone and
    # launches backward: the very model of the launches, the plan and the log say so, and the
    # [done] line counts replayed steps; auto keeps such steps launched.
    need_gpus 1
    local shape np args g
    for shape in 2:1 1:2; do
      np=${shape%:*}
      args=(--set precision=amp-fp16 --set train.accumulate_steps=${shape#*:})
      [ "$np" -gt 1 ] && args+=(--set distributed.share_gpus=true --set distributed.ranks_per_node=1)
      for g in off on; do
        train_resnet20_graphs "$np" "$shape" "$g" "${args[@]}"
      done
      grep -q "^  graphs       : on: forward recorded once" "$WORK/out" || fail "the plan does not say forward alone ($shape)"
      grep -q "each step's forward is recorded" "$WORK/out" || fail "the log does not say forward alone ($shape)"
      expect_graphs_same_model "$shape" 10
    done
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set distributed.share_gpus=true \
      --set distributed.ranks_per_node=1 --set train.max_steps=4 --set output.model_dir="$WORK/m-auto"
    grep -q "the steps run as launches: each gradient is handed on" "$WORK/out" ||
      fail "auto does not keep a 2-rank job's steps launched"
}

case_gpu_decode_learns_as_cpu() {
    # data.decode: gpu (nvJPEG) trains from JPEGs as the CPU decoder does: the plan says so,
    # with 2 loader threads by default; no image falls back to the CPU ([done]
    # cpu_decoded_images=0); the test accuracy is within 3 points of the CPU-decoded run's.
    # With data.normalize_on: gpu (the kernel writes the batch) the model is the very one the
    # loader-normalised GPU run trains. With data.decode_roi: on (each crop's region decoded alone
    # on a hardware decoder) it learns as well.
    need_gpus 1
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 1024
    local d
    for d in gpu-normalized gpu-roi cpu gpu; do
      local keys=(--set data.decode=${d%-*})
      [ "$d" = gpu-normalized ] && keys+=(--set data.normalize_on=gpu)
      [ "$d" = gpu-roi ] && keys+=(--set data.decode_roi=on)
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set data.format=image-folder \
        --set data.train="$WORK/train" --set data.test="$WORK/train" --set data.image_size=32 --set data.resize=32 \
        "${keys[@]}" --set train.epochs=3 --set output.model_dir="$WORK/m-$d"
      grep -oE '^\[epoch 3\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$' >"$WORK/acc-$d" ||
        fail "no test accuracy ($d)"
      [ "$d" = gpu-normalized ] && { grep -q "^  decode       : gpu: .*the decoder's kernel writes the batch's normalised values" "$WORK/out" ||
        fail "the plan does not say the kernel normalises"; }
      [ "$d" = gpu-roi ] && { grep -q "^  decode       : gpu: .*decodes each crop's region alone (data.decode_roi: on)" "$WORK/out" ||
        fail "the plan does not say regions are decoded"; }
    done
    same_tensors "$WORK/m-gpu/model.safetensors" "$WORK/m-gpu-normalized/model.safetensors" ||
      fail "the kernel-normalised batches trained another model"
    grep -q '^  decode       : gpu: nvJPEG .* 2 loader thread(s) read and parse (at most 2 by default)' "$WORK/out" ||
      fail "the plan does not say the GPU decodes with 2 loader threads"
    grep -q '^\[done\].* cpu_decoded_images=0' "$WORK/out" || fail "images fell back to the CPU"
    python3 -c "import sys; c, g = (float(open('$WORK/acc-' + d).read()) for d in ('cpu', 'gpu')); print('accuracy cpu', c, 'gpu', g); sys.exit(0 if abs(c - g) <= 0.03 else 1)" ||
      fail "the GPU-decoded run learns otherwise than the CPU-decoded one"
    python3 -c "import sys; c, g = (float(open('$WORK/acc-' + d).read()) for d in ('cpu', 'gpu-roi')); print('accuracy cpu', c, 'gpu regions', g); sys.exit(0 if abs(c - g) <= 0.03 else 1)" ||
      fail "the region-decoded run learns otherwise than the CPU-decoded one"
}

case_gpu_decode_fallback_warned() {
    # A data set nvJPEG's hardware decoder refuses (progressive JPEGs; the GPU-assisted backend
    # takes them, and then there is nothing to warn about) still trains, decoded on the CPU and
    # counted, and rank 0's log says once that most images fell back.
    need_gpus 1
    python3 -c 'import PIL' 2>/dev/null || { echo "SKIP: needs Pillow to write progressive JPEGs"; exit 77; }
    python3 - "$WORK/train" <<'PY'
import os, random, sys
from PIL import Image
random.seed(0)
for label in range(2):
    os.makedirs(f"{sys.argv[1]}/{label}", exist_ok=True)
    for i in range(64):
        img = Image.new("RGB", (48, 40), (200 * label, random.randrange(256), 40))
        img.save(f"{sys.argv[1]}/{label}/{i}.jpg", quality=90, progressive=True)
PY
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set data.format=image-folder \
      --set data.train="$WORK/train" --set data.test="$WORK/train" --set data.image_size=32 --set data.resize=32 \
      --set data.decode=gpu --set data.batch_size=32 --set train.epochs=2 --set output.model_dir="$WORK/m"
    local fell_back
    fell_back=$(grep -oE '^\[done\].* cpu_decoded_images=[0-9]+' "$WORK/out" | grep -oE '[0-9]+$') ||
      fail "no cpu_decoded_images in the [done] line"
    if grep -q 'JPEGs decoded by nvJPEG .* hardware decoder on' "$WORK/out"; then
      [ "$fell_back" -gt 0 ] || fail "the hardware decoder took progressive JPEGs (cpu_decoded_images=0)"
      [ "$(grep -c 'were refused by nvJPEG .* and decoded on the CPU' "$WORK/out")" = 1 ] ||
        fail "no single warning that the images fell back to the CPU"
    else
      echo "the GPU-assisted backend decodes progressive JPEGs: $fell_back fell back"
    fi
}

case_gpu_compute_batches_same_model() {
    # data.batch_type: compute (the loader normalises JPEGs straight into the model's f16 NHWC
    # input) trains the very model f32 batches do (LeNet-5 amp-fp16 channels_last from an image
    # folder), and the plan says which the job loads.
    need_gpus 1
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 512
    local b
    for b in f32 compute; do
      expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set precision=amp-fp16 \
        --set model.name=lenet5 --set data.format=image-folder --set data.train="$WORK/train" \
        --set data.test="$WORK/train" --set data.image_size=28 --set data.resize=32 --set data.batch_type=$b \
        --set train.epochs=2 --set output.model_dir="$WORK/m-$b"
      grep -q "^  batches      : $b:" "$WORK/out" || fail "the plan does not say $b"
    done
    same_tensors "$WORK/m-f32/model.safetensors" "$WORK/m-compute/model.safetensors" ||
      fail "compute-type batches trained another model"
}

case_gpu_amp_dp_overflow_agreed() {
    # 2 GPUs: an overflow on rank 1 alone skips the same step on both ranks (the averaged
    # gradients are the same everywhere) and the replicas stay identical.
    need_gpus 2
    amp_overflow_run 2 1 4 12 --set distributed.check_every_steps=1
}

# The multi-GPU cases on one GPU (distributed.share_gpus: 2 or 4 ranks on GPU 0, gradients
# staged over MPI through the host; issue #23 item 3).
case_gpu_shared_amp_dp_overflow_agreed() {
    # An overflow on rank 1 alone skips the same step on both ranks, replicas checked each step.
    need_gpus 1
    amp_overflow_run 2 1 4 12 --set distributed.check_every_steps=1 --set distributed.share_gpus=true
}

case_gpu_shared_dp_replicas_identical() {
    # 2 ranks as 2 nodes x 1 and 4 as 2 x 2 on one GPU: replicas bitwise identical after every
    # step under each algorithm a GPU runs (the ring is host-only).
    need_gpus 1
    local shape np rpn algo
    for shape in 2:1 4:2; do
      np=${shape%:*} rpn=${shape#*:}
      for algo in hierarchical flat auto; do
        expect_ok "$np" --config "$SRC/configs/quickstart.yaml" --set device=cuda --set train.max_steps=30 \
          --set distributed.share_gpus=true --set distributed.ranks_per_node=$rpn --set distributed.allreduce=$algo \
          --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25 --set output.metrics= \
          --set output.model_dir="$WORK/model"
        grep -q "^\[done\] steps=30 " "$WORK/out" || fail "$algo on $np ranks ($rpn per node) did not finish"
      done
    done
}

case_gpu_shared_resume_bitwise() {
    # 2 ranks on one GPU stopped at step 15 and resumed: bitwise the uninterrupted run; then a
    # checkpoint of 2 ranks continued by 1 (another world size) from the same sample.
    need_gpus 1
    resume_bitwise 2 --set device=cuda --set distributed.share_gpus=true
    ckpt_args
    expect_ok 2 "${CKPT_ARGS[@]}" --set device=cuda --set distributed.share_gpus=true --set train.max_steps=10 \
      --set checkpoint.dir="$WORK/ckW" --set output.model_dir="$WORK/mW"
    expect_ok 0 "${CKPT_ARGS[@]}" --set device=cuda --set train.max_steps=64 --set checkpoint.dir="$WORK/ckW" \
      --set output.model_dir="$WORK/mW"
    grep -q 'world size 2 -> 1, global batch 128 -> 64, steps per epoch 16 -> 32, peak LR 0.04 -> 0.02, step 10 -> 20' \
      "$WORK/out" || fail "the change of world size is not logged"
    grep -q '^\[step 64\]' "$WORK/out" || fail "did not reach step 64"
}

case_gpu_shared_signals() {
    # On one GPU shared by 2 ranks: SIGTERM to a rank checkpoints and exits 0, and the job
    # resumes; kill -9 of a rank ends the job promptly and non-zero.
    need_gpus 1
    ckpt_args
    job=("${CKPT_ARGS[@]}" --set device=cuda --set distributed.share_gpus=true --set train.log_every=50
         --set train.max_steps=3000 --set train.epochs=1000 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m")
    signal_run 2 rank "${job[@]}"
    [ $STATUS -eq 0 ] || fail "exit status $STATUS after SIGTERM to rank 1, expected 0"
    check_interrupted
    expect_ok 2 "${job[@]}" --set train.max_steps=$((STOPPED + 20))
    grep -q "resuming from .*ckpt-0*$STOPPED.safetensors: step $STOPPED" "$WORK/out" || fail "did not resume from step $STOPPED"
    rm -rf "$WORK/ck"
    SIGNAL=KILL signal_run 2 rank "${job[@]}"
    took=$(( $(date +%s) - SIGNALLED_AT ))
    [ $STATUS -ne 0 ] || fail "exit status 0 after kill -9 of a rank"
    [ $took -le 10 ] || fail "took ${took}s to end after kill -9 of a rank"
}

# one_gpu_reference: `base` = 40 steps of quickstart on the GPU at a constant LR, and the loss
# curve of 1 rank with batch 64 in $WORK/one.txt, for the data-parallel cases to follow.
one_gpu_reference() {
    base=(--config "$SRC/configs/quickstart.yaml" --set device=cuda --set train.max_steps=40 --set train.log_every=1
          --set train.eval_every_epochs=0 --set optimizer.lr_scaling=none --set optimizer.schedule=constant
          --set data.synthetic.noise=1 --set output.metrics= --set output.model_dir="$WORK/model")
    expect_ok 0 "${base[@]}" --set data.batch_size=64
    step_losses >"$WORK/one.txt"
}

case_gpu_dp_matches_single_gpu() {
    # 2 ranks on 2 GPUs (NCCL averages each bucket after its backward's CUDA event) follow the
    # loss curve of 1 GPU with twice the batch; the replica check runs after every step.
    need_gpus 2
    one_gpu_reference
    expect_ok 2 "${base[@]}" --set data.batch_size=32 --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25
    grep -q 'allreduce    : .*, over nccl$' "$WORK/out" || fail "the plan does not say the gradients go over NCCL"
    grep -q 'agreement    : the loss and stop requests in one 16-byte MPI allreduce per step' "$WORK/out" ||
      fail "the plan does not say a GPU job agrees on its loss over MPI"
    step_losses >"$WORK/two.txt"
    same_loss_curves "$WORK/one.txt" "$WORK/two.txt" 40
}

case_gpu_shared_dp_matches_single_gpu() {
    # 2 ranks sharing one GPU (distributed.share_gpus: gradients over MPI, staged through host
    # memory in rounds) follow the loss curve of 1 GPU with twice the batch, replicas checked
    # after every step; then as 2 logical nodes (ranks_per_node 1), every algorithm a GPU runs.
    need_gpus 1
    one_gpu_reference
    shared=(--set distributed.share_gpus=true --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25)
    expect_ok 2 "${base[@]}" --set data.batch_size=32 "${shared[@]}"
    grep -q 'allreduce    : .*, over mpi (GPU memory staged through the host), ranks share GPUs$' "$WORK/out" ||
      fail "the plan does not say the gradients are staged over MPI"
    grep -qE '^    1 +0 +1 +cuda:0 ' "$WORK/out" || fail "rank 1 is not on cuda:0"
    step_losses >"$WORK/two.txt"
    same_loss_curves "$WORK/one.txt" "$WORK/two.txt" 40
    for algo in hierarchical flat; do
      expect_ok 2 "${base[@]}" --set data.batch_size=32 "${shared[@]}" --set distributed.ranks_per_node=1 \
        --set distributed.allreduce=$algo
      grep -q "^\[done\] steps=40 " "$WORK/out" || fail "$algo on 2 logical nodes did not finish"
      grep -q "across nodes : host (each node's shard staged through pinned memory" "$WORK/out" ||
        fail "the plan does not say the gradients cross the nodes through the hosts"
    done
    # Herring's path (distributed.inter_node: host): the node phase over NCCL (one rank per
    # node, so no NCCL communicator spans the shared GPU), the shard copied to pinned memory in
    # rounds, summed over the socket ring, copied back; the same curve as one GPU.
    expect_ok 2 "${base[@]}" --set data.batch_size=32 "${shared[@]}" --set distributed.ranks_per_node=1 \
      --set distributed.allreduce=hierarchical --set distributed.backend=nccl --set distributed.inter_node=host
    grep -q 'allreduce    : hierarchical, .*, over nccl, ranks share GPUs$' "$WORK/out" ||
      fail "the node phase does not run over NCCL"
    grep -q "across nodes : host (each node's shard staged through pinned memory, summed by the CPUs over a TCP socket ring)$" \
      "$WORK/out" || fail "the plan does not name the host inter-node phase"
    step_losses >"$WORK/host.txt"
    same_loss_curves "$WORK/one.txt" "$WORK/host.txt" 40
}

# nccl_logical_hosts: from here on $BIN runs each rank with an NCCL_HOSTID of its own (and NCCL
# over loopback sockets), so that 2 ranks sharing one GPU as 2 logical nodes (ranks_per_node 1)
# pass NCCL's duplicate-GPU check (it compares host and bus id) and join over its network
# transport; NCCL_ARGS are the job keys of that topology.
nccl_logical_hosts() {
    cat >"$WORK/own-host.sh" <<SH
#!/usr/bin/env bash
NCCL_HOSTID=sdp-logical-host-\$OMPI_COMM_WORLD_RANK NCCL_SOCKET_IFNAME=lo exec "$BIN" "\$@"
SH
    chmod +x "$WORK/own-host.sh"
    BIN=$WORK/own-host.sh
    NCCL_ARGS=(--set distributed.share_gpus=true --set distributed.ranks_per_node=1 --set distributed.backend=nccl
               --set distributed.inter_node=nccl --set distributed.allreduce=hierarchical)
}

case_gpu_nccl_between_logical_hosts_on_one_gpu() {
    # NCCL across nodes, on one GPU: 2 ranks as 2 logical nodes sharing the GPU
    # (nccl_logical_hosts). The inter-node phase over NCCL, the curve of one GPU.
    need_gpus 1
    one_gpu_reference
    local real=$BIN
    nccl_logical_hosts
    expect_ok 2 "${base[@]}" --set data.batch_size=32 "${NCCL_ARGS[@]}" \
      --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25
    BIN=$real
    grep -q "across nodes : nccl over TCP sockets$" "$WORK/out" || fail "the plan does not say NCCL crosses the nodes over sockets"
    step_losses >"$WORK/nccl.txt"
    same_loss_curves "$WORK/one.txt" "$WORK/nccl.txt" 40
}

case_gpu_stream_ordered_same_model() {
    # distributed.stream_ordered: on (each bucket's NCCL calls started by the training thread as
    # backward reports it, ordered on the GPU's streams; a step's CUDA graph then holds forward,
    # backward and the buckets, and with optimizer.capturable the update) trains the very model
    # the communication thread's buckets do: 2 ranks as 2 logical hosts on one GPU, the same
    # logged losses and tensors, replicas identical after every step, the steps replayed.
    need_gpus 1
    local real=$BIN mode replayed
    nccl_logical_hosts
    local args=(--config "$SRC/configs/quickstart.yaml" --set device=cuda --set train.max_steps=30 --set train.log_every=1
                --set train.eval_every_epochs=0 --set data.batch_size=32 --set output.metrics= "${NCCL_ARGS[@]}"
                --set distributed.check_every_steps=1 --set distributed.bucket_mb=0.25 --set train.cuda_graphs=on)
    for mode in off on capturable; do
      expect_ok 2 "${args[@]}" --set distributed.stream_ordered=${mode/capturable/on} \
        --set optimizer.capturable=$([ $mode = capturable ] && echo on || echo off) --set output.model_dir="$WORK/m-$mode"
      step_losses >"$WORK/losses-$mode"
      replayed=$(grep -oE 'graph_replayed_steps=[0-9]+' "$WORK/out" | tail -1 | cut -d= -f2)
      [ "${replayed:-0}" -ge 20 ] || fail "only ${replayed:-no} steps replayed ($mode)"
      grep -q "recording step .* failed" "$WORK/out" && fail "a recording failed ($mode): $(grep 'recording step' "$WORK/out")"
    done
    BIN=$real
    grep -q "Gradient buckets (distributed.stream_ordered: on): started by the training thread" "$WORK/out" ||
      fail "the log does not say the buckets are stream-ordered"
    grep -q "Update (optimizer.capturable: on): decided and applied on the device, recorded with each step" "$WORK/out" ||
      fail "the log does not say the update is recorded with the step"
    grep -q "^  graphs       : on: forward, backward and the gradient buckets' NCCL calls" "$WORK/out" ||
      fail "the plan does not say the buckets are recorded"
    [ -s "$WORK/losses-off" ] || fail "no losses logged"
    for mode in on capturable; do
      cmp "$WORK/losses-off" "$WORK/losses-$mode" || fail "stream-ordered buckets ($mode) logged other losses"
      same_tensors "$WORK/m-off/model.safetensors" "$WORK/m-$mode/model.safetensors" ||
        fail "stream-ordered buckets ($mode) trained another model"
    done
}

case_gpu_stream_ordered_stall_ends_the_job() {
    # With stream-ordered buckets a replayed step's collectives have no Work of their own: the
    # host's one wait for the step's end is watched. Rank 1 stops at step 8: rank 0 warns after
    # 1 s and ends the job with exit status 3 after 4 s, naming the step and rank 1.
    need_gpus 1
    local real=$BIN start elapsed
    nccl_logical_hosts
    start=$(date +%s)
    SDP_TEST_STALL_RANK=1 SDP_TEST_STALL_STEP=8 run 2 --config "$SRC/configs/quickstart.yaml" --set device=cuda \
      --set train.max_steps=30 "${NCCL_ARGS[@]}" --set distributed.stream_ordered=on --set train.cuda_graphs=on \
      --set distributed.stall_warning_s=1 --set distributed.timeout_s=4 --set output.metrics= \
      --set output.model_dir="$WORK/model"
    elapsed=$(( $(date +%s) - start ))
    BIN=$real
    [ $STATUS -eq 3 ] || fail "exit status $STATUS, expected 3"
    [ $elapsed -le 40 ] || fail "took ${elapsed}s to abort (timeout 4 s)"
    grep -q "^sdp-train: error: .*step 8.*the step's gradient buckets (distributed.stream_ordered)" "$WORK/out" ||
      fail "the abort message does not name the step and the stream-ordered buckets"
    grep -qE 'never arrived: .*1' "$WORK/out" || fail "the abort message does not name rank 1"
}

case_gpu_dp_hierarchical_replicas_identical() {
    # 4 ranks on 4 GPUs as 2 nodes x 2: the node phase and the cross-node phase over NCCL,
    # replicas bitwise identical after every step, for each algorithm a GPU can run.
    need_gpus 4
    for algo in hierarchical flat auto; do
      expect_ok 4 --config "$SRC/configs/quickstart.yaml" --set device=cuda --set train.max_steps=30 \
        --set distributed.ranks_per_node=2 --set distributed.allreduce=$algo --set distributed.check_every_steps=1 \
        --set distributed.bucket_mb=0.25 --set output.metrics= --set output.model_dir="$WORK/model"
    done
}

case_bench_allreduce_gpu() {
    # `bench allreduce --device cuda`: on GPUs (one per rank) NCCL rows, exact sums and the
    # ncclAllReduce peer; without them, an exit-2 error with the CUDA runtime's reason.
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [ "${gpus:-0}" -ge 1 ]; then
      expect_ok 1 bench allreduce --device cuda --min-bytes 4 --max-bytes 4194304 --factor 32 --iters 3 --warmup 1
      grep -qE '^ +4 +1 +nccl ' "$WORK/out" || fail "no nccl peer row"
      grep -qE '^ +131072 +32768 +hierarchical ' "$WORK/out" || fail "no hierarchical row"
      grep -qE '^ +4194304 +1048576 +mpi-staged ' "$WORK/out" || fail "no row of MPI staged through the host"
      grep -qE '^ +4194304 +1048576 +host-bound ' "$WORK/out" || fail "no host-bound row"
      awk '$1 ~ /^[0-9]+$/ && $7 != 0 { exit 1 }' "$WORK/out" || fail "a GPU row is not exact: $(cat "$WORK/out")"
      # 2 ranks sharing the GPU: no NCCL; the algorithms staged over MPI against the host bound,
      # and as 2 logical nodes the inter-node phase on the hosts.
      expect_ok 2 bench allreduce --device cuda --set distributed.share_gpus=true --set distributed.ranks_per_node=1 \
        --min-bytes 4096 --max-bytes 67108864 --factor 128 --iters 3 --warmup 1
      grep -q '^# peer "host-bound"' "$WORK/out" || fail "the shared-GPU table does not compare with the host bound"
      grep -qE '^ +67108864 +16777216 +hier-host ' "$WORK/out" || fail "no hierarchical row with the host inter-node phase"
      awk '$1 ~ /^[0-9]+$/ && $7 != 0 { exit 1 }' "$WORK/out" || fail "a shared-GPU row is not exact: $(cat "$WORK/out")"
    else
      expect_error 1 "device: cuda needs one GPU per rank, but node .* sees 0 GPU\\(s\\) \\(.+\\)|built without the CUDA backend" \
        bench allreduce --device cuda --max-bytes 65536
    fi
}

case_gpu_layer_times() {
    # #24 item 1 on the GPU: `bench layers` times ResNet-20's layers with CUDA events (fp32 and
    # amp-fp16: every convolution's forward and backward above zero, the input's copy and cast
    # timed), and output.timeline_layers puts them on the timeline's layers track inside each step.
    need_gpus 1
    local resnet=(--config "$SRC/configs/quickstart.yaml" --set device=cuda --set model.name=resnet20
                  --set data.synthetic.channels=3 --set data.synthetic.height=32 --set data.synthetic.width=32
                  --set data.synthetic.train_samples=512 --set data.batch_size=128)
    for precision in fp32 amp-fp16; do
        expect_ok 0 bench layers "${resnet[@]}" --set precision=$precision --steps 5 --warmup 2
        grep -q "^# bench layers: resnet20 on cuda:0, $precision" "$WORK/out" || fail "$precision: no table header"
        python3 - "$WORK/out" <<'PY' || fail "$precision: layer table not as expected"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[1:2] == ["conv"] and not l.startswith("conv ")]
assert len(rows) == 19 and all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows), rows
PY
    done
    expect_ok 0 "${resnet[@]}" --set train.max_steps=3 --set output.metrics= --set checkpoint.dir=ck \
        --set output.model_dir=model --set output.timeline=tl.json --set output.timeline_layers=true
    python3 - "$WORK/run$RUNS/tl.json" <<'PY' || fail "the layers track on the GPU not as expected"
import json, sys
trace = json.load(open(sys.argv[1]))["traceEvents"]
layers = [e for e in trace if e["ph"] == "X" and e["tid"] == 2]
assert {e["args"]["step"] for e in layers} == {0, 1, 2}
assert {(e["name"], e["cat"]) for e in layers} >= {("input", "forward"), ("conv1", "forward"), ("conv1", "backward")}
assert all(e["dur"] > 0 for e in layers if e["name"].endswith("conv1"))
PY
}
