#!/usr/bin/env bash
# Every GPU check and benchmark in few calls, for a session that is lent a GPU machine (which
# has no compiler or network: the binaries are built here, carried there, and run in stages
# of under 10 minutes each).
#
#   scripts/gpu-session.sh bundle [BUILD_DIR] [BUNDLE_DIR]
#       copies sdp-train and the test binaries of a CUDA build (default build/), stripped, and
#       the libraries the GPU machine lacks (oneDNN, yaml-cpp, libjpeg, TurboJPEG:
#       ../shared/notes/gpu-machine.md) into BUNDLE_DIR (default build-gpu-bundle/, git-ignored),
#       and packs it as BUNDLE_DIR.tgz (about 25 MiB) for the device tool's carry
#   (run unpacks BUNDLE_DIR.tgz when BUNDLE_DIR is absent, and finds the CUDA libraries of the
#   machine's PyTorch wheels)
#   scripts/gpu-session.sh run BUNDLE_DIR OUT_DIR STAGE...
#       on the GPU machine, from the repository root; STAGE is one or more of
#         tests   the unit tests (each layer's CUDA twin, optimizers, casts, ...) and the MPI
#                 tests (GPU memory staged over MPI with 2 ranks on GPU 0, NCCL on 1 rank)
#         e2e     every end-to-end GPU case of tests/e2e/cases/gpu.sh, one by one (only those
#                 E2E_CASES matches, when set: an extended regular expression)
#         bench   bench allreduce --device cuda (NCCL; 2 ranks sharing the GPU: staged MPI
#                 and the host inter-node phase against the host bound), then ResNet-50's
#                 step layer by layer (bench layers: fp32, amp-fp16)
#         channels-last
#                 the 16-bit channels_last path (model.memory_format): ResNet-50's step layer
#                 by layer in amp-fp16 and amp-bf16, NCHW against channels_last; its training
#                 rate and peak GPU memory (nvidia-smi, sampled) in each layout
#         memory  model.memory_plan: ResNet-50 amp-fp16 channels_last b256 training with
#                 per_layer and with the shared memory plan: peak GPU memory (nvidia-smi, and
#                 the runner's own allocations: gpu_memory_peak_mb) and rate; bench layers' memory line
#         loss-read
#                 train.loss_read: forward against step_end (one host wait a step less): the
#                 step of ResNet-20 b128 (fp32, amp-fp16), LeNet-5 b256 and ResNet-50 b256 amp-fp16
#                 (bench layers, whose step reads the loss as the trainer does)
#         algorithms
#                 the convolution algorithm rules on the models whose step is convolution backward
#                 (ResNet-20 b128 fp32 and amp-fp16, ResNet-50 b256 amp-fp16; bench layers): cuDNN's
#                 heuristics against algorithms timed by cuDNN, deterministic only and any; picks
#                 train.conv_algorithms' default
#         train-amp-channels-last
#                 ResNet-50 amp-fp16 channels_last against PyTorch channels_last, eager and
#                 compiled (scripts/bench_train.py; torch.compile's warm-up alone took over 100 s:
#                 give it STEP_TIMEOUT_S=300)
#         tf32    the fp32 step's math and algorithm rules: ResNet-50's layers in TF32 (NCHW and NHWC),
#                 and fp32 with any algorithm timed by cuDNN (NCHW and NHWC); then ResNet-50 in
#                 TF32 NHWC against PyTorch with TF32
#         decode  data.decode: gpu: the loader's images/s with nvJPEG against the CPU decoders and
#                 torchvision's GPU decode, on 4,000 JPEGs of 375x375; ResNet-50 amp trained from
#                 them (nvJPEG + f16 NHWC batches, the CPU decoders) against synthetic data
#         decode-data, decode-train
#                 decode's two halves: the loader alone (whole images and, data.decode_roi: on,
#                 each crop's region; the nvJPEG thread's time per batch by phase; each
#                 data.nvjpeg_backend), and the training runs
#         layers-amp
#                 ResNet-50 amp-fp16 b256's step layer by layer under the defaults
#         folded  model.batchnorm: folded_inner (the BatchNorms between two convolutions folded
#                 into them) and folded (each branch's last, with its sum, too): ResNet-50 b256's
#                 step layer by layer and its memory, amp-fp16 separate against folded_inner and
#                 folded (deterministic engines, and any), folded with model.grad_sum: fused (each
#                 block's gradient sum in its first convolution's pass), and amp-bf16 folded
#         fusions the fusions outside f16 NHWC, by kind: ResNet-50 bf16 NHWC (cuDNN's fused
#                 BatchNorm), ResNet-20 fp32 NCHW (the ReLU folded into the residual sum); TF32's
#                 are the tf32 stage's
#         graphs  train.cuda_graphs: on: each model's step with forward and backward replayed from
#                 one CUDA graph against the same step launched kernel by kernel, in one bench
#                 layers run each: MLP b128, LeNet-5 b256, ResNet-20 b128 fp32 and amp-fp16 (each
#                 with the update decided on the host, then on the device and recorded with the
#                 step: optimizer.capturable: on), ResNet-50 b256 amp-fp16
#         stream-ordered
#                 2 ranks as 2 logical hosts on one GPU (NCCL over loopback): ResNet-20 b128
#                 amp-fp16 trained with the buckets ordered by the communication thread, then
#                 stream-ordered and recorded with the step, then with the update too
#         train-resnet20
#                 ResNet-20 b128 in fp32 and amp-fp16 against PyTorch at its best (channels_last,
#                 torch.compile), sdp-train with its default CUDA graphs (#35's 1.5x goal)
#         train-best
#                 sdp-train at its best against PyTorch at its best, in one run each: the
#                 opt-in keys no GPU run has made defaults yet (ResNet-50 b256 amp-fp16 with
#                 model.batchnorm: folded and model.grad_sum: fused; ResNet-20 b128 fp32 with any
#                 algorithm timed by cuDNN,
#                 as cudnn.benchmark takes), both with train.deterministic: false, as PyTorch's
#         plan    `sdp-train plan` of ResNet-50 amp-fp16 on 1 to 64 p5.48xlarge nodes from this
#                 GPU's measured step; the compute file comes back for plans made elsewhere
#         train-fp32, train-amp
#                 training throughput against PyTorch at its best (scripts/bench_train.py:
#                 channels_last, cudnn.benchmark, torch.compile; skipped without torch), fp32
#                 and amp-fp16; each takes most of one 10-minute call
#       Each step's output goes to OUT_DIR/<step>.log and its exit status to OUT_DIR/summary.txt;
#       a step still running after STEP_TIMEOUT_S seconds (default 300) is stopped (rc=124).
#
# For example, with the device tool: carry ["build-gpu-bundle"], and the command
#   bash scripts/gpu-session.sh run build-gpu-bundle "$OUT" tests e2e
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

