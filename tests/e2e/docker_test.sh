#!/usr/bin/env bash
# Container tests of the SageMaker image: `docker_test.sh SOURCE_DIR CASE`. Each case runs a
# job through scripts/sagemaker-local.sh (containers algo-1..algo-N on one Docker network,
# started as SageMaker starts them: `docker run IMAGE train`, nothing but /opt/ml given).
# Skipped (exit 77) without a Docker daemon, without the image ($SDP_IMAGE, default
# sdp-train:test; build it with `scripts/sagemaker-local.sh --build-only`), or without MNIST.
set -u
SRC=$1
CASE=$2
IMAGE=${SDP_IMAGE:-sdp-train:test}
BUILD_HINT="scripts/sagemaker-local.sh --build-only"
# gpu_image checks the GPU image of Dockerfile.gpu ($SDP_GPU_IMAGE); the other cases run jobs
# and pass against either image (SDP_IMAGE=sdp-train:gpu runs them on the GPU one).
if [ "$CASE" = gpu_image ]; then
  IMAGE=${SDP_GPU_IMAGE:-sdp-train:gpu}
  BUILD_HINT="scripts/sagemaker-local.sh --build-only --gpu"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

skip() { echo "SKIP [$CASE]: $*"; exit 77; }
fail() { echo "FAIL [$CASE]: $*"; echo "--- output ---"; cat "$WORK/out" 2>/dev/null; exit 1; }
docker info >/dev/null 2>&1 || skip "no Docker daemon answers (docker info)"
docker image inspect "$IMAGE" >/dev/null 2>&1 ||
  skip "no image $IMAGE (build it: $BUILD_HINT)"
# Only an image built from this tree: its label is the hash of what its Dockerfile copied
# (scripts/sagemaker-local.sh --source-hash), so a stale image is never what passes.
DOCKERFILE=$(docker image inspect -f '{{index .Config.Labels "org.sdp-train.dockerfile"}}' "$IMAGE" 2>/dev/null)
[ -n "$DOCKERFILE" ] || DOCKERFILE=Dockerfile
want=$(bash "$SRC/scripts/sagemaker-local.sh" --source-hash "$DOCKERFILE")
have=$(docker image inspect -f '{{index .Config.Labels "org.sdp-train.source"}}' "$IMAGE" 2>/dev/null)
[ "$have" = "$want" ] ||
  skip "image $IMAGE was not built from this tree (label org.sdp-train.source '${have:-none}', this tree's $DOCKERFILE sources $want): rebuild it ($BUILD_HINT)"
need_mnist() {
  MNIST="${SDP_DATA_DIR:-$SRC/../shared/data}/mnist"
  [ -d "$MNIST" ] || skip "no MNIST at $MNIST (set SDP_DATA_DIR to a directory with mnist/)"
}

# job ARGS...: scripts/sagemaker-local.sh with the job's /opt/ml trees in $WORK/ml, output
# in $WORK/out, exit status in $STATUS, seconds in $SECONDS_TAKEN.
job() {
  local start
  start=$(date +%s)
  bash "$SRC/scripts/sagemaker-local.sh" --image "$IMAGE" --out "$WORK/ml" --job "sdp-test-$$-$CASE" "$@" >"$WORK/out" 2>&1
  STATUS=$?
  SECONDS_TAKEN=$(( $(date +%s) - start ))
  echo "[$CASE] job $* -> exit status $STATUS in ${SECONDS_TAKEN}s"
}

