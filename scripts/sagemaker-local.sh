#!/usr/bin/env bash
# Runs the SageMaker image as SageMaker runs a training job, on this machine's Docker:
# N containers algo-1..algo-N on one network, each given only what SageMaker gives a
# bring-your-own-container image (its resourceconfig.json, hyperparameters.json,
# inputdataconfig.json, the channels under /opt/ml/input/data/<name>, /opt/ml/model,
# /opt/ml/checkpoints, /opt/ml/output, TRAINING_JOB_NAME/ARN), started as `docker run IMAGE
# train`. Prints every container's log prefixed with its host, and exits with the job's
# exit status (the leader's, algo-1's).
#
#   scripts/sagemaker-local.sh [options]
#     -n N                   hosts (default 2)
#     --image IMAGE          the image (default sdp-train:test); built from this tree when
#                            absent, or always with --build
#     --base-image IMAGE     BASE_IMAGE to build on (default debian:bookworm; the CUDA image
#                            is the Dockerfile's default)
#     --build-only           build the image, run nothing
#     --gpu                  with --build-only: build Dockerfile.gpu's image instead (default
#                            tag sdp-train:gpu; the CUDA wheels are fetched into .cuda-wheels/
#                            first, where the build could not reach PyPI)
#     --source-hash [FILE]   print the hash of what Dockerfile (or FILE) copies from this tree;
#                            every image built here carries it as the label org.sdp-train.source,
#                            and the container tests run only an image whose label matches
#     --hyperparameters JSON hyperparameters.json, e.g. '{"config": "lenet-mnist.yaml"}' (default {})
#     --channel NAME=DIR     mount DIR at /opt/ml/input/data/NAME, read-only (repeatable)
#     --input-mode MODE      File (default) or Pipe, for every channel; --input-mode NAME=MODE for
#                            channel NAME (repeatable). A Pipe-mode channel's files reach each
#                            container through FIFOs /opt/ml/input/data/NAME_0, _1, ..., one per
#                            pass, fed from this machine by scripts/sagemaker-pipe-feed.sh, and
#                            inputdataconfig.json says TrainingInputMode: Pipe
#     --distribution TYPE    FullyReplicated (default) or ShardedByS3Key, for every channel;
#                            --distribution NAME=TYPE for channel NAME (repeatable). Sharded: each
#                            host gets the channel's files i with i % hosts == its index
#                            (inputdataconfig.json's S3DistributionType says so)
#     --out DIR              each host's /opt/ml (config, model, checkpoints, output) goes to
#                            DIR/algo-<i> (default: a new temporary directory, printed)
#     --absent HOST          list HOST in the resourceconfig but start no container for it
#     --env NAME=VALUE       an extra variable for every container (repeatable), e.g.
#                            SDP_HOSTS_TIMEOUT_S=20
#     --host-env HOST:NAME=VALUE  a variable for HOST's container only (repeatable)
#     --cpus N               CPU quota per container (docker --cpus)
#     --stop-on REGEX        `docker stop` every container (SIGTERM, then SIGKILL after
#                            --stop-grace, default 120: a spot reclaim) as soon as a line of
#                            the job's output matches REGEX (grep -E, with the [algo-i] prefix),
#                            e.g. '^\[algo-1\] \[step ': the job is known to be training
#     --stop-after S         the same, S seconds after the start (a clock, not an event)
#     --cut-link HOST:REGEX  cut HOST's network link for good (`docker network disconnect`: its
#                            packets go nowhere, as when an instance's network fails) as soon as
#                            a line of the job's output matches REGEX
#     --timeout S            stop everything after S seconds and exit 124 (default 3600)
#     --job NAME             job name: containers NAME-algo-<i>, network NAME (default sdp-local-$$)
#     --keep                 keep the containers and the network
#     -- ARGS                appended to `train` (the entry point's sdp-train arguments)
set -euo pipefail
cd "$(dirname "$0")/.."

# source_hash DOCKERFILE: one hash of the files the Dockerfile's COPY lines take from this tree
# (.dockerignore's build outputs and the fetched .cuda-wheels/ left out: the wheels' versions
# are pinned in scripts/cuda-from-wheels.sh, which is hashed) and of the Dockerfile itself.
source_hash() {
  local dockerfile=$1 sources
  [ -f "$dockerfile" ] || { echo "sagemaker-local: no $dockerfile" >&2; exit 2; }
  sources=$(awk '/^COPY / && !/--from/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' "$dockerfile")
  # shellcheck disable=SC2086
  { echo "$dockerfile"; find $sources -type f 2>/dev/null; } |
    grep -vE '(^|/)(build[^/]*|__pycache__|\.cuda-wheels)(/|$)|\.pyc$' | LC_ALL=C sort -u |
    while IFS= read -r f; do printf '%s %s\n' "$(sha256sum <"$f" | cut -c1-64)" "$f"; done |
    sha256sum | cut -c1-16
}