bundle() {
  local build=${1:-build} dest=${2:-build-gpu-bundle}
  [ -x "$build/sdp-train" ] || { echo "gpu-session: no $build/sdp-train (build first)" >&2; exit 2; }
  grep -q 'CUDA backend: built' <("$build/sdp-train" --version 2>&1) ||
    { echo "gpu-session: $build/sdp-train was built without the CUDA backend" >&2; exit 2; }
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$build/sdp-train" "$dest/"
  local t
  for t in "$build"/tests/test_* "$build"/tests/mpi/test_mpi_*; do
    [ -f "$t" ] && [ -x "$t" ] && cp "$t" "$dest/"
  done
  strip "$dest"/sdp-train "$dest"/test_*
  mkdir -p "$dest/lib"
  local lib
  for lib in libdnnl.so.2 libyaml-cpp.so.0.7 libjpeg.so.62 libturbojpeg.so.0; do
    local path
    path=$(ldd "$build/sdp-train" | awk -v l="$lib" '$1 == l {print $3}')
    [ -n "$path" ] && cp -L "$path" "$dest/lib/"
  done
  # data.decode: gpu loads libnvjpeg.so.13 at run time: the machine's own if it has one (the
  # library path below finds it first), else this one (PyPI's nvidia-nvjpeg, where configure saw it).
  local nvjpeg
  nvjpeg=$(sed -n 's/^SDP_NVJPEG_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null)
  [ -f "$nvjpeg" ] && cp -L "$nvjpeg" "$dest/lib/"
  # The test binaries look for test data and documents under this source path.
  pwd >"$dest/source-dir"
  tar czf "$dest.tgz" "$dest"
  du -sh "$dest" "$dest.tgz"
}

# The GPU machine's CUDA libraries come with its PyTorch wheels; the bundle's own libraries
# come last, for what the machine lacks.
set_library_path() {
  local dirs="" lib found
  for lib in libcudart.so.13 libcudnn.so.9 libnccl.so.2 libcublas.so.13 libnvjpeg.so.13; do
    found=$(find /opt /usr/local /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] && dirs="$dirs:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="${dirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$1/lib"
}

# step NAME COMMAND...: runs it, output to $OUT/NAME.log, status to the summary.
step() {
  local name=$1; shift
  local start=$SECONDS
  echo "== $name: $*" >&2
  # A step that hangs must not take the rest of the session's device time with it.
  timeout -k 5 "${STEP_TIMEOUT_S:-300}" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-48s rc=%-3s %4ss\n' "$name" "$rc" $((SECONDS - start)) | tee -a "$OUT/summary.txt" >&2
}

stage_tests() {
  local t
  for t in "$BUNDLE"/test_*; do
    case "$(basename "$t")" in
      test_mpi_*) ;;
      # Only the GPU tests: the CPU ones (minutes in test_nn) ran on the CPU machine.
      *) step "unit-$(basename "$t")" env OMP_NUM_THREADS=4 "$t" --gtest_brief=1 \
           --gtest_filter='*cuda*:*Cuda*:*Amp*:*OnDevice*:*DeviceMemory*:*Gpu*:*gpu*:*Staged*:*Nvjpeg*:*Tf32*' ;;
    esac
  done
  step mpi-collectives-np2 mpirun -np 2 --oversubscribe "$BUNDLE/test_mpi_collectives"
  [ -x "$BUNDLE/test_mpi_nccl" ] && step mpi-nccl-np1 mpirun -np 1 "$BUNDLE/test_mpi_nccl"
  step mpi-gradient-reducer-np2 mpirun -np 2 --oversubscribe "$BUNDLE/test_mpi_gradient_reducer"
}

