#!/usr/bin/env bash
# SageMaker training container entry point for sdp-train (the image's ENTRYPOINT, and its
# `train` command: SageMaker starts a training image as `docker run IMAGE train`).
#
#   train [sdp-train arguments...]                       e.g. --config /opt/ml/code/job.yaml
#   sagemaker-entrypoint.sh [train] [sdp-train arguments...]
#
# SageMaker gives a bring-your-own-container image no SM_* variable (those come from its
# Python training toolkit, which this image does not use), only /opt/ml: input/config/
# {resourceconfig,hyperparameters,inputdataconfig}.json, the channels under input/data/<name>,
# and model/ and checkpoints/ for outputs. This script derives the SM_* values the job specs
# read (SM_CHANNEL_<NAME>, SM_MODEL_DIR, SM_CHECKPOINT_DIR, SM_OUTPUT_DIR, SM_OUTPUT_DATA_DIR, SM_NUM_GPUS)
# from them, unless they are set already.
#
# The job spec: --config FILE when given; else the hyperparameter `config` names a YAML file,
# found as given when absolute, else in each channel directory, else in the image's configs/;
# else the hyperparameters alone (every key has a default). The `config` key is taken out of
# the hyperparameters passed on to sdp-train, which reads the rest as key.path overrides.
#
# One host: exec mpirun with one rank per GPU (SM_NUM_GPUS; one rank without GPUs, or
# SDP_PROCS_PER_HOST). Several hosts: the leader (hosts[0]) waits until every other host
# resolves and accepts ssh (SDP_HOSTS_TIMEOUT_S, default 600), launches mpirun over all of
# them on the network interface SageMaker names, and when it ends tells every worker the
# job's exit status, which each container then exits with. A worker serves the leader's
# mpirun through sshd and exits when the leader says the job ended, or with an error when the
# leader did not contact it within SDP_WORKER_TIMEOUT_S (default 900), or did not say how the
# job ended within SDP_PROBE_TIMEOUT_S of its ranks on this host ending (a leader gone, or cut
# off from this host).
#
# Variables for tests and special set-ups:
#   SDP_DRY_RUN=1          print the plan and the mpirun command instead of running it
#   SDP_OPT_ML=DIR         the /opt/ml tree (default /opt/ml)
#   SDP_RESOURCE_CONFIG    resourceconfig.json (default $SDP_OPT_ML/input/config/resourceconfig.json)
#   SDP_RSH_AGENT=CMD      how to reach another host (`CMD HOST COMMAND`), also given to mpirun
#                          as plm_rsh_agent; set, no sshd is started (default: ssh)
#   SDP_RUN_DIR=DIR        this script's state: filtered hyperparameters, per-host signals
#                          (default /tmp/sdp-sagemaker)
#   SDP_CONFIGS_DIR=DIR    where a `config` hyperparameter is looked up last (default: configs/
#                          next to this script's scripts/ directory)
#   SDP_HOSTS_TIMEOUT_S, SDP_WORKER_TIMEOUT_S, SDP_PROBE_TIMEOUT_S (10), SDP_SIGKILL_TIMEOUT (30)
set -euo pipefail
# As a container's PID 1, bash ignores the signals it has no trap for: `docker stop` would
# wait for its SIGKILL. The leader and the workers set their own below.
trap 'exit 143' TERM
trap 'exit 130' INT

OPT_ML=${SDP_OPT_ML:-/opt/ml}
RESOURCE_CONFIG=${SDP_RESOURCE_CONFIG:-$OPT_ML/input/config/resourceconfig.json}
HYPERPARAMETERS=$OPT_ML/input/config/hyperparameters.json
INPUT_DATA_CONFIG=$OPT_ML/input/config/inputdataconfig.json
SDP_TRAIN=${SDP_TRAIN:-sdp-train}
RUN_DIR=${SDP_RUN_DIR:-/tmp/sdp-sagemaker}
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
CONFIGS_DIR=${SDP_CONFIGS_DIR:-$HERE/../configs}
HOSTS_TIMEOUT_S=${SDP_HOSTS_TIMEOUT_S:-${SDP_RESOLVE_TIMEOUT_S:-600}}
WORKER_TIMEOUT_S=${SDP_WORKER_TIMEOUT_S:-900}
PROBE_TIMEOUT_S=${SDP_PROBE_TIMEOUT_S:-10}
SIGKILL_TIMEOUT=${SDP_SIGKILL_TIMEOUT:-30}
if [ -n "${SDP_RSH_AGENT:-}" ]; then
  read -r -a RSH <<<"$SDP_RSH_AGENT"