HOSTS_N=2 IMAGE="" BASE_IMAGE=debian:bookworm BUILD=0 GPU=0 HP='{}' OUT="" JOB=sdp-local-$$
STOP_ON="" STOP_AFTER="" CUT_HOST="" CUT_ON="" STOP_GRACE=120 TIMEOUT=3600 KEEP=0 CPUS="" INPUT_MODE=File DISTRIBUTION=FullyReplicated
CHANNELS=() ABSENT=() ENVS=() HOST_ENVS=() TRAIN_ARGS=() INPUT_MODES=() DISTRIBUTIONS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) HOSTS_N=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    --base-image) BASE_IMAGE=$2; shift 2 ;;
    --build) BUILD=1; shift ;;
    --build-only) BUILD=2; shift ;;
    --gpu) GPU=1; shift ;;
    --source-hash) source_hash "${2:-Dockerfile}"; exit 0 ;;
    --hyperparameters) HP=$2; shift 2 ;;
    --channel) CHANNELS+=("$2"); shift 2 ;;
    --input-mode) if [[ $2 == *=* ]]; then INPUT_MODES+=("$2"); else INPUT_MODE=$2; fi; shift 2 ;;
    --distribution) if [[ $2 == *=* ]]; then DISTRIBUTIONS+=("$2"); else DISTRIBUTION=$2; fi; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --absent) ABSENT+=("$2"); shift 2 ;;
    --env) ENVS+=(-e "$2"); shift 2 ;;
    --host-env) HOST_ENVS+=("$2"); shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --stop-on) STOP_ON=$2; shift 2 ;;
    --stop-after) STOP_AFTER=$2; shift 2 ;;
    --cut-link) CUT_HOST=${2%%:*} CUT_ON=${2#*:}; shift 2 ;;
    --stop-grace) STOP_GRACE=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --job) JOB=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --) shift; TRAIN_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "sagemaker-local: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "sagemaker-local: $*" >&2; }