stage_e2e() {
  local name
  for name in $(grep -oE '^case_(gpu_[a-z0-9_]+|bench_allreduce_gpu)' tests/e2e/cases/gpu.sh | sed 's/^case_//'); do
    # E2E_CASES (an extended regular expression) runs only the cases it matches.
    [[ -z "${E2E_CASES:-}" || "$name" =~ ^(${E2E_CASES})$ ]] || continue
    step "e2e-$name" bash tests/e2e/cli_test.sh "$BUNDLE/sdp-train" "$PWD" "$name"
  done
}

stage_bench() {
  local bin=$BUNDLE/sdp-train
  step bench-allreduce-nccl-1rank "$bin" bench allreduce --device cuda --min-bytes 4096 --max-bytes 268435456 --factor 4
  # 2 ranks on one GPU: no NCCL; the algorithms staged over MPI against the host bound
  # (#23: staged MPI at 64 MiB should reach >= 70 % of it), then as 2 logical nodes.
  step bench-allreduce-shared-1node mpirun -np 2 --oversubscribe "$bin" bench allreduce --device cuda \
    --set distributed.share_gpus=true --min-bytes 65536 --max-bytes 268435456 --factor 4
  step bench-allreduce-shared-2nodes mpirun -np 2 --oversubscribe "$bin" bench allreduce --device cuda \
    --set distributed.share_gpus=true --set distributed.ranks_per_node=1 --min-bytes 65536 --max-bytes 268435456 --factor 4
  # Where ResNet-50's step goes on the GPU (CUDA events around each layer), batch 256 as the
  # PyTorch rows; 256 synthetic images are enough for the shapes.
  local resnet50=(--config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256
                  --set data.synthetic.train_samples=256 --set device=cuda)
  step bench-layers-resnet50-fp32 "$bin" bench layers "${resnet50[@]}" --steps 20
  step bench-layers-resnet50-amp-fp16 "$bin" bench layers "${resnet50[@]}" --set precision=amp-fp16 --steps 20
}

# peak_memory NAME COMMAND...: runs the command as a step while nvidia-smi samples the GPU's
# memory in use every 100 ms; the peak (MiB) goes to the summary.
peak_memory() {
  local name=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$OUT/$name.memory" 2>/dev/null &
  local sampler=$!
  step "$name" "$@"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  echo "$name: peak GPU memory $(sort -n "$OUT/$name.memory" | tail -1) MiB, $(grep -oE 'gpu_memory_peak_mb=[0-9.]+' "$OUT/$name.log" | tail -1), $(grep -oE 'images_per_sec=[0-9.]+' "$OUT/$name.log" | tail -5 | sort | sed -n 3p)" |
    tee -a "$OUT/summary.txt" >&2
  # What the runner's peak held (arena, parameters, workspace, ...), as its log says.
  grep -h 'GPU memory at its peak' "$OUT/$name.log" | tail -1 | sed "s/^/$name: /" | tee -a "$OUT/summary.txt" >&2 || true
}

stage_channels_last() {
  local bin=$BUNDLE/sdp-train
  local resnet50=(--config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256
                  --set data.synthetic.train_samples=256 --set device=cuda)
  local p f
  for p in amp-fp16 amp-bf16; do
    for f in nchw channels_last; do
      step "bench-layers-resnet50-$p-$f" "$bin" bench layers "${resnet50[@]}" --set precision=$p \
        --set model.memory_format=$f --steps 10
    done
  done
  # Training: 30 steps of batch 256 (the median step rate of the last ones), as the PyTorch rows.
  for f in nchw channels_last; do
    peak_memory "train-resnet50-amp-fp16-$f" "$bin" --config configs/resnet50-synthetic-bench.yaml \
      --set data.batch_size=256 --set data.synthetic.train_samples=1024 --set device=cuda --set precision=amp-fp16 \
      --set model.memory_format=$f --set train.epochs=8 --set train.max_steps=30 --set train.log_every=1 --set train.eval_every_epochs=0 \
      --set checkpoint.every_steps=0 --set checkpoint.dir="$OUT/ck-$f" --set output.model_dir="$OUT/m-$f" \
      --set output.metrics=
  done
}