else
  RSH=(ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
       -o LogLevel=ERROR -o ConnectTimeout="$PROBE_TIMEOUT_S")
fi

log() { echo "sagemaker-entrypoint: $*" >&2; }
FAILURE=$OPT_ML/output/failure
# The failure reason of an earlier job run on the same tree (a local test) is not this one's.
rm -f "$FAILURE"
# fail STATUS MESSAGE: the error, also as SageMaker's FailureReason (/opt/ml/output/failure)
# unless the job wrote one: sdp-train's own (its first error, from the rank that met it) says
# more than "the job ended with exit status N".
fail() {
  local status=$1; shift
  echo "sdp-train: error: $*" >&2
  [ -d "$OPT_ML/output" ] && [ ! -e "$FAILURE" ] && echo "sdp-train: error: $*" >"$FAILURE" 2>/dev/null
  exit "$status"
}
die() { fail 2 "$@"; }

# `docker run IMAGE train` (or the `train` link) trains; `serve` is for inference images; any
# other command runs as is (`docker run IMAGE sdp-train --version`, `... bash`).
[ "$(basename "$0")" = train ] || case "${1:-}" in
  train) shift ;;
  serve) die "this image trains (\`train\`); it does not serve models" ;;
  ""|-*) ;;
  *) exec "$@" ;;
esac

[ -f "$RESOURCE_CONFIG" ] || die "$RESOURCE_CONFIG not found: not a SageMaker training container? Run sdp-train directly."
read_config() {
  python3 - "$RESOURCE_CONFIG" <<'PY'
import json, sys
try:
    rc = json.load(open(sys.argv[1]))
    hosts, current = rc["hosts"], rc["current_host"]
except (ValueError, KeyError) as e:
    sys.exit(f"sdp-train: error: {sys.argv[1]}: malformed resourceconfig ({e})")
if not hosts or current not in hosts:
    sys.exit(f"sdp-train: error: {sys.argv[1]}: current_host {current!r} is not in hosts {hosts}")
print(current, rc.get("network_interface_name", ""), " ".join(hosts))
PY
}
read -r CURRENT_HOST NETWORK_INTERFACE HOSTS_LINE < <(read_config) || exit 2
read -r -a HOSTS <<<"$HOSTS_LINE"
LEADER=${HOSTS[0]}

# --- SM_* variables, from what SageMaker gives a container ---------------------------------
# A channel is a directory of input/data; inputdataconfig.json names them too (a Pipe-mode
# channel has no directory, but its name is all a job spec could use).
channels() {
  { [ -d "$OPT_ML/input/data" ] && find "$OPT_ML/input/data" -mindepth 1 -maxdepth 1 -printf '%f\n'
    [ -f "$INPUT_DATA_CONFIG" ] && python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))))' "$INPUT_DATA_CONFIG"
  } | sort -u
}
CHANNELS=()
while IFS= read -r channel; do
  [ -n "$channel" ] || continue
  CHANNELS+=("$channel")
  var=SM_CHANNEL_$(tr 'a-z' 'A-Z' <<<"$channel" | tr -c 'A-Z0-9\n' '_')
  [ -n "${!var:-}" ] || export "$var=$OPT_ML/input/data/$channel"