# per_channel NAME DEFAULT [NAME=VALUE...]: the value a per-channel option (--input-mode,
# --distribution) gives channel NAME: its own NAME=VALUE, else the option's plain value.
per_channel() {
  local name=$1 value=$2 v
  shift 2
  for v in "$@"; do [ "${v%%=*}" != "$name" ] || value=${v#*=}; done
  echo "$value"
}
channel_mode() { per_channel "$1" "$INPUT_MODE" "${INPUT_MODES[@]}"; }                # TrainingInputMode
channel_distribution() { per_channel "$1" "$DISTRIBUTION" "${DISTRIBUTIONS[@]}"; }  # S3DistributionType
# check_values OPTION ALLOWED_REGEX VALUE...: every value (NAME=VALUE or VALUE) allowed, or exit 2.
check_values() {
  local option=$1 allowed=$2 v
  shift 2
  for v in "$@"; do [[ ${v#*=} =~ ^($allowed)$ ]] || { say "$option $v: ${allowed//|/ or }"; exit 2; }; done
}
check_values --input-mode 'File|Pipe' "$INPUT_MODE" "${INPUT_MODES[@]}"
check_values --distribution 'FullyReplicated|ShardedByS3Key' "$DISTRIBUTION" "${DISTRIBUTIONS[@]}"
docker info >/dev/null 2>&1 || { say "no Docker daemon answers (docker info)"; exit 2; }
if [ $GPU = 1 ]; then
  [ $BUILD = 2 ] || { say "--gpu goes with --build-only (the jobs run on either image: --image)"; exit 2; }
  IMAGE=${IMAGE:-sdp-train:gpu}
  # The build stage fetches the wheels itself unless the context has them; fetching them here,
  # where pip is set up for this machine's network, works where the container's pip may not.
  bash scripts/cuda-from-wheels.sh --download .cuda-wheels
  say "building $IMAGE from Dockerfile.gpu"
  docker build -f Dockerfile.gpu -t "$IMAGE" \
    --label org.sdp-train.dockerfile=Dockerfile.gpu --label org.sdp-train.source="$(source_hash Dockerfile.gpu)" .
  exit 0
fi
IMAGE=${IMAGE:-sdp-train:test}
if [ $BUILD != 0 ] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "building $IMAGE on $BASE_IMAGE"
  docker build -t "$IMAGE" --build-arg BASE_IMAGE="$BASE_IMAGE" \
    --label org.sdp-train.dockerfile=Dockerfile --label org.sdp-train.source="$(source_hash Dockerfile)" .
fi
[ $BUILD != 2 ] || exit 0
python3 -c "import json, sys; json.loads(sys.argv[1])" "$HP" || { say "--hyperparameters is not JSON: $HP"; exit 2; }

[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/sagemaker-local.XXXXXX)
mkdir -p "$OUT"; OUT=$(readlink -f "$OUT")
HOSTS=()
for i in $(seq 1 "$HOSTS_N"); do HOSTS+=("algo-$i"); done
hosts_json=$(printf '"%s",' "${HOSTS[@]}"); hosts_json="[${hosts_json%,}]"
channels_json=$(for c in "${CHANNELS[@]}"; do printf '"%s": {"TrainingInputMode": "%s", "S3DistributionType": "%s", "RecordWrapperType": "None"},' "${c%%=*}" "$(channel_mode "${c%%=*}")" "$(channel_distribution "${c%%=*}")"; done)
channels_json="{${channels_json%,}}"

STARTED=()
# Every container's prefixed output, also kept here so that --stop-on can watch it.
JOB_LOG=$(mktemp /tmp/sagemaker-local-log.XXXXXX)
FEEDER_PIDS=()
cleanup() {
  rm -f "$JOB_LOG"
  [ ${#FEEDER_PIDS[@]} -eq 0 ] || { pkill -P "$(printf '%s,' "${FEEDER_PIDS[@]}" | sed 's/,$//')" 2>/dev/null; kill "${FEEDER_PIDS[@]}" 2>/dev/null; } || true
  [ ${#LOG_PIDS[@]} -eq 0 ] || kill "${LOG_PIDS[@]}" 2>/dev/null || true
  if [ $KEEP = 0 ]; then
    [ ${#STARTED[@]} -eq 0 ] || docker rm -f "${STARTED[@]}" >/dev/null 2>&1 || true
    docker network rm "$JOB" >/dev/null 2>&1 || true
  fi
}
LOG_PIDS=()
trap cleanup EXIT
trap 'exit 130' INT TERM
docker network create "$JOB" >/dev/null

is_absent() { local a; for a in "${ABSENT[@]}"; do [ "$a" = "$1" ] && return 0; done; return 1; }
for h in "${HOSTS[@]}"; do
  dir=$OUT/$h
  mkdir -p "$dir/input/config" "$dir/model" "$dir/checkpoints" "$dir/output/data"
  printf '{"current_host": "%s", "hosts": %s, "network_interface_name": "eth0", "current_instance_type": "local", "current_group_name": "homogeneousCluster", "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "local", "hosts": %s}]}\n' \
    "$h" "$hosts_json" "$hosts_json" >"$dir/input/config/resourceconfig.json"
  printf '%s\n' "$HP" >"$dir/input/config/hyperparameters.json"
  printf '%s\n' "$channels_json" >"$dir/input/config/inputdataconfig.json"
  is_absent "$h" && { say "$h: listed, not started (--absent)"; continue; }
  mounts=(-v "$dir/input/config:/opt/ml/input/config:ro" -v "$dir/model:/opt/ml/model"
          -v "$dir/checkpoints:/opt/ml/checkpoints" -v "$dir/output:/opt/ml/output")
  host_envs=()
  for e in "${HOST_ENVS[@]}"; do [ "${e%%:*}" != "$h" ] || host_envs+=(-e "${e#*:}"); done
  # The channels: /opt/ml/input/data is this host's directory, holding the FIFOs of the Pipe-mode
  # channels (fed from here: a FIFO on a bind mount is the same pipe on both sides) and this
  # host's part of the ShardedByS3Key ones; a FullyReplicated File-mode channel is mounted as is.
  mkdir -p "$dir/input/data"
  mounts+=(-v "$dir/input/data:/opt/ml/input/data")
  host_index=$(( ${h#algo-} - 1 ))
  for c in "${CHANNELS[@]}"; do
    name=${c%%=*} src=$(readlink -f "${c#*=}") sharded=0
    [ "$(channel_distribution "$name")" = FullyReplicated ] || sharded=1
    files=()
    k=0
    while IFS= read -r f; do
      [ $sharded = 1 ] && [ $((k % HOSTS_N)) -ne $host_index ] || files+=("$f")
      k=$((k + 1))
    done < <(find "$src" -maxdepth 1 -type f ! -name '.*' ! -name '*.idx' | sort)
    if [ "$(channel_mode "$name")" = Pipe ]; then
      [ ${#files[@]} -gt 0 ] || { say "$h: channel $name has no file for this host"; exit 2; }
      bash scripts/sagemaker-pipe-feed.sh "$dir/input/data/$name" "${files[@]}" &
      FEEDER_PIDS+=($!)
    elif [ $sharded = 1 ]; then
      rm -rf "${dir:?}/input/data/$name"; mkdir -p "$dir/input/data/$name"
      for f in "${files[@]}"; do cp -l "$f" "$dir/input/data/$name/" 2>/dev/null || cp "$f" "$dir/input/data/$name/"; done
    else
      mounts+=(-v "$src:/opt/ml/input/data/$name:ro")
    fi
  done
  docker run -d --name "$JOB-$h" --hostname "$h" --network "$JOB" --network-alias "$h" --label sdp-local-job="$JOB" \
    ${CPUS:+--cpus "$CPUS"} --stop-timeout "$STOP_GRACE" \
    -e TRAINING_JOB_NAME="$JOB" -e TRAINING_JOB_ARN="arn:aws:sagemaker:local:000000000000:training-job/$JOB" \
    "${ENVS[@]}" "${host_envs[@]}" "${mounts[@]}" "$IMAGE" train "${TRAIN_ARGS[@]}" >/dev/null
  STARTED+=("$JOB-$h")
  docker logs -f "$JOB-$h" 2>&1 | sed -u "s/^/[$h] /" | tee -a "$JOB_LOG" &
  LOG_PIDS+=($!)
done
say "job $JOB: ${#STARTED[@]} of ${#HOSTS[@]} host(s) started, /opt/ml of each in $OUT/<host>"

# An event to wait for is polled often; otherwise once a second is enough.
poll=1
[ -z "$STOP_ON$CUT_ON" ] || poll=0.2
start=$(date +%s) stopped=0 cut=0
while :; do
  # By label, not network: a container whose link --cut-link cut is on none.
  running=$(docker ps -q --filter "label=sdp-local-job=$JOB" | wc -l)
  [ "$running" -gt 0 ] || break
  elapsed=$(( $(date +%s) - start ))
  stop_now=""
  if [ $stopped = 0 ]; then
    if [ -n "$STOP_ON" ] && grep -qE -- "$STOP_ON" "$JOB_LOG"; then
      stop_now="a line matched --stop-on '$STOP_ON'"
    elif [ -n "$STOP_AFTER" ] && [ $elapsed -ge "$STOP_AFTER" ]; then
      stop_now="${STOP_AFTER}s after the start"
    fi
  fi
  if [ $cut = 0 ] && [ -n "$CUT_ON" ] && grep -qE -- "$CUT_ON" "$JOB_LOG"; then
    say "cutting $CUT_HOST's link (docker network disconnect) ${elapsed}s after the start: a line matched --cut-link '$CUT_ON'"
    docker network disconnect --force "$JOB" "$JOB-$CUT_HOST" >/dev/null
    cut=1
  fi
  if [ -n "$stop_now" ]; then
    say "docker stop (SIGTERM, SIGKILL after ${STOP_GRACE}s) of every container, as a spot reclaim: $stop_now"
    docker stop -t "$STOP_GRACE" "${STARTED[@]}" >/dev/null &
    stopped=1
  fi
  if [ $elapsed -ge "$TIMEOUT" ]; then
    say "timed out after ${TIMEOUT}s; stopping"
    docker stop -t 5 "${STARTED[@]}" >/dev/null
    exit 124
  fi
  sleep $poll
done
wait "${LOG_PIDS[@]}" 2>/dev/null || true
[ -z "$STOP_ON" ] || [ $stopped = 1 ] || say "no line matched --stop-on '$STOP_ON': the job ended without being stopped"
LOG_PIDS=()
status=""
for c in "${STARTED[@]}"; do
  s=$(docker inspect -f '{{.State.ExitCode}}' "$c")
  say "${c#"$JOB-"} exited with status $s"
  [ "$c" = "$JOB-${HOSTS[0]}" ] && status=$s
done
[ -n "$status" ] || { say "the leader ${HOSTS[0]} was not started"; exit 1; }
say "job $JOB: exit status $status (the leader's) after $(( $(date +%s) - start ))s; model: $OUT/${HOSTS[0]}/model"
exit "$status"