# model.memory_plan (issue #34 item 3: peak memory against PyTorch channels_last amp's
# 11.0 GB): the same training with one shared arena and with the lean one (per_layer, 29,011
# MiB, was measured on 2026-11-26; MEMORY_PLANS overrides the list).
stage_memory() {
  local bin=$BUNDLE/sdp-train b
  for b in ${MEMORY_PLANS:-shared lean}; do
    step "bench-layers-resnet50-amp-fp16-$b" "$bin" bench layers --config configs/resnet50-synthetic-bench.yaml \
      --set data.batch_size=256 --set data.synthetic.train_samples=256 --set device=cuda --set precision=amp-fp16 \
      --set model.memory_plan=$b --steps 10
    grep -h '^# memory' "$OUT/bench-layers-resnet50-amp-fp16-$b.log" | tee -a "$OUT/summary.txt" >&2
    peak_memory "train-resnet50-amp-fp16-memory-plan-$b" "$bin" --config configs/resnet50-synthetic-bench.yaml \
      --set data.batch_size=256 --set data.synthetic.train_samples=1024 --set device=cuda --set precision=amp-fp16 \
      --set model.memory_plan=$b --set train.epochs=8 --set train.max_steps=30 --set train.log_every=1 \
      --set train.eval_every_epochs=0 --set checkpoint.every_steps=0 --set checkpoint.dir="$OUT/ck-g-$b" \
      --set output.model_dir="$OUT/m-g-$b" --set output.metrics=
  done
}

stage_loss_read() {
  local bin=$BUNDLE/sdp-train r
  for r in forward step_end; do
    step "bench-layers-resnet20-fp32-$r" "$bin" bench layers --config configs/resnet20-cifar10.yaml \
      --set data.format=synthetic --set data.synthetic.channels=3 --set data.synthetic.height=32 \
      --set data.synthetic.width=32 --set data.batch_size=128 --set device=cuda --set train.loss_read=$r --steps 50
    step "bench-layers-resnet20-amp-fp16-$r" "$bin" bench layers --config configs/resnet20-cifar10.yaml \
      --set data.format=synthetic --set data.synthetic.channels=3 --set data.synthetic.height=32 \
      --set data.synthetic.width=32 --set data.batch_size=128 --set device=cuda --set precision=amp-fp16 \
      --set train.loss_read=$r --steps 50
    step "bench-layers-lenet5-fp32-$r" "$bin" bench layers --config configs/lenet-mnist.yaml --set data.format=synthetic \
      --set data.batch_size=256 --set device=cuda --set train.loss_read=$r --steps 50
    step "bench-layers-resnet50-amp-fp16-$r" "$bin" bench layers --config configs/resnet50-synthetic-bench.yaml \
      --set data.batch_size=256 --set data.synthetic.train_samples=256 --set device=cuda --set precision=amp-fp16 \
      --set train.loss_read=$r --steps 10
  done
  grep -H '^# step' "$OUT"/bench-layers-*-forward.log "$OUT"/bench-layers-*-step_end.log | tee -a "$OUT/summary.txt" >&2
}

stage_algorithms() {
  local bin=$BUNDLE/sdp-train rules name
  local resnet20=(--config configs/resnet20-cifar10.yaml --set data.format=synthetic --set data.synthetic.channels=3
                  --set data.synthetic.height=32 --set data.synthetic.width=32 --set data.batch_size=128 --set device=cuda)
  local resnet50=(--config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256
                  --set data.synthetic.train_samples=256 --set device=cuda --set precision=amp-fp16)
  for rules in heuristic-deterministic measured-deterministic measured-any; do
    local keys=(--set train.conv_algorithms=${rules%-*} --set train.deterministic=$([ "${rules#*-}" = any ] && echo false || echo true))
    step "bench-layers-resnet20-fp32-$rules" "$bin" bench layers "${resnet20[@]}" "${keys[@]}" --steps 50
    step "bench-layers-resnet20-amp-fp16-$rules" "$bin" bench layers "${resnet20[@]}" --set precision=amp-fp16 \
      "${keys[@]}" --steps 50
    step "bench-layers-resnet50-amp-fp16-$rules" "$bin" bench layers "${resnet50[@]}" "${keys[@]}" --steps 10
  done
  for name in resnet20-fp32 resnet20-amp-fp16 resnet50-amp-fp16; do
    grep -H '^# step' "$OUT"/bench-layers-$name-*-deterministic.log "$OUT"/bench-layers-$name-measured-any.log |
      tee -a "$OUT/summary.txt" >&2
  done
}