done < <(channels)
export SM_MODEL_DIR=${SM_MODEL_DIR:-$OPT_ML/model}
export SM_CHECKPOINT_DIR=${SM_CHECKPOINT_DIR:-$OPT_ML/checkpoints}  # checkpoint_local_path's default
export SM_OUTPUT_DIR=${SM_OUTPUT_DIR:-$OPT_ML/output}  # sdp-train's failure file, tensorboard/
export SM_OUTPUT_DATA_DIR=${SM_OUTPUT_DATA_DIR:-$OPT_ML/output/data}
if [ -z "${SM_NUM_GPUS:-}" ]; then
  SM_NUM_GPUS=0
  if command -v nvidia-smi >/dev/null; then SM_NUM_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
  export SM_NUM_GPUS
fi

# --- the job spec ---------------------------------------------------------------------------
# Every host writes the same filtered copy, so the path mpirun passes exists on each.
mkdir -p "$RUN_DIR/$CURRENT_HOST"
rm -f "$RUN_DIR/$CURRENT_HOST"/{contacted,done}
FILTERED_HYPERPARAMETERS=$RUN_DIR/hyperparameters.json
CONFIG_HYPERPARAMETER=$(python3 - "$HYPERPARAMETERS" "$FILTERED_HYPERPARAMETERS" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
try:
    hp = json.load(open(src)) if os.path.exists(src) else {}
except ValueError as e:
    sys.exit(f"sdp-train: error: {src}: malformed JSON ({e})")
if not isinstance(hp, dict):
    sys.exit(f"sdp-train: error: {src}: expected a JSON object of hyperparameters")
config = hp.pop("config", "")
if isinstance(config, str) and len(config) >= 2 and config[0] == config[-1] == '"':
    config = json.loads(config)  # SageMaker's SDK JSON-encodes every value
tmp = f"{dst}.tmp.{os.getpid()}"
with open(tmp, "w") as f:
    json.dump(hp, f)
os.replace(tmp, dst)
print(config)
PY
) || exit 2