case "$CASE" in
  gpu_image)
    # The image for GPU instances: sdp-train built with CUDA, the CUDA libraries from the
    # wheels in /usr/local/cuda/lib, each one resolved; no compiler in it.
    docker run --rm --entrypoint sdp-train "$IMAGE" --version >"$WORK/out" 2>&1 || fail "--version failed"
    cat "$WORK/out"
    grep -q 'CUDA backend: built' "$WORK/out" || fail "sdp-train in $IMAGE is built without CUDA"
    for lib in 'CUDA runtime 13\.0 \(/usr/local/cuda/lib/libcudart\.so\.13\)' 'cuDNN 9\.19\.[0-9]+ \(/usr/local/cuda/lib/libcudnn\.so\.9\)' \
               'cuBLAS 13\.[0-9.]+ \(/usr/local/cuda/lib/libcublas\.so\.13\)' 'NCCL 2\.28\.[0-9]+ \(/usr/local/cuda/lib/libnccl\.so\.2\)' \
               'nvJPEG ([0-9.]+ \(/.*libnvjpeg\.so\.13\)|not loaded: .+)'; do
      grep -qE "^  $lib\$" "$WORK/out" || fail "--version has no line /$lib/"
    done
    # Every NEEDED library of sdp-train and of the CUDA libraries resolves, but the driver's
    # libcuda.so.1, which the NVIDIA container runtime mounts from the host.
    docker run --rm --entrypoint sh "$IMAGE" -c \
      'for f in /usr/local/bin/sdp-train /usr/local/cuda/lib/*.so*; do ldd "$f" | sed "s|^|$f: |"; done' >"$WORK/out" 2>&1 ||
      fail "ldd failed"
    grep 'not found' "$WORK/out" | grep -v 'libcuda\.so\.1 ' && fail "unresolved libraries (above)"
    echo "ldd: $(grep -c '=>' "$WORK/out") libraries resolved for $(cut -d: -f1 "$WORK/out" | sort -u | wc -l) files"
    docker run --rm --entrypoint sh "$IMAGE" -c \
      'for c in gcc g++ cc c++ nvcc cmake ld; do command -v $c; done; ls /usr/lib/gcc/x86_64-linux-gnu/*/cc1 2>/dev/null; ls /usr/local/cuda/include 2>/dev/null | head -1' >"$WORK/out" 2>&1
    [ -s "$WORK/out" ] && fail "compilers or headers in the runtime image: $(tr '\n' ' ' <"$WORK/out")"
    echo "no compiler, no CUDA headers in $IMAGE" ;;
  input_modes)
    # SageMaker's input modes on two hosts: a training channel in Pipe mode (FIFOs
    # /opt/ml/input/data/training_0, _1, ... fed from outside, one reader per host) and the
    # same channel distributed ShardedByS3Key in File mode (each host its own files:
    # data.shard auto -> host), the test channel FullyReplicated in File mode.
    mkdir -p "$WORK/data"
    docker run --rm --entrypoint sdp-train -v "$WORK/data:/data" "$IMAGE" data convert --from synthetic \
      --format tfrecord --output /data/train --synthetic-samples 2048 --shards 4 >/dev/null || fail "convert"
    docker run --rm --entrypoint sdp-train -v "$WORK/data:/data" "$IMAGE" data convert --from synthetic \
      --split test --format tfrecord --output /data/test --synthetic-samples 512 >/dev/null || fail "convert"
    hp='{"config": "quickstart.yaml", "threads": "1", "data.format": "tfrecord", "data.samples_per_epoch": "2048",
         "data.image_size": "24", "data.resize": "32", "train.epochs": "2"}'
    for distribution in FullyReplicated ShardedByS3Key; do
      job -n 2 --input-mode training=Pipe --distribution training=$distribution --channel "training=$WORK/data/train" \
        --channel "test=$WORK/data/test" --hyperparameters "$hp"
      [ $STATUS -eq 0 ] || fail "Pipe, $distribution: exit status $STATUS"
      grep -q '^\[algo-1\] .*training data tfrecord pipe:/opt/ml/input/data/training: 2048 samples per epoch' "$WORK/out" ||
        fail "Pipe, $distribution: the channel was not read as a pipe"
      grep -qE '^\[algo-1\] \[done\] steps=32 .*test_accuracy=(0\.9|1)' "$WORK/out" || fail "Pipe, $distribution: not 32 steps that learn"
      rm -rf "$WORK/ml"
    done
    job -n 2 --distribution training=ShardedByS3Key --channel "training=$WORK/data/train" --channel "test=$WORK/data/test" \
      --hyperparameters "$hp"
    [ $STATUS -eq 0 ] || fail "File, ShardedByS3Key: exit status $STATUS"
    grep -q '^\[algo-1\] .*training data tfrecord:/opt/ml/input/data/training: 1024 samples' "$WORK/out" ||
      fail "File, ShardedByS3Key: a host did not see its half"
    grep -q '^\[algo-1\] .*data.shard host: each host reads its own set; steps per epoch 16' "$WORK/out" ||
      fail "File, ShardedByS3Key: data.shard auto did not split per host" ;;
  two_hosts_lenet)
    # Two containers train LeNet-5 for one epoch through the entry point; the model lands in
    # the leader's /opt/ml/model only, the metrics line says 2 ranks.
    need_mnist
    job -n 2 --channel "training=$MNIST" --hyperparameters "{\"config\": \"lenet-mnist.yaml\", \"threads\": \"1\", \"train.epochs\": \"1\", \"train.log_every\": \"100\"}"
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    grep -q '^\[algo-1\] \[start\] world_size=2 ' "$WORK/out" || fail "not 2 ranks"
    grep -q '^\[algo-1\] .*all 2 hosts reached' "$WORK/out" || fail "the leader did not report reaching the worker"
    grep -q '^\[algo-2\] sagemaker-entrypoint: worker algo-2: the leader.s job ended with exit status 0' "$WORK/out" || fail "the worker was not told the job ended"
    acc=$(grep -oE '^\[algo-1\] \[epoch 1\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= 0.9 else 1)" || fail "test_accuracy ${acc:-none} < 0.9"
    [ -s "$WORK/ml/algo-1/model/model.safetensors" ] || fail "no model in the leader's /opt/ml/model"
    [ ! -e "$WORK/ml/algo-2/model/model.safetensors" ] || fail "a worker wrote the model"
    ls "$WORK/ml/algo-1/checkpoints"/ckpt-*.safetensors >/dev/null 2>&1 || fail "no checkpoint in the leader's /opt/ml/checkpoints"
    grep -q 'exited with status 0' "$WORK/out" || fail "no container status"
    echo "test_accuracy=$acc" ;;
  worker_never_up)
    # algo-2 is in the resourceconfig but never starts: the leader gives up after its bound
    # with an error naming it.
    job -n 2 --absent algo-2 --env SDP_HOSTS_TIMEOUT_S=10 --hyperparameters '{"config": "quickstart.yaml"}'
    [ $STATUS -eq 1 ] || fail "exit status $STATUS, expected 1"
    [ $SECONDS_TAKEN -le 60 ] || fail "took ${SECONDS_TAKEN}s for a 10 s bound"
    grep -q "^\[algo-1\] sdp-train: error: host 'algo-2' from /opt/ml/input/config/resourceconfig.json did not resolve within 10s" "$WORK/out" ||
      fail "no clear error naming the host"
    grep -q "did not resolve" "$WORK/ml/algo-1/output/failure" || fail "no failure reason in /opt/ml/output/failure" ;;
  worker_without_sshd)
    # algo-2 runs and resolves but serves no ssh (told that another agent reaches it, it
    # starts no sshd): the leader's error names it and ssh's own, within the bound.
    job -n 2 --env SDP_HOSTS_TIMEOUT_S=10 --host-env algo-2:SDP_RSH_AGENT=false --host-env algo-2:SDP_WORKER_TIMEOUT_S=15 \
      --hyperparameters '{"config": "quickstart.yaml"}'
    [ $STATUS -eq 1 ] || fail "exit status $STATUS, expected 1"
    [ $SECONDS_TAKEN -le 60 ] || fail "took ${SECONDS_TAKEN}s for a 10 s bound"
    grep -q "^\[algo-1\] sdp-train: error: host 'algo-2' resolves but did not accept ssh within 10s (last attempt: .*algo-2.*)" "$WORK/out" ||
      fail "no clear error naming the host" ;;
  leader_fails_early)
    # A bad hyperparameter: the ranks stop with the binary's error (exit 2), and the worker
    # is told and ends with the same status instead of waiting for its bound.
    job -n 2 --env SDP_WORKER_TIMEOUT_S=300 \
      --hyperparameters '{"config": "quickstart.yaml", "threads": "1", "train.epochs": "ten"}'
    [ $STATUS -eq 2 ] || fail "exit status $STATUS, expected 2"
    [ $SECONDS_TAKEN -le 60 ] || fail "took ${SECONDS_TAKEN}s; mpirun or the worker waited for a bound?"
    grep -q "sdp-train: error: .*hyperparameters.json: key 'train.epochs': expected an integer, got 'ten'" "$WORK/out" || fail "no clear error"
    grep -q "algo-2 exited with status 2" "$WORK/out" || fail "the worker did not end with the job's status"
    grep -q '^\[algo-2\] sdp-train: error: the job ended with exit status 2 on the leader algo-1' "$WORK/out" || fail "the worker does not say why" ;;
  spot_interruption)
    # `docker stop` of every container (SIGTERM, SIGKILL after the grace) is a spot reclaim:
    # the job stops at a step and leaves a checkpoint in the leader's /opt/ml/checkpoints;
    # the same job started again on the same /opt/ml continues from it. The stop is sent on
    # an event, the leader's first [step] line (the job is training), never on a clock; the
    # job is 10 epochs (4,680 steps), so that the stop lands long before its end on any host:
    # the first line comes at step 20, and a stop takes well under a second to arrive.
    need_mnist
    hp="{\"config\": \"lenet-mnist.yaml\", \"threads\": \"1\", \"train.epochs\": \"10\", \"train.log_every\": \"20\", \"checkpoint.every_steps\": \"0\"}"
    job -n 2 --channel "training=$MNIST" --stop-on '^\[algo-1\] \[step ' --stop-grace 90 --hyperparameters "$hp"
    cp "$WORK/out" "$WORK/first.out"
    grep -q "spot reclaim: a line matched --stop-on" "$WORK/out" || fail "the job was never stopped (no [step] line from the leader?)"
    ckpt=$(ls "$WORK/ml/algo-1/checkpoints"/ckpt-*.safetensors 2>/dev/null | tail -1)
    [ -n "$ckpt" ] || fail "no checkpoint after the interruption"
    grep -q '\[done\]' "$WORK/out" && fail "the job finished before the interruption; nothing tested"
    echo "interrupted: exit status $STATUS, checkpoint $(basename "$ckpt")"
    [ $STATUS -eq 0 ] || fail "interrupted: exit status $STATUS, expected 0 (stopped with a checkpoint)"
    [ $SECONDS_TAKEN -le 60 ] || fail "interrupted: the containers took ${SECONDS_TAKEN}s to end after a stop at the first step line"
    grep -q "algo-2 exited with status 0" "$WORK/out" || fail "interrupted: the worker did not exit 0"
    job -n 2 --channel "training=$MNIST" --hyperparameters "$hp"
    [ $STATUS -eq 0 ] || fail "the resumed job: exit status $STATUS"
    grep -q "resuming from .*$(basename "$ckpt")" "$WORK/out" || fail "the second run did not resume from $(basename "$ckpt")"
    [ -s "$WORK/ml/algo-1/model/model.safetensors" ] || fail "no model after the resumed run" ;;
  link_cut)
    # The worker's link cut for good mid-run (docker network disconnect): the leader's rank
    # times out (distributed.timeout_s 5), sdp-launch ends mpirun, which would otherwise wait
    # for the unreachable host's daemon for minutes; the leader exits 3 within timeout_s + 10 s
    # naming algo-2 and its rank, and the worker, cut off, ends by itself within its bound.
    # The newest checkpoint loads. As tests/simcluster/faults_test.sh's sagemaker_link_cut.
    hp='{"config": "quickstart.yaml", "threads": "1", "train.epochs": "100000", "train.max_steps": "1000000",
         "distributed.timeout_s": "5", "distributed.stall_warning_s": "2", "checkpoint.every_steps": "10",
         "train.log_every": "20"}'
    job -n 2 --env SDP_PROBE_TIMEOUT_S=5 --cut-link 'algo-2:^\[algo-1\] \[step 40\]' --timeout 300 --hyperparameters "$hp"
    cut_at=$(grep -oE "cutting algo-2's link .* ([0-9]+)s after the start" "$WORK/out" | grep -oE '[0-9]+s after' | grep -oE '[0-9]+')
    ended_at=$(grep -oE 'job sdp-test-[0-9]+-link_cut: exit status [0-9]+ .* after [0-9]+s' "$WORK/out" | grep -oE 'after [0-9]+s' | grep -oE '[0-9]+')
    [ -n "$cut_at" ] || fail "the link was never cut (no [step 40] line from the leader?)"
    [ -n "$ended_at" ] || fail "sagemaker-local.sh did not say when the job ended"
    echo "link cut at ${cut_at}s; the job ended at ${ended_at}s"
    [ $STATUS -eq 3 ] || fail "the leader's exit status $STATUS, expected 3 (the watchdog's)"
    [ $(( ended_at - cut_at )) -le 15 ] || fail "the job ended $(( ended_at - cut_at ))s after the cut, more than timeout_s + 10 s"
    grep -q "(algo-2: rank(s) 1) cannot be inspected from here" "$WORK/out" || fail "the error does not name algo-2 and its rank"
    grep -q "^\[algo-1\] sdp-launch: rank 0 ended the job (MPI_Abort, exit status 3) and mpirun is still running" "$WORK/out" ||
      fail "sdp-launch did not end mpirun"
    grep -qE "algo-2 exited with status [1-9]" "$WORK/out" || fail "the worker did not end with an error"
    ckpt=$(ls "$WORK/ml/algo-1/checkpoints"/ckpt-*.safetensors 2>/dev/null | tail -1)
    [ -n "$ckpt" ] || fail "no checkpoint before the cut"
    docker run --rm --entrypoint sdp-train -v "$WORK/ml/algo-1/checkpoints:/ck:ro" "$IMAGE" evaluate \
      --config /opt/sdp-train/configs/quickstart.yaml --set threads=1 --model "/ck/$(basename "$ckpt")" >"$WORK/eval" 2>&1 ||
      fail "the newest checkpoint does not load: $(tail -2 "$WORK/eval")"
    echo "newest checkpoint $(basename "$ckpt") loads" ;;
  *)
    echo "unknown case $CASE"; exit 1 ;;
esac
echo "PASS [$CASE]"
