#!/usr/bin/env bash
# SageMaker training container entry point for sdp-train.
#
#   sagemaker-entrypoint.sh [sdp-train arguments...]     e.g. --config /opt/ml/code/job.yaml
#
# Reads /opt/ml/input/config/resourceconfig.json. On the leader (hosts[0]) it waits until
# every host name resolves (SageMaker says they may take a moment), then launches mpirun
# over all hosts with one rank per GPU (SM_NUM_GPUS; one rank per host without GPUs, or
# SDP_PROCS_PER_HOST), on the network interface SageMaker names. Workers start sshd and
# wait for the leader's job to come and go. SDP_DRY_RUN=1 prints the mpirun command instead.
set -euo pipefail

RESOURCE_CONFIG=${SDP_RESOURCE_CONFIG:-/opt/ml/input/config/resourceconfig.json}
SDP_TRAIN=${SDP_TRAIN:-sdp-train}
RESOLVE_TIMEOUT_S=${SDP_RESOLVE_TIMEOUT_S:-300}

die() { echo "sdp-train: error: $*" >&2; exit 2; }

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

if [ -n "${SDP_PROCS_PER_HOST:-}" ]; then
  PROCS_PER_HOST=$SDP_PROCS_PER_HOST
elif [ "${SM_NUM_GPUS:-0}" -gt 0 ]; then
  PROCS_PER_HOST=$SM_NUM_GPUS
else
  PROCS_PER_HOST=1
fi
TOTAL=$(( PROCS_PER_HOST * ${#HOSTS[@]} ))
HOST_LIST=$(printf "%s:$PROCS_PER_HOST," "${HOSTS[@]}"); HOST_LIST=${HOST_LIST%,}

wait_for_hosts() {
  local deadline=$(( $(date +%s) + RESOLVE_TIMEOUT_S ))
  for h in "${HOSTS[@]}"; do
    until getent hosts "$h" >/dev/null; do
      [ "$(date +%s)" -lt "$deadline" ] || die "host '$h' from $RESOURCE_CONFIG did not resolve within ${RESOLVE_TIMEOUT_S}s"
      sleep 1
    done
  done
}

# A spot reclaim gives 120 s after SIGTERM. Open MPI 4's mpirun passes SIGTERM on to the
# ranks only after odls_base_sigkill_timeout seconds and SIGKILLs them as long again later
# (default 1 s each): 30 s lets the ranks finish the step and write their checkpoint.
cmd=(mpirun --allow-run-as-root -np "$TOTAL" -H "$HOST_LIST" --bind-to none
     --mca odls_base_sigkill_timeout "${SDP_SIGKILL_TIMEOUT:-30}"
     -x PATH -x LD_LIBRARY_PATH -x OMP_NUM_THREADS)
if [ -n "$NETWORK_INTERFACE" ]; then
  cmd+=(--mca btl_tcp_if_include "$NETWORK_INTERFACE" --mca oob_tcp_if_include "$NETWORK_INTERFACE"
        -x "NCCL_SOCKET_IFNAME=$NETWORK_INTERFACE")
fi
for var in $(compgen -e | grep -E '^SM_' || true); do cmd+=(-x "$var"); done
cmd+=("$SDP_TRAIN" --resource-config "$RESOURCE_CONFIG" "$@")

if [ "${SDP_DRY_RUN:-0}" = 1 ]; then
  echo "host $CURRENT_HOST ($([ "$CURRENT_HOST" = "$LEADER" ] && echo leader || echo worker)), ${#HOSTS[@]} host(s) x $PROCS_PER_HOST rank(s)"
  [ "$CURRENT_HOST" = "$LEADER" ] && echo "${cmd[*]}"
  exit 0
fi

if [ "${#HOSTS[@]}" -eq 1 ]; then
  exec mpirun --allow-run-as-root -np "$PROCS_PER_HOST" --bind-to none --mca odls_base_sigkill_timeout "${SDP_SIGKILL_TIMEOUT:-30}" "$SDP_TRAIN" --resource-config "$RESOURCE_CONFIG" "$@"
fi
if [ "$CURRENT_HOST" = "$LEADER" ]; then
  wait_for_hosts
  exec "${cmd[@]}"
fi
# Worker: serve the leader's mpirun over ssh, and stay up while its ranks run here.
mkdir -p /run/sshd && /usr/sbin/sshd -D &
until pgrep -x orted >/dev/null; do sleep 1; done
while pgrep -x orted >/dev/null; do sleep 5; done