has_config_option() {
  local a
  for a in "$@"; do case "$a" in -c|--config|--config=*) return 0 ;; esac; done
  return 1
}
# Only the leader's command line matters; an error here is reported once the workers can be
# told (below), so that they end too.
CONFIG_ARGS=() EARLY_ERROR=""
if [ -n "$CONFIG_HYPERPARAMETER" ] && [ "$CURRENT_HOST" = "$LEADER" ]; then
  if has_config_option "$@"; then
    log "hyperparameter config=$CONFIG_HYPERPARAMETER ignored: --config was given"
  elif [ "${CONFIG_HYPERPARAMETER:0:1}" = / ]; then
    CONFIG_ARGS=(--config "$CONFIG_HYPERPARAMETER")
    [ -f "$CONFIG_HYPERPARAMETER" ] || EARLY_ERROR="$HYPERPARAMETERS: key 'config': $CONFIG_HYPERPARAMETER not found"
  else
    searched=()
    for dir in "${CHANNELS[@]/#/$OPT_ML/input/data/}" "$CONFIGS_DIR"; do
      dir=$(readlink -m "$dir")
      searched+=("$dir")
      if [ -f "$dir/$CONFIG_HYPERPARAMETER" ]; then CONFIG_ARGS=(--config "$dir/$CONFIG_HYPERPARAMETER"); break; fi
    done
    [ ${#CONFIG_ARGS[@]} -gt 0 ] ||
      EARLY_ERROR="$HYPERPARAMETERS: key 'config': '$CONFIG_HYPERPARAMETER' is in none of the channels or the image's configs (looked in $(IFS=,; echo "${searched[*]}" | sed 's/,/, /g'))"
  fi
fi
TRAIN_ARGS=("$SDP_TRAIN" --hyperparameters "$FILTERED_HYPERPARAMETERS" --resource-config "$RESOURCE_CONFIG"
            "${CONFIG_ARGS[@]}" "$@")

# --- the launch -----------------------------------------------------------------------------
if [ -n "${SDP_PROCS_PER_HOST:-}" ]; then
  PROCS_PER_HOST=$SDP_PROCS_PER_HOST
elif [ "$SM_NUM_GPUS" -gt 0 ]; then
  PROCS_PER_HOST=$SM_NUM_GPUS
else
  PROCS_PER_HOST=1
fi
TOTAL=$(( PROCS_PER_HOST * ${#HOSTS[@]} ))
HOST_LIST=$(printf "%s:$PROCS_PER_HOST," "${HOSTS[@]}"); HOST_LIST=${HOST_LIST%,}

# A spot reclaim gives 120 s after SIGTERM. Open MPI 4's mpirun passes SIGTERM on to the
# ranks only after odls_base_sigkill_timeout seconds and SIGKILLs them as long again later
# (default 1 s each): on one host, where mpirun is the entry point, 30 s lets the ranks
# finish the step and write their checkpoint. mpirun also waits that long when a rank fails,
# and over several hosts its daemons wait again: 4 x 30 s before a failed job ends. So there
# the leader signals the ranks itself (below) and mpirun gets 3 s.
MPIRUN_KILL_S=3
# Through sdp-launch: after a rank's MPI_Abort (the watchdog's exit 3 when a host's link is
# cut), mpirun would wait ~15 minutes for the daemon of a host it cannot reach.
cmd=("$HERE/sdp-launch" mpirun --allow-run-as-root -np "$TOTAL" -H "$HOST_LIST" --bind-to none
     --mca odls_base_sigkill_timeout "$MPIRUN_KILL_S")
# Only the variables set: mpirun warns of the others.
for var in PATH LD_LIBRARY_PATH OMP_NUM_THREADS; do [ -z "${!var:-}" ] || cmd+=(-x "$var"); done
[ -n "${SDP_RSH_AGENT:-}" ] && cmd+=(--mca plm_rsh_agent "$SDP_RSH_AGENT")
if [ -n "$NETWORK_INTERFACE" ]; then
  cmd+=(--mca btl_tcp_if_include "$NETWORK_INTERFACE" --mca oob_tcp_if_include "$NETWORK_INTERFACE"
        -x "NCCL_SOCKET_IFNAME=$NETWORK_INTERFACE")
fi
for var in $(compgen -e | grep -E '^SM_' || true); do cmd+=(-x "$var"); done
cmd+=("${TRAIN_ARGS[@]}")

if [ "${SDP_DRY_RUN:-0}" = 1 ]; then
  [ -z "$EARLY_ERROR" ] || die "$EARLY_ERROR"
  echo "host $CURRENT_HOST ($([ "$CURRENT_HOST" = "$LEADER" ] && echo leader || echo worker)), ${#HOSTS[@]} host(s) x $PROCS_PER_HOST rank(s)"
  for var in $(compgen -e | grep -E '^SM_' | sort || true); do echo "$var=${!var}"; done
  [ "$CURRENT_HOST" = "$LEADER" ] && echo "${cmd[*]}"
  exit 0
fi

mkdir -p "$SM_MODEL_DIR" "$SM_OUTPUT_DATA_DIR" 2>/dev/null || true
if [ "${#HOSTS[@]}" -eq 1 ]; then
  [ -z "$EARLY_ERROR" ] || die "$EARLY_ERROR"
  exec mpirun --allow-run-as-root -np "$PROCS_PER_HOST" --bind-to none --mca odls_base_sigkill_timeout "$SIGKILL_TIMEOUT" "${TRAIN_ARGS[@]}"
fi

# remote HOST COMMAND: COMMAND on HOST through the agent mpirun uses, bounded in time.
remote() { timeout "$PROBE_TIMEOUT_S" "${RSH[@]}" "$1" "$2" </dev/null; }

# reach_workers: every worker resolves, accepts the agent, and learns it was contacted
# (touches its contacted file); REACHED lists those that did. Returns 1 with REACH_ERROR set
# when one did not in time.
REACHED=()
reach_workers() {
  local deadline=$(( $(date +%s) + HOSTS_TIMEOUT_S )) h err
  for h in "${HOSTS[@]:1}"; do
    until getent hosts "$h" >/dev/null; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        REACH_ERROR="host '$h' from $RESOURCE_CONFIG did not resolve within ${HOSTS_TIMEOUT_S}s"
        return 1
      fi
      sleep 1
    done
    until err=$(remote "$h" "mkdir -p '$RUN_DIR/$h' && touch '$RUN_DIR/$h/contacted'" 2>&1); do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        REACH_ERROR="host '$h' resolves but did not accept ${RSH[0]} within ${HOSTS_TIMEOUT_S}s (last attempt: $(tail -n 1 <<<"${err:-timed out}"))"
        return 1
      fi
      sleep 1
    done
    REACHED+=("$h")
  done
}

# tell_workers STATUS [HOST...]: the job ended with STATUS; each worker (default: all)
# exits with it.
tell_workers() {
  local status=$1 h; shift
  [ $# -gt 0 ] || set -- "${HOSTS[@]:1}"
  for h in "$@"; do
    remote "$h" "mkdir -p '$RUN_DIR/$h' && echo $status >'$RUN_DIR/$h/done.tmp' && mv '$RUN_DIR/$h/done.tmp' '$RUN_DIR/$h/done'" >/dev/null 2>&1 ||
      log "could not tell $h that the job ended (it exits on its own)"
  done
}

if [ "$CURRENT_HOST" = "$LEADER" ]; then
  log "leader $CURRENT_HOST: waiting for ${HOSTS[*]:1} (at most ${HOSTS_TIMEOUT_S}s)"
  if [ -n "$EARLY_ERROR" ]; then
    echo "sdp-train: error: $EARLY_ERROR" >&2
    reach_workers || log "$REACH_ERROR"
    [ ${#REACHED[@]} -eq 0 ] || tell_workers 2 "${REACHED[@]}"
    die "$EARLY_ERROR"
  fi
  if ! reach_workers; then
    [ ${#REACHED[@]} -eq 0 ] || tell_workers 1 "${REACHED[@]}"
    fail 1 "$REACH_ERROR"
  fi
  log "all ${#HOSTS[@]} hosts reached; ${cmd[*]}"
  # Not exec: the workers are told how the job ended. The ranks' stderr is kept too: a rank on
  # another host writes its error to that host's failure file, and the leader's is the one to
  # carry it.
  "${cmd[@]}" 2> >(tee "$RUN_DIR/mpirun.stderr" >&2) &
  MPIRUN_PID=$!
  # SIGTERM (spot reclaim, docker stop) goes to this host's ranks at once, as on the workers:
  # they stop at the next step with a checkpoint and exit 0, and so does mpirun. When they
  # have not ended SDP_SIGKILL_TIMEOUT later, or at a second signal, mpirun gets it and ends
  # the job its way (SIGTERM, SIGKILL): 4 x 3 s more at most, within SageMaker's 120 s.
  TERM_AT=0 MPIRUN_TERMED=0
  term_mpirun() { [ $MPIRUN_TERMED = 1 ] || { MPIRUN_TERMED=1; kill -TERM $MPIRUN_PID 2>/dev/null || true; }; }
  on_term() {
    if [ $TERM_AT = 0 ]; then
      TERM_AT=$(date +%s)
      # The ranks of this host are children of mpirun, itself the child of sdp-launch.
      pkill -TERM -x -P "$(pgrep -d, -P $MPIRUN_PID)" sdp-train 2>/dev/null || term_mpirun
    else
      term_mpirun
    fi
  }
  trap on_term TERM INT
  while kill -0 $MPIRUN_PID 2>/dev/null; do
    if [ $TERM_AT != 0 ] && [ $(( $(date +%s) - TERM_AT )) -ge "$SIGKILL_TIMEOUT" ]; then term_mpirun; fi
    sleep 1 & wait $! || true
  done
  wait $MPIRUN_PID && status=0 || status=$?
  tell_workers $status
  if [ $status -ne 0 ] && [ ! -e "$FAILURE" ] && [ -d "$OPT_ML/output" ]; then
    grep -m 1 '^sdp-train: error: ' "$RUN_DIR/mpirun.stderr" >"$FAILURE" 2>/dev/null || rm -f "$FAILURE"
  fi
  [ $status -eq 0 ] || fail $status "the job ended with exit status $status (mpirun; the ranks' errors are above)"
  exit 0
fi

# --- worker ---------------------------------------------------------------------------------
if [ -z "${SDP_RSH_AGENT:-}" ]; then
  [ -x /usr/sbin/sshd ] || die "worker $CURRENT_HOST: /usr/sbin/sshd not found; the leader reaches workers over ssh (or set SDP_RSH_AGENT)"
  mkdir -p /run/sshd && /usr/sbin/sshd -D &
  SSHD_PID=$!
fi
stop_sshd() { [ -z "${SSHD_PID:-}" ] || kill "$SSHD_PID" 2>/dev/null || true; }
# SIGTERM (spot reclaim, docker stop) goes to this host's ranks: they agree with the others to
# stop at the next step and rank 0 writes a checkpoint; then the leader says the job ended.
trap 'pkill -TERM -x -P "$(pgrep -d, -x orted || echo 1)" sdp-train 2>/dev/null || true' TERM INT
log "worker $CURRENT_HOST: waiting for the leader $LEADER (at most ${WORKER_TIMEOUT_S}s)"
waiting_since=$(date +%s) contacted=0 job_seen=0 ranks_seen=0 job_gone_since=0
while :; do
  now=$(date +%s)
  if [ -f "$RUN_DIR/$CURRENT_HOST/done" ]; then
    status=$(cat "$RUN_DIR/$CURRENT_HOST/done")
    stop_sshd
    log "worker $CURRENT_HOST: the leader's job ended with exit status $status"
    [ "$status" -eq 0 ] || fail "$status" "the job ended with exit status $status on the leader $LEADER"
    exit 0
  fi
  if [ $contacted = 0 ] && [ -f "$RUN_DIR/$CURRENT_HOST/contacted" ]; then
    contacted=1 waiting_since=$now
    log "worker $CURRENT_HOST: contacted by the leader"
  fi
  if [ $job_seen = 0 ] && [ $(( now - waiting_since )) -ge "$WORKER_TIMEOUT_S" ]; then
    stop_sshd
    [ $contacted = 1 ] && fail 1 "worker $CURRENT_HOST: the leader $LEADER contacted this host but started no job here within ${WORKER_TIMEOUT_S}s"
    fail 1 "worker $CURRENT_HOST: the leader $LEADER did not contact this host within ${WORKER_TIMEOUT_S}s (is it up, and does it reach this host over ${RSH[0]}?)"
  fi
  # The job is here while its daemon runs ranks. Its ranks gone and no word from the leader
  # within PROBE_TIMEOUT_S: the leader is gone or unreachable. The daemon may outlive its ranks
  # then (cut off from mpirun, it waits on TCP for many minutes): it is ended with this host.
  daemons=$(pgrep -d, -x orted || true)
  if [ $contacted = 0 ]; then
    :
  elif [ -n "$daemons" ] && { [ $ranks_seen = 0 ] || pgrep -P "$daemons" >/dev/null; }; then
    job_seen=1 job_gone_since=0
    pgrep -P "$daemons" >/dev/null && ranks_seen=1
  elif [ $job_seen = 1 ]; then
    [ $job_gone_since -gt 0 ] || job_gone_since=$now
    if [ $(( now - job_gone_since )) -ge "$PROBE_TIMEOUT_S" ]; then
      [ -z "$daemons" ] || pkill -KILL -x orted || true
      stop_sshd
      fail 1 "worker $CURRENT_HOST: the job's ranks here ended, but the leader $LEADER did not say how within ${PROBE_TIMEOUT_S}s (is it down, or cut off from this host?)"
    fi
  fi
  sleep 1 & wait $! || true  # wait, not sleep: the TERM trap runs at once
done