# ResNet-50 amp-fp16 b256's step layer by layer under the defaults (its kinds' shares).
stage_layers_amp() {
  step bench-layers-resnet50-amp-fp16 "$BUNDLE/sdp-train" bench layers --config configs/resnet50-synthetic-bench.yaml \
    --set data.batch_size=256 --set data.synthetic.train_samples=256 --set device=cuda --set precision=amp-fp16 \
    --steps 10
}

# model.batchnorm: folded_inner and folded against separate, the same ResNet-50 b256 step (bench
# layers: the step's time by kind, and the memory line: the arena without the folded BatchNorms'
# outputs).
stage_folded() {
  local bin=$BUNDLE/sdp-train run
  # deterministic false lets cuDNN take any engine (genstats and dbn_weight sum over the batch).
  for run in amp-fp16:separate:true amp-fp16:folded_inner:true amp-fp16:folded:true amp-fp16:folded:false \
    amp-bf16:folded:true; do
    local p=${run%%:*} rest=${run#*:}
    local b=${rest%%:*} deterministic=${rest#*:}
    step bench-layers-resnet50-$p-bn-$b-deterministic-$deterministic "$bin" bench layers \
      --config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256 --set data.synthetic.train_samples=256 \
      --set device=cuda --set precision=$p --set model.batchnorm=$b --set train.deterministic=$deterministic --steps 10
  done
  step bench-layers-resnet50-amp-fp16-bn-folded-grad-sum-fused "$bin" bench layers \
    --config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256 --set data.synthetic.train_samples=256 \
    --set device=cuda --set precision=amp-fp16 --set model.batchnorm=folded --set model.grad_sum=fused --steps 10
  grep -H -E '^# (step|memory|batchnorm|grad sum)' "$OUT"/bench-layers-resnet50-*-bn-*.log |
    tee -a "$OUT/summary.txt" >&2
}

# The fusions outside f16 NHWC, by kind (TF32's are the tf32 stage's): bf16 NHWC, where cuDNN's
# fused BatchNorm is taken where it accepts bf16, and fp32 NCHW, where the ReLU folds into the
# residual sum and its derivative into the next block's gradient sum.
stage_fusions() {
  local bin=$BUNDLE/sdp-train
  step bench-layers-resnet50-amp-bf16-channels_last "$bin" bench layers --config configs/resnet50-synthetic-bench.yaml \
    --set data.batch_size=256 --set data.synthetic.train_samples=256 --set device=cuda \
    --set model.memory_format=channels_last --set precision=amp-bf16 --steps 10
  step bench-layers-resnet20-fp32 "$bin" bench layers --config configs/resnet20-cifar10.yaml --set data.format=synthetic \
    --set data.synthetic.channels=3 --set data.synthetic.height=32 --set data.synthetic.width=32 \
    --set data.batch_size=128 --set device=cuda --steps 50
}

stage_graphs() {
  local bin=$BUNDLE/sdp-train graphs=(--set device=cuda --set train.cuda_graphs=on) c p
  # Each row twice: the update decided on the host after the replay, then recorded with it
  # (optimizer.capturable: on).
  for c in off on; do
    step bench-layers-mlp-graphs-update-$c "$bin" bench layers --config configs/quickstart.yaml \
      --set data.batch_size=128 "${graphs[@]}" --set optimizer.capturable=$c --steps 50
    step bench-layers-lenet5-graphs-update-$c "$bin" bench layers --config configs/lenet-mnist.yaml \
      --set data.format=synthetic --set data.batch_size=256 "${graphs[@]}" --set optimizer.capturable=$c --steps 50
    for p in fp32 amp-fp16; do
      step bench-layers-resnet20-$p-graphs-update-$c "$bin" bench layers --config configs/resnet20-cifar10.yaml \
        --set data.format=synthetic --set data.synthetic.channels=3 --set data.synthetic.height=32 \
        --set data.synthetic.width=32 --set data.batch_size=128 --set precision=$p "${graphs[@]}" \
        --set optimizer.capturable=$c --steps 50
    done
  done
  step bench-layers-resnet50-amp-fp16-graphs "$bin" bench layers --config configs/resnet50-synthetic-bench.yaml \
    --set data.batch_size=256 --set data.synthetic.train_samples=256 --set precision=amp-fp16 "${graphs[@]}" --steps 10
  grep -H '^# step' "$OUT"/bench-layers-*-graphs*.log | tee -a "$OUT/summary.txt" >&2
}

# 2 ranks as 2 logical hosts on one GPU, NCCL over loopback sockets (each with an NCCL_HOSTID
# of its own): the buckets ordered by the communication thread, then stream-ordered and recorded
# with the step, then with the update too. What a step's host waits cost across ranks.
stage_stream_ordered() {
  local bin=$BUNDLE/sdp-train wrapper=$OUT/own-host.sh mode
  cat >"$wrapper" <<SH
#!/usr/bin/env bash
NCCL_HOSTID=sdp-logical-host-\$OMPI_COMM_WORLD_RANK NCCL_SOCKET_IFNAME=lo exec "$bin" "\$@"
SH
  chmod +x "$wrapper"
  for mode in off on capturable; do
    step "train-resnet20-amp-fp16-np2-stream-ordered-$mode" mpirun -np 2 --oversubscribe "$wrapper" \
      --config configs/resnet20-cifar10.yaml --set data.format=synthetic --set data.synthetic.channels=3 \
      --set data.synthetic.height=32 --set data.synthetic.width=32 --set data.batch_size=128 --set device=cuda \
      --set precision=amp-fp16 --set train.max_steps=200 --set train.eval_every_epochs=0 --set output.metrics= \
      --set output.model_dir="$OUT/m-$mode" --set distributed.share_gpus=true --set distributed.ranks_per_node=1 \
      --set distributed.backend=nccl --set distributed.inter_node=nccl --set distributed.allreduce=hierarchical \
      --set train.cuda_graphs=on --set distributed.stream_ordered=${mode/capturable/on} \
      --set optimizer.capturable=$([ $mode = capturable ] && echo on || echo off)
  done
  grep -H '^\[done\]' "$OUT"/train-resnet20-amp-fp16-np2-stream-ordered-*.log | tee -a "$OUT/summary.txt" >&2
}

stage_train_resnet20() {
  have_torch_cuda || return 0
  local p
  for p in fp32 amp-fp16; do
    step bench-train-resnet20-$p python3 scripts/bench_train.py --binary "$BUNDLE/sdp-train" --device cuda --rounds 1 \
      --steps 50 --threads 4 --precision $p --rows resnet20:128
  done
}

# scripts/bench_train.py's --sdp-set passes the keys to sdp-train's runs only.
stage_train_best() {
  have_torch_cuda || return 0
  local bin=$BUNDLE/sdp-train
  step bench-train-best-resnet50-amp-fp16 python3 scripts/bench_train.py --binary "$bin" --device cuda --rounds 1 \
    --steps 20 --threads 4 --precision amp-fp16 --memory-format channels_last --torch-formats channels_last \
    --rows resnet50:256 --sdp-set model.batchnorm=folded --sdp-set model.grad_sum=fused \
    --sdp-set train.deterministic=false
  step bench-train-best-resnet20-fp32 python3 scripts/bench_train.py --binary "$bin" --device cuda --rounds 1 \
    --steps 50 --threads 4 --precision fp32 --rows resnet20:128 --sdp-set train.deterministic=false \
    --sdp-set train.conv_algorithms=measured
}

stage_train_amp_channels_last() {
  have_torch_cuda || return 0
  local bin=$BUNDLE/sdp-train
  step bench-train-amp-fp16-channels-last python3 scripts/bench_train.py --binary "$bin" --device cuda --rounds 1 \
    --steps 20 --threads 4 --precision amp-fp16 --memory-format channels_last --torch-formats channels_last \
    --rows resnet50:256
}

stage_tf32() {
  local bin=$BUNDLE/sdp-train
  local resnet50=(--config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256
                  --set data.synthetic.train_samples=256 --set device=cuda)
  local f
  for f in nchw channels_last; do
    step bench-layers-resnet50-tf32-$f "$bin" bench layers "${resnet50[@]}" --set precision=tf32 \
      --set model.memory_format=$f --steps 10
  done
  step bench-layers-resnet50-fp32-any-measured "$bin" bench layers "${resnet50[@]}" --set precision=fp32 \
    --set train.deterministic=false --set train.conv_algorithms=measured --steps 10
  step bench-layers-resnet50-fp32-any-measured-channels_last "$bin" bench layers "${resnet50[@]}" \
    --set precision=fp32 --set model.memory_format=channels_last --set train.deterministic=false \
    --set train.conv_algorithms=measured --steps 10
  have_torch_cuda || return 0
  step bench-train-tf32 python3 scripts/bench_train.py --binary "$bin" --device cuda --rounds 1 --steps 20 \
    --threads 4 --precision tf32 --memory-format channels_last --torch-formats nchw,channels_last --no-compile \
    --rows resnet50:256
}

# `sdp-train plan` from this GPU's measured step (docs/guides/plan.md): the compute file comes back
# in $OUT, so plans for other node counts and instances can be made on any machine.
stage_plan() {
  local bin=$BUNDLE/sdp-train
  step plan-resnet50-amp-p5 "$bin" plan --config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256 \
    --set data.synthetic.train_samples=2048 --samples-per-epoch 1281167 --set device=cuda --set precision=amp-fp16 \
    --nodes 1,2,4,8,16,64 --instance p5.48xlarge --instances configs/plan/instances.yaml \
    --save-compute "$OUT/resnet50-amp-fp16-compute.json"
}

# data.decode: gpu (docs/data-formats.md, "Decoding on the GPU"): 4,000 JPEGs of 375x375 at
# q90, as the measure of #36; the loader's images/s with nvJPEG (1 and 2 CPU workers) against
# the CPU decoders (1 to 14 workers), and torchvision's GPU decode (nvJPEG too) as the peer.
decode_jpegs() {
  [ -d "$OUT/../decode-jpegs" ] ||
    step decode-make-jpegs "$BUNDLE/sdp-train" data convert --from synthetic --synthetic-samples 4000 --resize 375 \
      --quality 90 --format image-folder --output "$OUT/../decode-jpegs"
  decode_job=(--config configs/resnet50-synthetic-bench.yaml --set data.format=image-folder
              --set data.train="$OUT/../decode-jpegs" --set data.test="$OUT/../decode-jpegs" --set data.batch_size=256)
}

stage_decode() {
  stage_decode_data
  stage_decode_train
}

# The loader alone: nvJPEG (8-bit crops normalised on the host, or in the kernel) against the
# CPU decoders and torchvision's GPU decode.
stage_decode_data() {
  local bin=$BUNDLE/sdp-train data=$OUT/../decode-jpegs
  decode_jpegs
  local job=("${decode_job[@]}")
  step bench-data-decode-gpu "$bin" bench data "${job[@]}" --set data.decode=gpu --set data.normalize_on=cpu \
    --workers 1,2 --batches 30
  # data.normalize_on: gpu: the kernel writes the batch; the threads only read and parse (f32
  # NCHW, and f16 NHWC as a 16-bit channels_last model loads it).
  step bench-data-decode-gpu-normalized "$bin" bench data "${job[@]}" --set data.decode=gpu --set data.normalize_on=gpu \
    --workers 1,2 --batches 30
  step bench-data-decode-gpu-normalized-f16 "$bin" bench data "${job[@]}" --set data.decode=gpu --set data.normalize_on=gpu \
    --set device=cuda --set precision=amp-fp16 --workers 1,2 --batches 30
  # data.decode_roi: on: the hardware decoder decodes each crop's region alone (against the
  # row above: what auto should take).
  step bench-data-decode-gpu-regions-f16 "$bin" bench data "${job[@]}" --set data.decode=gpu --set data.normalize_on=gpu \
    --set data.decode_roi=on --set device=cuda --set precision=amp-fp16 --workers 1,2 --batches 30
  # data.nvjpeg_backend: the GPU-assisted backend and nvJPEG's own choice against the
  # hardware decoder of the rows above, in the same f16 NHWC configuration.
  local backend
  for backend in gpu_hybrid nvjpeg_default; do
    step bench-data-decode-gpu-normalized-f16-$backend "$bin" bench data "${job[@]}" --set data.decode=gpu \
      --set data.normalize_on=gpu --set data.nvjpeg_backend=$backend --set device=cuda --set precision=amp-fp16 \
      --workers 1,2 --batches 30
  done
  step bench-data-decode-cpu "$bin" bench data "${job[@]}" --set data.decode=cpu --workers 1,2,8,14 --batches 10
  # Where the GPU decoder's thread spends a batch (#36: which phase keeps 2 threads under 10,000/s).
  grep -H '^# nvJPEG thread' "$OUT"/bench-data-decode-gpu*.log | tee -a "$OUT/summary.txt" >&2
  have_torch_cuda || return 0
  step decode-torchvision-gpu python3 - "$data" <<'PY'
import pathlib, sys, time, torch, torchvision
from torchvision.io import decode_jpeg, read_file
files = sorted(pathlib.Path(sys.argv[1]).rglob("*.jpg"))[:2048]
data = [read_file(str(f)) for f in files]
decode_jpeg(data[:256], device="cuda"); torch.cuda.synchronize()
start = time.perf_counter()
for i in range(0, len(data), 256):
    decode_jpeg(data[i:i + 256], device="cuda")
torch.cuda.synchronize()
print(f"torchvision decode_jpeg(device='cuda'), batches of 256: {len(data) / (time.perf_counter() - start):.0f} images/s (decode only)")
PY
}

# ResNet-50 amp-fp16 trained from those JPEGs against synthetic data.
stage_decode_train() {
  local bin=$BUNDLE/sdp-train
  decode_jpegs
  local job=("${decode_job[@]}")
  # ResNet-50 amp-fp16 trained from those JPEGs (#36: >= 0.95x its synthetic rate): nvJPEG with
  # 2 loader threads and batches in the model's f16 NHWC, against the CPU decoders on 14 threads
  # and against synthetic data (30 steps each, the median rate of the last ones).
  local train=(--set device=cuda --set precision=amp-fp16 --set train.epochs=8 --set train.max_steps=30
               --set train.log_every=1 --set train.eval_every_epochs=0 --set checkpoint.every_steps=0
               --set output.metrics=)
  peak_memory train-resnet50-jpeg-gpu-decode "$bin" "${job[@]}" "${train[@]}" --set data.decode=gpu \
    --set data.normalize_on=cpu --set data.batch_type=compute --set train.loss_read=step_end --set model.memory_plan=shared \
    --set checkpoint.dir="$OUT/ck-jg" --set output.model_dir="$OUT/m-jg"
  peak_memory train-resnet50-jpeg-gpu-decode-normalized "$bin" "${job[@]}" "${train[@]}" --set data.decode=gpu \
    --set data.normalize_on=gpu --set checkpoint.dir="$OUT/ck-jn" --set output.model_dir="$OUT/m-jn"
  peak_memory train-resnet50-jpeg-cpu-decode "$bin" "${job[@]}" "${train[@]}" --set data.decode=cpu \
    --set data.workers=14 --set checkpoint.dir="$OUT/ck-jc" --set output.model_dir="$OUT/m-jc"
  peak_memory train-resnet50-synthetic "$bin" --config configs/resnet50-synthetic-bench.yaml --set data.batch_size=256 \
    --set data.synthetic.train_samples=1024 "${train[@]}" --set train.loss_read=step_end --set model.memory_plan=shared \
    --set checkpoint.dir="$OUT/ck-js" --set output.model_dir="$OUT/m-js"
}

have_torch_cuda() {
  python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && return 0
  echo "bench-train: skipped (no PyTorch with CUDA on this machine)" | tee -a "$OUT/summary.txt" >&2
  return 1
}

stage_train_fp32() {
  have_torch_cuda || return 0
  step bench-train-fp32 python3 scripts/bench_train.py --binary "$BUNDLE/sdp-train" --device cuda --rounds 2 \
    --steps 20 --threads 4 --rows mlp:128,lenet5:256,resnet20:128,resnet50:256
}

stage_train_amp() {
  have_torch_cuda || return 0
  step bench-train-amp-fp16 python3 scripts/bench_train.py --binary "$BUNDLE/sdp-train" --device cuda --rounds 2 \
    --steps 20 --threads 4 --precision amp-fp16 --rows resnet20:128,resnet50:256
}

case "${1:-}" in
  bundle) shift; bundle "$@" ;;
  run)
    [ $# -ge 4 ] || usage
    [ -d "$2" ] || [ ! -f "$2.tgz" ] || tar xzf "$2.tgz"
    BUNDLE=$(cd "$2" 2>/dev/null && pwd) OUT=$3; shift 3  # absolute: the e2e cases run from their own directories
    [ -n "$BUNDLE" ] && [ -x "$BUNDLE/sdp-train" ] ||
      { echo "gpu-session: no sdp-train in the bundle (scripts/gpu-session.sh bundle)" >&2; exit 2; }
    mkdir -p "$OUT"
    set_library_path "$BUNDLE"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
    # The test binaries look for test data and documents under the source path of the build
    # machine; point it at this checkout when that path does not exist here.
    src=$(cat "$BUNDLE/source-dir" 2>/dev/null || true)
    if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
    { date -u; nvidia-smi; "$BUNDLE/sdp-train" --version; } >"$OUT/machine.txt" 2>&1
    for stage in "$@"; do
      case "$stage" in
        tests) stage_tests ;;
        e2e) stage_e2e ;;
        bench) stage_bench ;;
        channels-last) stage_channels_last ;;
        memory) stage_memory ;;
        loss-read) stage_loss_read ;;
        algorithms) stage_algorithms ;;
        train-amp-channels-last) stage_train_amp_channels_last ;;
        tf32) stage_tf32 ;;
        plan) stage_plan ;;
        decode) stage_decode ;;
        decode-data) stage_decode_data ;;
        decode-train) stage_decode_train ;;
        layers-amp) stage_layers_amp ;;
        folded) stage_folded ;;
        fusions) stage_fusions ;;
        graphs) stage_graphs ;;
        stream-ordered) stage_stream_ordered ;;
        train-resnet20) stage_train_resnet20 ;;
        train-best) stage_train_best ;;
        train-fp32) stage_train_fp32 ;;
        train-amp) stage_train_amp ;;
        *) usage ;;
      esac
    done
    cat "$OUT/summary.txt"
    ;;
  *) usage ;;
esac
